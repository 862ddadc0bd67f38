package soak

import "testing"

func TestAgentCommand(t *testing.T) {
	got := agentCommand("/tmp/fth-agent", map[string]string{"scenario": "churn", "churn": "2h0m0s", "funcs": "a b"})
	want := `FTH_NO_CMDLINE=1 /tmp/fth-agent session -events - -poweroff=false -churn=2h0m0s '-funcs=a b' -scenario=churn`
	if got != want {
		t.Errorf("agentCommand =\n%s\nwant\n%s", got, want)
	}
}

func TestKmsgCommand(t *testing.T) {
	got := kmsgCommand("/tmp/fth dir/fth-agent")
	want := `FTH_NO_CMDLINE=1 '/tmp/fth dir/fth-agent' kmsgstream`
	if got != want {
		t.Errorf("kmsgCommand = %s, want %s", got, want)
	}
}
