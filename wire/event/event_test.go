package event

import "testing"

// One spelling per scenario; the storm's old matrix/result spelling is
// still read, anything else is refused.
func TestParseScenario(t *testing.T) {
	for in, want := range map[string]Scenario{"": ScenarioStorm, "storm": ScenarioStorm, "attach-storm": ScenarioStorm, "churn": ScenarioChurn, "bench": ScenarioBench} {
		if got, err := ParseScenario(in); err != nil || got != want {
			t.Errorf("ParseScenario(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseScenario("soak-churn"); err == nil {
		t.Error("ParseScenario(soak-churn) accepted a name no scenario has")
	}
}
