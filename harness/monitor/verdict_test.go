package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestVerdict(t *testing.T) {
	yes, no := true, false
	oops := []results.Finding{{Kind: "oops", Title: "Oops: int3 in arch_scale_cpu_capacity"}}
	tests := []struct {
		name   string
		r      results.Result
		res    Outcome
		done   bool
		want   results.Verdict
		reason string
	}{
		{"clean", results.Result{AgentOK: &yes}, EndDone, true, results.Pass, ""},
		{"finding beats agent ok", results.Result{AgentOK: &yes, Findings: oops}, EndDone, true, results.Fail, "Oops: int3"},
		{"crash ends the guest", results.Result{Findings: oops}, EndExited, false, results.Fail, "Oops: int3"},
		{"hang", results.Result{}, EndSilence, false, results.Fail, "hang: no output for 1m0s"},
		{"panicked, QEMU stayed up", results.Result{Findings: oops}, EndPanic, false, results.Fail, "Oops: int3"},
		{"panic, then the reboot it asked for", results.Result{Findings: oops}, EndReset, false, results.Fail, "Oops: int3"},
		{"triple fault", results.Result{Findings: []results.Finding{{Kind: "reset", Title: silentResetTitle(true)}}}, EndReset, false, results.Fail, "no console report (QEMU logged a triple fault)"},
		{"silent death is an error", results.Result{}, EndExited, false, results.Error, "stopped before the agent reported done"},
		{"deadline", results.Result{}, EndDeadline, false, results.Error, "deadline"},
		{"hung tasks, then the deadline", results.Result{Findings: []results.Finding{{Kind: console.KindHungTask, Title: "INFO: task hung in ftrace_shutdown"}}}, EndDeadline, false, results.Fail, "INFO: task hung"},
		{"hung task, then its tail", results.Result{Findings: []results.Finding{{Kind: console.KindHungTask, Title: "INFO: task hung in dsleep_write"}}}, EndHangReport, false, results.Fail, "INFO: task hung in dsleep_write"},
		{"interrupted", results.Result{}, EndInterrupted, false, results.Error, "interrupted"},
		{"agent not ok", results.Result{AgentOK: &no, AgentReason: "0 of 2000 attached"}, EndDone, true, results.Fail, "agent: 0 of 2000"},
		// The agent's own limit is the harness's, not the kernel's.
		{"agent unjudged", results.Result{AgentOK: &no, AgentUnjudged: true, AgentReason: "race: cannot tell the new trampoline image"}, EndDone, true, results.Error, "agent: race: cannot tell"},
		{"oracle failure beats agent ok", results.Result{AgentOK: &yes, Oracles: []event.Oracle{
			{Name: event.OracleCalibration, OK: true, Checks: 1},
			{Name: event.OracleExact, Function: "__x64_sys_getppid", Expected: 1000, Got: 999},
		}}, EndDone, true, results.Fail, "oracle exact-count failed on __x64_sys_getppid"},
		{"failed summary", results.Result{AgentOK: &yes, Oracles: []event.Oracle{{Name: event.OracleFuncIP, Checks: 90, Failures: 3}}}, EndDone, true, results.Fail, "3 of 90 checks failed"},
		{"skipped oracle is no failure", results.Result{AgentOK: &yes, Oracles: []event.Oracle{{Name: event.OracleExact, Skipped: "disabled"}}}, EndDone, true, results.Pass, ""},
		{"stalled thread", results.Result{AgentOK: &yes, Liveness: &event.Liveness{Stalled: []event.StalledThread{{TID: 7}}}}, EndDone, true, results.Fail, "liveness"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, reason := Verdict(&tt.r, tt.res, tt.done, Spec{Timeouts: Timeouts{Silence: time.Minute, Deadline: time.Hour}}, "")
			if v != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("verdict = %s %q, want %s containing %q", v, reason, tt.want, tt.reason)
			}
		})
	}
}

// Only reports of a hang end a cell early: after an oops or a WARN the
// kernel runs on, and the rest of the run can still find more.
func TestEndsCell(t *testing.T) {
	for k, want := range map[console.Kind]bool{
		console.KindHungTask: true, console.KindRCUStall: true, console.KindWorkqueueStall: true,
		console.KindSoftLockup: true, console.KindHardLockup: true,
		console.KindOops: false, console.KindBug: false, console.KindWarning: false,
		console.KindPanic: false, console.KindFtraceBug: false, console.KindLockdep: false,
	} {
		if got := endsCell(k); got != want {
			t.Errorf("endsCell(%s) = %v, want %v", k, got, want)
		}
	}
}

func TestOutcomeNames(t *testing.T) {
	seen := map[string]bool{}
	for o := EndExited; o < NumOutcomes; o++ {
		name := o.String()
		if name == "" || strings.HasPrefix(name, "outcome(") || seen[name] {
			t.Errorf("outcome %d is named %q: every outcome needs its own name in result.json", int(o), name)
		}
		seen[name] = true
	}
}

// A known finding passes, as known, unless the run asked to include known
// findings; a new finding next to it always fails the cell.
func TestVerdictKnownFindings(t *testing.T) {
	knownOnly := []results.Finding{{Kind: console.KindReset, Title: "reset: the guest reset with no console report", Known: "rcu-read-unlock-special-fentry"}}
	mixed := append([]results.Finding{{Kind: console.KindOops, Title: "Oops: general protection fault in vfs_read"}}, knownOnly...)
	for _, tt := range []struct {
		name     string
		findings []results.Finding
		include  bool
		want     results.Verdict
		reason   string
	}{
		{"known only", knownOnly, false, results.Pass, "known finding rcu-read-unlock-special-fentry ended the run"},
		{"known, included", knownOnly, true, results.Fail, "reset: the guest reset"},
		{"a new one beside it", mixed, false, results.Fail, "Oops: general protection fault in vfs_read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := results.Result{Findings: tt.findings}
			v, reason := Verdict(&r, EndReset, false, Spec{IncludeKnown: tt.include}, "")
			if v != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("verdict %s %q, want %s containing %q", v, reason, tt.want, tt.reason)
			}
		})
	}
}
