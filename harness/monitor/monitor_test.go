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

	"github.com/ftrace-harness/fth/harness/target"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/event"
)

// step is one scripted happening of a fake target: an event after a delay,
// or (cancel) the user pressing Ctrl-C.
type step struct {
	after  time.Duration
	ev     target.Event
	cancel bool
}

// fake is a target.Instance that plays a script. It can pause and explain a
// reset, like QEMU, so the optional capabilities are exercised too.
type fake struct {
	events      chan target.Event
	stop        chan struct{}
	once        sync.Once
	mu          sync.Mutex
	killed      bool
	diagnosed   bool
	paused      bool
	tripleFault bool
}

func newFake(ctx context.Context, cancel context.CancelFunc, script []step) *fake {
	f := &fake{events: make(chan target.Event, 64), stop: make(chan struct{})}
	go func() {
		defer close(f.events)
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

func (f *fake) Events() <-chan target.Event { return f.events }
func (f *fake) Diagnose(ctx context.Context) (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.diagnosed = true
	return "registers.txt", "RIP=ffffffff81000000\n"
}
func (f *fake) Kill() { f.mu.Lock(); f.killed = true; f.mu.Unlock() }
func (f *fake) Close() error {
	f.once.Do(func() { close(f.stop) })
	return nil
}
func (f *fake) Pause(context.Context) error { f.mu.Lock(); f.paused = true; f.mu.Unlock(); return nil }
func (f *fake) ShutdownReason() string      { return "guest-reset" }
func (f *fake) TripleFault() bool           { return f.tripleFault }

func agent(t *testing.T, ev event.Event) target.Event {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return target.Event{Kind: target.Agent, Text: string(b)}
}

func con(line string) target.Event { return target.Event{Kind: target.Console, Text: line} }

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
	exited := step{after: 10 * time.Millisecond, ev: target.Event{Kind: target.Exited}}
	op := step{ev: agent(t, event.Event{Kind: event.KindOp, Op: &event.Op{Phase: "attach", Index: 1474, Function: "some_func"}})}
	knownOp := step{ev: agent(t, event.Event{Kind: event.KindOp, Op: &event.Op{Phase: "attach", Index: 1, Function: "rcu_read_unlock_special"}})}
	hung := fixture(t, "x86_64/hung-task-dsleep-fth-7.3.4")
	panicLog := fixture(t, "x86_64/kernel-bug-invalid-opcode-panic")
	agentCrash := fixture(t, "x86_64/agent-crash-concurrent-map-writes-fth-7.3.4")
	pstore := results.Finding{Source: "pstore", Kind: "panic", Title: "kernel panic: sysrq triggered crash"}

	tests := []struct {
		name        string
		script      []step
		tripleFault bool
		pauseAfter  time.Duration
		wantVerdict results.Verdict
		wantEnded   string
		wantReason  string
		diagnosed   bool
	}{
		{"done", []step{hello, done, exited}, false, 0, results.Pass, "done", "", false},
		{"exit without done", []step{hello, exited}, false, 0, results.Error, "exited", "stopped before the agent reported done", false},
		{"silence", []step{hello}, false, 0, results.Fail, "silence", "hang: no output for 300ms", true},
		{"silence after a host pause", cat([]step{hello}, liveness(t, 100*time.Millisecond)), false, 50 * time.Millisecond, results.Fail, "silence", "hang: no output", true},
		{"partial hang ends after its tail", cat([]step{hello}, cons(hung), liveness(t, 3*time.Second)), false, 0, results.Fail, "hang-report", "INFO: task hung in msleep", true},
		{"panic that never resets", cat([]step{hello}, cons(panicLog)), false, 0, results.Fail, "panic", "kernel BUG in do_journal_end", true},
		{"silent reset", []step{hello, {ev: target.Event{Kind: target.Reset}}}, false, 0, results.Fail, "reset", "reset: the guest reset with no console report", true},
		{"silent reset, triple fault", []step{hello, {ev: target.Event{Kind: target.Reset}}}, true, 0, results.Fail, "reset", "QEMU logged a triple fault", true},
		{"reset after done is the agent's own", []step{hello, done, {ev: target.Event{Kind: target.Reset}}}, false, 0, results.Pass, "done", "", false},
		{"board reboot, resumed", cat([]step{hello, {ev: target.Event{Kind: target.Lost}}},
			[]step{{after: 500 * time.Millisecond, ev: target.Event{Kind: target.Rebooted, Resumed: true, BootID: "b2", Findings: []results.Finding{pstore}}}},
			[]step{hello, done, exited}), false, 0, results.Fail, "done", "kernel panic: sysrq triggered crash", false},
		{"board reboot with a report still open", cat([]step{hello}, cons(hung[:22]),
			[]step{{ev: target.Event{Kind: target.Rebooted, BootID: "b2"}}}), false, 0, results.Fail, "rebooted", "INFO: task hung", false},
		{"board network blip", cat([]step{hello, {ev: target.Event{Kind: target.Lost}}},
			[]step{{after: 500 * time.Millisecond, ev: target.Event{Kind: target.Back}}, hello, done, exited}), false, 0, results.Pass, "done", "", false},
		{"board unreachable", []step{hello, {ev: target.Event{Kind: target.Lost}}, {ev: target.Event{Kind: target.Unreachable, Err: errors.New("gave up")}}}, false, 0, results.Fail, "unreachable", "board unreachable", false},
		{"interrupted", cat([]step{hello}, []step{{after: 50 * time.Millisecond, cancel: true}}, liveness(t, time.Second)), false, 0, results.Error, "interrupted", "interrupted", false},
		{"interrupted after an oops is a fail", cat([]step{hello}, cons(panicLog[:10]), []step{{after: 50 * time.Millisecond, cancel: true}}, liveness(t, time.Second)), false, 0, results.Fail, "interrupted", "kernel BUG in __reiserfs_panic", false},
		{"deadline", cat([]step{hello}, liveness(t, 3*time.Second)), false, 0, results.Error, "deadline", "cell deadline of 1.5s passed", true},
		{"in flight when the guest died", []step{hello, op, exited}, false, 0, results.Error, "exited", "(during attach #1474: some_func)", false},
		{"a known finding's trigger in flight", []step{hello, knownOp, {ev: target.Event{Kind: target.Reset}}}, false, 0, results.Pass, "reset", "known finding rcu-read-unlock-special-fentry ended the run", true},
		{"a report from before the known trigger is not put down to it", cat([]step{hello}, cons(panicLog[:10]), []step{knownOp, {ev: target.Event{Kind: target.Reset}}}), false, 0, results.Fail, "reset", "kernel BUG in __reiserfs_panic", true},
		{"stop at the first finding (fth mutate)", cat([]step{hello}, cons(panicLog[:10]), liveness(t, 3*time.Second)), false, 0, results.Fail, "hang-report", "kernel BUG in __reiserfs_panic", true},
		{"the agent's own crash, and init's panic after it, are the harness's", cat([]step{hello}, cons(agentCrash)), false, 0, results.Error, "panic", "agent crashed: fatal error: concurrent map writes", true},
		{"an oops the kernel survives runs on", cat([]step{hello}, cons(panicLog[:10]), liveness(t, 3*time.Second)), false, 0, results.Fail, "deadline", "kernel BUG in __reiserfs_panic", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := newFake(ctx, cancel, tt.script)
			f.tripleFault = tt.tripleFault
			w, err := results.NewCellWriter(t.TempDir(), results.Result{Cell: "c"})
			if err != nil {
				t.Fatal(err)
			}
			spec := Spec{
				Deadline: 1500 * time.Millisecond, Silence: 300 * time.Millisecond, HangTail: 200 * time.Millisecond,
				PauseAfter: tt.pauseAfter, StopAtFinding: strings.HasPrefix(tt.name, "stop at"),
				Graces: Graces{Reset: 50 * time.Millisecond, Panic: 200 * time.Millisecond, Done: 100 * time.Millisecond, Drain: 20 * time.Millisecond,
					Finding: 100 * time.Millisecond, Sysrq: 100 * time.Millisecond},
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
			if tt.pauseAfter > 0 && !f.paused {
				t.Error("the target was never paused")
			}
			if r.Seed != "42" {
				t.Errorf("seed = %q: the hello did not reach result.json", r.Seed)
			}
		})
	}
}
