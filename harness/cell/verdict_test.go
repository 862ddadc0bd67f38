package cell

import (
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/event"
)

func TestVerdict(t *testing.T) {
	yes, no := true, false
	oops := []results.Finding{{Kind: "oops", Title: "Oops: int3 in arch_scale_cpu_capacity"}}
	tests := []struct {
		name   string
		r      results.Result
		res    outcome
		done   bool
		want   results.Verdict
		reason string
	}{
		{"clean", results.Result{AgentOK: &yes}, outDone, true, results.Pass, ""},
		{"finding beats agent ok", results.Result{AgentOK: &yes, Findings: oops}, outDone, true, results.Fail, "Oops: int3"},
		{"crash ends the guest", results.Result{Findings: oops}, outExited, false, results.Fail, "Oops: int3"},
		{"hang", results.Result{}, outHang, false, results.Fail, "hang: no output for 1m0s"},
		{"panicked, QEMU stayed up", results.Result{Findings: oops}, outDead, false, results.Fail, "Oops: int3"},
		{"silent death is an error", results.Result{}, outExited, false, results.Error, "stopped before the agent reported done"},
		{"deadline", results.Result{}, outDeadline, false, results.Error, "deadline"},
		{"interrupted", results.Result{}, outInterrupted, false, results.Error, "interrupted"},
		{"agent not ok", results.Result{AgentOK: &no, AgentReason: "0 of 2000 attached"}, outDone, true, results.Fail, "agent: 0 of 2000"},
		{"stalled thread", results.Result{AgentOK: &yes, Liveness: &event.Liveness{Stalled: []event.StalledThread{{TID: 7}}}}, outDone, true, results.Fail, "liveness"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, reason := verdict(&tt.r, tt.res, tt.done, time.Minute, time.Hour, "")
			if v != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("verdict = %s %q, want %s containing %q", v, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestAgentCmdlineSorted(t *testing.T) {
	got := strings.Join(agentCmdline(map[string]string{"n": "2000", "crash": "sysrq-c", "hold": "5s"}), " ")
	if got != "fth.crash=sysrq-c fth.hold=5s fth.n=2000" {
		t.Errorf("agentCmdline = %q", got)
	}
}
