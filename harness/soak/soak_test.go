package soak

import (
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/cell"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/monitor"
)

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

// A soak and a cell at the same scale wait the same: one constructor
// scales both, graces included. The soak's deadline is its duration, which
// the agent keeps to on any target, plus the scaled slack.
func TestTimeoutsLikeACell(t *testing.T) {
	for _, tt := range []struct {
		name  string
		scale float64
	}{
		{"a real board", 1},
		{"a board emulated under TCG", 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			soak := Config{TimeoutScale: tt.scale, Duration: time.Hour, Silence: 90 * time.Second}.Timeouts()
			c := cell.Spec{VM: qemu.Config{Arch: arch.Arch{TimeoutScale: tt.scale}}, Deadline: deadlineSlack, Silence: 90 * time.Second}.Timeouts()
			c.Deadline += time.Hour
			if soak != c {
				t.Errorf("soak's timeouts %+v\ncell's %+v", soak, c)
			}
			if want := time.Duration(float64(monitor.DefaultGraces().Sysrq) * tt.scale); soak.Graces.Sysrq != want {
				t.Errorf("the sysrq grace is %s, want %s: graces scale too", soak.Graces.Sysrq, want)
			}
		})
	}
	if got := (Config{}).Timeouts(); got.Silence != defaultSilence || got.Scale != 1 {
		t.Errorf("the zero Config's timeouts %+v: want the default silence at native speed", got)
	}
}
