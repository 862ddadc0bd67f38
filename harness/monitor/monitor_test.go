package monitor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/wire/event"
)

// step is one scripted happening of a fake target: an event after a delay,
// or (cancel) the user pressing Ctrl-C.
type step struct {
	after  time.Duration
	ev     machine.Event
	cancel bool
}

// fake is a machine.Instance that plays a script. It can pause and explain a
// reset, like QEMU, so the optional capabilities are exercised too.
type fake struct {
	events      chan machine.Event
	stop        chan struct{}
	once        sync.Once
	mu          sync.Mutex
	killed      bool
	diagnosed   bool
	paused      bool
	tripleFault bool
	// rep is the report Diagnose was given.
	rep *results.Finding
	// diagnoseOut are console lines that Diagnose sets off, as a board's
	// sysrq w over SSH comes back through its kernel log.
	diagnoseOut []string
	// lastWords are delivered after Close, as QEMU's readers deliver what
	// the guest said last.
	lastWords []machine.Event
}

func newFake(ctx context.Context, cancel context.CancelFunc, script []step) *fake {
	f := &fake{events: make(chan machine.Event, 64), stop: make(chan struct{})}
	go func() {
		defer close(f.events)
		defer f.sayLastWords()
		for _, s := range script {
			select {
			case <-time.After(s.after):
			case <-f.stop:
				return
			}
			if s.cancel {
				cancel()
				continue
			}
			select {
			case f.events <- s.ev:
			case <-f.stop:
				return
			}
		}
		<-f.stop
	}()
	return f
}

func (f *fake) sayLastWords() {
	for _, e := range f.lastWords {
		f.events <- e
	}
}

func (f *fake) Events() <-chan machine.Event { return f.events }
func (f *fake) Diagnose(ctx context.Context, rep *results.Finding) machine.Diagnosis {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diagnosed, f.rep = true, rep
	for _, l := range f.diagnoseOut {
		f.events <- con(l)
	}
	return machine.Diagnosis{File: "registers.txt", Text: "RIP=ffffffff81000000\n", Wait: len(f.diagnoseOut) > 0}
}
func (f *fake) Kill() { f.mu.Lock(); f.killed = true; f.mu.Unlock() }
func (f *fake) Close() error {
	f.once.Do(func() { close(f.stop) })
	return nil
}
func (f *fake) Pause(context.Context) error { f.mu.Lock(); f.paused = true; f.mu.Unlock(); return nil }
func (f *fake) ShutdownReason() string      { return "guest-reset" }
func (f *fake) TripleFault() bool           { return f.tripleFault }

func agent(t *testing.T, ev event.Event) machine.Event {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return machine.Event{Kind: machine.Agent, Text: string(b)}
}

func con(line string) machine.Event { return machine.Event{Kind: machine.Console, Text: line} }

// fixture returns the kernel log lines of a real console log from the
// crash parser's corpus, without its expectation header.
func fixture(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("../../results/console/testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	started := false
	for sc.Scan() {
		if !started && !strings.HasPrefix(sc.Text(), "[") {
			continue
		}
		started = true
		lines = append(lines, sc.Text())
	}
	return lines
}

func cons(lines []string) []step {
	var s []step
	for _, l := range lines {
		s = append(s, step{ev: con(l)})
	}
	return s
}

// A board sends liveness every 2 s; the script sends it every 20 ms for d.
func liveness(t *testing.T, d time.Duration) []step {
	var s []step
	for i := time.Duration(0); i < d; i += 20 * time.Millisecond {
		s = append(s, step{after: 20 * time.Millisecond, ev: agent(t, event.Event{Kind: event.KindLiveness, Liveness: &event.Liveness{Threads: 2, Iterations: 10}})})
	}
	return s
}

func cat(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// The monitor's case table: every way a cell ends, on a fake target, with
// the verdict, what ended it, the title and the forensics it must leave.
// The same monitor runs QEMU VMs and boards, so these hold for both.
func TestMonitorCases(t *testing.T) {
	hello := step{ev: agent(t, event.Event{Kind: event.KindHello, Hello: &event.Hello{KernelRelease: "7.3.4", PreemptModel: "full", Args: map[string]string{"seed": "42"}}})}
	done := step{ev: agent(t, event.Event{Kind: event.KindDone, Done: &event.Done{OK: true}})}
	exited := step{after: 10 * time.Millisecond, ev: machine.Event{Kind: machine.Exited}}
	op := step{ev: agent(t, event.Event{Kind: event.KindOp, Op: &event.Op{Phase: "attach", Index: 1474, Function: "some_func"}})}
	knownOp := step{ev: agent(t, event.Event{Kind: event.KindOp, Op: &event.Op{Phase: "attach", Index: 1, Function: "rcu_read_unlock_special"}})}
	hung := fixture(t, "x86_64/hung-task-dsleep-fth-7.3.4")
	panicLog := fixture(t, "x86_64/kernel-bug-invalid-opcode-panic")
	agentCrash := fixture(t, "x86_64/agent-crash-concurrent-map-writes-fth-7.3.4")
	pstore := results.Finding{Source: "pstore", Kind: "panic", Title: "kernel panic: sysrq triggered crash"}

	blocked := []string{
		"[ 1.0] sysrq: Show Blocked State",
		"[ 1.0] task:uinit           state:D stack:0     pid:54    tgid:48    ppid:1      task_flags:0x400140 flags:0x00080000",
		"[ 1.0] Call Trace:",
		"[ 1.0]  <TASK>",
		"[ 1.0]  __schedule+0x358/0x860",
		"[ 1.0]  schedule+0x28/0xa0",
		"[ 1.0]  __mutex_lock.constprop.0+0x2f1/0x6a0",
		"[ 1.0]  update_ftrace_direct_mod+0x5c/0x2a0",
		"[ 1.0]  modify_fentry+0x1b/0x30",
		"[ 1.0]  </TASK>",
	}
	oracle := agent(t, event.Event{Kind: event.KindOracle, Oracle: &event.Oracle{Name: event.OracleExact, Function: "fth_target_counted", Expected: 1000, Got: 0, Msg: "saw 0 of 1000 calls"}})
	// A soak's timeouts, from the constructor a soak uses, at a scale
	// that makes its 60 s silence 300 ms: its graces are scaled with it.
	soak := NewTimeouts(0.005, 300*time.Second, 60*time.Second)

	// extra are the columns few cases need.
	type extra struct {
		// lastWords come after Close; diagnoseOut when Diagnose runs.
		lastWords   []machine.Event
		diagnoseOut []string
		// timeouts replaces the table's own.
		timeouts *Timeouts
		// wantRep is the kind of report Diagnose must be given; wantHang
		// what the hang explanation must say.
		wantRep, wantHang string
	}
	tests := []struct {
		name        string
		script      []step
		tripleFault bool
		pauseAfter  time.Duration
		wantVerdict results.Verdict
		wantEnded   string
		wantReason  string
		diagnosed   bool
		extra
	}{
		{"done", []step{hello, done, exited}, false, 0, results.Pass, "done", "", false, extra{}},
		{"exit without done", []step{hello, exited}, false, 0, results.Error, "exited", "stopped before the agent reported done", false, extra{}},
		{"silence", []step{hello}, false, 0, results.Fail, "silence", "hang: no output for 300ms", true, extra{}},
		{"silence after a host pause", cat([]step{hello}, liveness(t, 100*time.Millisecond)), false, 50 * time.Millisecond, results.Fail, "silence", "hang: no output", true, extra{}},
		{"partial hang ends after its tail", cat([]step{hello}, cons(hung), liveness(t, 3*time.Second)), false, 0, results.Fail, "hang-report", "INFO: task hung in msleep", true, extra{}},
		{"panic that never resets", cat([]step{hello}, cons(panicLog)), false, 0, results.Fail, "panic", "kernel BUG in do_journal_end", true, extra{}},
		{"silent reset", []step{hello, {ev: machine.Event{Kind: machine.Reset}}}, false, 0, results.Fail, "reset", "reset: the guest reset with no console report", true, extra{}},
		{"silent reset, triple fault", []step{hello, {ev: machine.Event{Kind: machine.Reset}}}, true, 0, results.Fail, "reset", "QEMU logged a triple fault", true, extra{}},
		{"reset after done is the agent's own", []step{hello, done, {ev: machine.Event{Kind: machine.Reset}}}, false, 0, results.Pass, "done", "", false, extra{}},
		{"board reboot, resumed", cat([]step{hello, {ev: machine.Event{Kind: machine.Lost}}},
			[]step{{after: 500 * time.Millisecond, ev: machine.Event{Kind: machine.Rebooted, Resumed: true, BootID: "b2", Findings: []results.Finding{pstore}}}},
			[]step{hello, done, exited}), false, 0, results.Fail, "done", "kernel panic: sysrq triggered crash", false, extra{}},
		{"board reboot with a report still open", cat([]step{hello}, cons(hung[:22]),
			[]step{{ev: machine.Event{Kind: machine.Rebooted, BootID: "b2"}}}), false, 0, results.Fail, "rebooted", "INFO: task hung", false, extra{}},
		{"board network blip", cat([]step{hello, {ev: machine.Event{Kind: machine.Lost}}},
			[]step{{after: 500 * time.Millisecond, ev: machine.Event{Kind: machine.Back}}, hello, done, exited}), false, 0, results.Pass, "done", "", false, extra{}},
		{"board unreachable", []step{hello, {ev: machine.Event{Kind: machine.Lost}}, {ev: machine.Event{Kind: machine.Unreachable, Err: errors.New("gave up")}}}, false, 0, results.Fail, "unreachable", "board unreachable", false, extra{}},
		{"interrupted", cat([]step{hello}, []step{{after: 50 * time.Millisecond, cancel: true}}, liveness(t, time.Second)), false, 0, results.Error, "interrupted", "interrupted", false, extra{}},
		{"interrupted after an oops is a fail", cat([]step{hello}, cons(panicLog[:10]), []step{{after: 50 * time.Millisecond, cancel: true}}, liveness(t, time.Second)), false, 0, results.Fail, "interrupted", "kernel BUG in __reiserfs_panic", false, extra{}},
		{"deadline", cat([]step{hello}, liveness(t, 3*time.Second)), false, 0, results.Error, "deadline", "cell deadline of 1.5s passed", true, extra{}},
		{"in flight when the guest died", []step{hello, op, exited}, false, 0, results.Error, "exited", "(during attach #1474: some_func)", false, extra{}},
		{"a known finding's trigger in flight", []step{hello, knownOp, {ev: machine.Event{Kind: machine.Reset}}}, false, 0, results.Pass, "reset", "known finding rcu-read-unlock-special-fentry ended the run", true, extra{}},
		{"a report from before the known trigger is not put down to it", cat([]step{hello}, cons(panicLog[:10]), []step{knownOp, {ev: machine.Event{Kind: machine.Reset}}}), false, 0, results.Fail, "reset", "kernel BUG in __reiserfs_panic", true, extra{}},
		{"stop at the first finding (fth mutate)", cat([]step{hello}, cons(panicLog[:10]), liveness(t, 3*time.Second)), false, 0, results.Fail, "hang-report", "kernel BUG in __reiserfs_panic", true, extra{}},
		// A failed oracle decides the verdict as a report does: the cell
		// ends after the same tail, the guest still running, and the time
		// of the failure is kept.
		{"stop at an oracle's failure (fth mutate)", cat([]step{hello, op, {ev: oracle}}, liveness(t, 3*time.Second)), false, 0, results.Fail, "oracle", "oracle", false, extra{}},
		{"an oracle's failure runs on without stop at the first finding, and outranks the deadline", cat([]step{hello, {ev: oracle}}, liveness(t, 3*time.Second)), false, 0, results.Fail, "deadline", "oracle", true, extra{}},
		{"the agent's own crash, and init's panic after it, are the harness's", cat([]step{hello}, cons(agentCrash)), false, 0, results.Error, "panic", "agent crashed: fatal error: concurrent map writes", true, extra{}},
		{"an oops the kernel survives runs on", cat([]step{hello}, cons(panicLog[:10]), liveness(t, 3*time.Second)), false, 0, results.Fail, "deadline", "kernel BUG in __reiserfs_panic", true, extra{}},
		// The agent's last lines come after the guest went: read while
		// draining, they count as any other.
		{"a done read while draining is applied", []step{hello, exited}, false, 0, results.Pass, "exited", "", false,
			extra{lastWords: []machine.Event{done.ev}}},
		{"an oracle's failure read while draining is applied", []step{hello, exited}, false, 0, results.Fail, "exited", "oracle", false,
			extra{lastWords: []machine.Event{oracle, done.ev}}},
		{"a console report read while draining is applied", cat([]step{hello}, cons(panicLog[:4]), []step{exited}), false, 0, results.Fail, "exited", "kernel BUG in", false,
			extra{lastWords: []machine.Event{con(panicLog[4]), con(panicLog[5]), con(panicLog[6]), done.ev}}},
		// A board's Diagnose asks for the blocked tasks over SSH; they
		// come back on the console, and the explanation must see them.
		{"the blocked tasks Diagnose set off reach the hang explanation", []step{hello}, false, 0, results.Fail, "silence", "hang: uinit blocked in update_ftrace_direct_mod", true,
			extra{diagnoseOut: blocked, wantRep: string(console.KindHang), wantHang: "blocked in update_ftrace_direct_mod"}},
		{"a hang report is the report Diagnose is given", cat([]step{hello}, cons(hung), liveness(t, 3*time.Second)), false, 0, results.Fail, "hang-report", "INFO: task hung in msleep", true,
			extra{wantRep: string(console.KindHungTask)}},
		{"a soak's scaled timeouts", []step{hello}, false, 0, results.Fail, "silence", "hang: no output for 300ms", true,
			extra{timeouts: &soak, wantRep: string(console.KindHang)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := newFake(ctx, cancel, tt.script)
			f.tripleFault, f.lastWords, f.diagnoseOut = tt.tripleFault, tt.lastWords, tt.diagnoseOut
			w, err := results.NewCellWriter(t.TempDir(), results.Result{Cell: "c"})
			if err != nil {
				t.Fatal(err)
			}
			spec := Spec{
				Timeouts: Timeouts{Deadline: 1500 * time.Millisecond, Silence: 300 * time.Millisecond, HangTail: 200 * time.Millisecond,
					Graces: Graces{Reset: 50 * time.Millisecond, Panic: 200 * time.Millisecond, Done: 100 * time.Millisecond, Drain: 20 * time.Millisecond,
						Finding: 100 * time.Millisecond, Diagnose: time.Second, Sysrq: 100 * time.Millisecond, Quiet: 20 * time.Millisecond}},
				PauseAfter: tt.pauseAfter, StopAtFinding: strings.HasPrefix(tt.name, "stop at"),
			}
			if tt.timeouts != nil {
				spec.Timeouts = *tt.timeouts
			}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			if err := Run(ctx, log, w, f, spec); err != nil {
				t.Fatal(err)
			}
			r := w.Result()
			if r.Verdict != tt.wantVerdict || r.Ended != tt.wantEnded || !strings.Contains(r.Reason, tt.wantReason) {
				t.Errorf("verdict %s, ended %q, reason %q; want %s, %q, reason containing %q", r.Verdict, r.Ended, r.Reason, tt.wantVerdict, tt.wantEnded, tt.wantReason)
			}
			if f.diagnosed != tt.diagnosed {
				t.Errorf("diagnosed = %v, want %v", f.diagnosed, tt.diagnosed)
			}
			if tt.diagnosed {
				if _, err := os.Stat(w.Path("registers.txt")); err != nil || r.Registers != "registers.txt" || !f.killed {
					t.Errorf("forensics: registers.txt %v, result names %q, killed %v", err, r.Registers, f.killed)
				}
			}
			if tt.wantRep != "" && (f.rep == nil || string(f.rep.Kind) != tt.wantRep) {
				t.Errorf("Diagnose was given %+v, want a %s report", f.rep, tt.wantRep)
			}
			if tt.wantHang != "" && (r.Hang == nil || !strings.Contains(r.Hang.Title, tt.wantHang)) {
				t.Errorf("hang explanation %+v, want one saying %q", r.Hang, tt.wantHang)
			}
			if tt.pauseAfter > 0 && !f.paused {
				t.Error("the target was never paused")
			}
			if r.Seed != "42" {
				t.Errorf("seed = %q: the hello did not reach result.json", r.Seed)
			}
			if r.Ended == "oracle" && (strings.Contains(r.Reason, "(during") || r.InFlight != nil) {
				t.Errorf("reason %q, in flight %+v: a cell stopped after an oracle's failure was still running, and names no operation in flight", r.Reason, r.InFlight)
			}
			if failed := strings.Contains(tt.name, "oracle's failure"); (r.Timings.OracleFailedSeconds > 0) != failed {
				t.Errorf("oracle_failed_seconds = %v; want it set only when an oracle failed while the cell ran", r.Timings.OracleFailedSeconds)
			}
		})
	}
}
