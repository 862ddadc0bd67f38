package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/churnrun"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

func TestParsePreempt(t *testing.T) {
	for in, want := range map[string]string{
		"none voluntary (full) lazy\n": "full",
		"(none) voluntary full":        "none",
		"none voluntary full (lazy)":   "lazy",
		"none voluntary full":          "",
		"":                             "",
		"()":                           "",
	} {
		if got := parsePreempt(in); got != want {
			t.Errorf("parsePreempt(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSelectFuncs(t *testing.T) {
	cands := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	one := selectFuncs(cands, 5, 42)
	two := selectFuncs(cands, 5, 42)
	if !slices.Equal(one, two) || len(one) != 5 {
		t.Errorf("same seed, different picks: %v vs %v", one, two)
	}
	if other := selectFuncs(cands, 8, 43); slices.Equal(selectFuncs(cands, 8, 42), other) {
		t.Errorf("seeds 42 and 43 gave the same order %v", other)
	}
	if all := selectFuncs(cands, options.All, 1); len(all) != len(cands) {
		t.Errorf("All picked %d", len(all))
	}
	if many := selectFuncs(cands, 100, 1); len(many) != len(cands) {
		t.Errorf("n > candidates picked %d", len(many))
	}
	if none := selectFuncs(cands, 0, 1); len(none) != 0 {
		t.Errorf("n=0 picked %v", none)
	}
	if !slices.IsSorted(cands) {
		t.Error("selectFuncs modified its input")
	}
	// A prefix of a larger selection: growing n keeps earlier picks.
	if big := selectFuncs(cands, 7, 42); !slices.Equal(big[:5], one) {
		t.Errorf("n=7 %v does not extend n=5 %v", big, one)
	}
}

func TestVerdict(t *testing.T) {
	stall := map[int64]time.Duration{7: 25 * time.Second, 3: 21500 * time.Millisecond}
	tests := []struct {
		name   string
		a      agent
		runErr error
		stalls map[int64]time.Duration
		ok     bool
		reason string
		// unjudged: the agent's own limit, an error on the host.
		unjudged bool
	}{
		{"clean", agent{selected: 10, attached: 3}, nil, nil, true, "", false},
		{"attach failures alone are fine", agent{selected: 10, attached: 1}, nil, map[int64]time.Duration{}, true, "", false},
		{"nothing selected", agent{selected: 0, attached: 0}, nil, nil, true, "", false},
		{"nothing attached", agent{selected: 10, attached: 0}, nil, nil, false, "no trampoline attached (0 of 10 selected)", false},
		{"phase error", agent{selected: 10, attached: 10}, errors.New("attach phase: context canceled"), stall, false, "attach phase: context canceled", false},
		{"a limit of the agent's", agent{}, fmt.Errorf("race scenario: %w", emit.Unjudged(errors.New("race: cannot tell the new trampoline image"))), nil, false,
			"race scenario: race: cannot tell the new trampoline image", true},
		{"stall", agent{selected: 10, attached: 10, opts: options.Options{Stall: 20 * time.Second}}, nil, stall, false,
			"2 hammer thread(s) stalled beyond 20s: tid 3 for 21.5s, tid 7 for 25s", false},
		{"stall and nothing attached", agent{selected: 1, opts: options.Options{Stall: time.Second}}, nil, map[int64]time.Duration{1: 2 * time.Second}, false,
			"no trampoline attached (0 of 1 selected); 1 hammer thread(s) stalled beyond 1s: tid 1 for 2s", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.a.verdict(tt.runErr, tt.stalls)
			if d.OK != tt.ok || d.Reason != tt.reason || d.Unjudged != tt.unjudged {
				t.Errorf("verdict = %+v, want ok=%v reason=%q unjudged=%v", d, tt.ok, tt.reason, tt.unjudged)
			}
		})
	}
}

// fakeSystem records the kernel actions run would take.
type fakeSystem struct {
	stdout, stderr bytes.Buffer
	files          map[string]string
	rebooted       int
	crashed        int
	consoleLevel   int
	doneAtReboot   int
	mu             sync.Mutex
	kmsgLines      []string
	exits          []int
}

func (f *fakeSystem) system(t *testing.T, ppid int) system {
	return system{
		stdout: &f.stdout,
		stderr: &f.stderr,
		readFile: func(p string) ([]byte, error) {
			if s, ok := f.files[p]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		},
		getenv:    func(string) string { return "" },
		virtioDir: t.TempDir(),
		devDir:    t.TempDir(),
		ppid:      ppid,
		numCPU:    2,
		now:       func() time.Time { return time.Unix(1700000000, 0) },
		release:   func() string { return "7.3.0-fth" },
		mountFS:   func() error { return nil },
		sync:      func() {},
		sleep:     func(time.Duration) {},
		reboot: func() error {
			f.rebooted++
			f.doneAtReboot = strings.Count(f.stdout.String(), `"kind":"done"`)
			return errors.New("not really")
		},
		sysrqCrash: func() error { f.crashed++; return nil },
		hangTask:   func() error { return errors.New("no hang injection outside a VM") },
		consoleLevel: func(n int) error {
			f.consoleLevel = n
			return nil
		},
		kmsg: func(line string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.kmsgLines = append(f.kmsgLines, line)
		},
		exit: func(code int) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.exits = append(f.exits, code)
		},
	}
}

func events(t *testing.T, b []byte) []event.Event {
	t.Helper()
	var out []event.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e event.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestRunBadOptionsStillSendsDone(t *testing.T) {
	f := &fakeSystem{files: map[string]string{
		cmdlinePath: "console=ttyS0 fth.n=lots",
		preemptPath: "none voluntary (full) lazy",
	}}
	err := run(context.Background(), nil, f.system(t, 1))
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("run = %v, want an error with exit code 1", err)
	}
	evs := events(t, f.stdout.Bytes())
	if len(evs) < 2 || evs[0].Kind != event.KindHello || evs[len(evs)-1].Kind != event.KindDone {
		t.Fatalf("events = %+v, want hello first and done last", evs)
	}
	h := evs[0].Hello
	if h.KernelRelease != "7.3.0-fth" || h.CPUs != 2 || h.PreemptModel != "full" {
		t.Errorf("hello = %+v", h)
	}
	d := evs[len(evs)-1].Done
	if d.OK || !strings.Contains(d.Reason, "fth.n") {
		t.Errorf("done = %+v, want a reason naming fth.n", d)
	}
	// fth.* keys on the cmdline and PID 1 as parent: the VM default is to
	// power off, after Done.
	if f.rebooted != 1 || f.doneAtReboot != 1 {
		t.Errorf("rebooted %d times with %d done events before, want 1 and 1", f.rebooted, f.doneAtReboot)
	}
	if !strings.Contains(f.stderr.String(), "warning") {
		t.Errorf("no stdout-fallback warning on stderr: %q", f.stderr.String())
	}
}

// The console log level is raised before anything else can hang the kernel,
// so that a hung-task report's stack reaches the console.
func TestRunSetsConsoleLogLevel(t *testing.T) {
	for cmdline, want := range map[string]int{
		"console=ttyS0 fth.hold=0s fth.n=0 fth.crash=none": 7,
		"console=ttyS0 fth.hold=0s fth.n=0 fth.loglevel=4": 4,
		"console=ttyS0 fth.hold=0s fth.n=0 fth.loglevel=0": -1,
	} {
		f := &fakeSystem{files: map[string]string{cmdlinePath: cmdline, preemptPath: "(full)"}}
		f.consoleLevel = -1
		_ = run(context.Background(), nil, f.system(t, 1))
		if f.consoleLevel != want {
			t.Errorf("%s: console log level set to %d, want %d (-1: left alone)", cmdline, f.consoleLevel, want)
		}
	}
}

func TestRunNeverPowersOffOutsideVM(t *testing.T) {
	f := &fakeSystem{files: map[string]string{}}
	// Reparented to PID 1 but no fth.* keys, no port, no FTH_IN_VM.
	err := run(context.Background(), []string{"-threads=0"}, f.system(t, 1))
	if err == nil {
		t.Fatal("run with -threads=0 succeeded")
	}
	if f.rebooted != 0 {
		t.Error("rebooted outside the VM")
	}
}

func TestRunHelp(t *testing.T) {
	f := &fakeSystem{files: map[string]string{}}
	err := run(context.Background(), []string{"-h"}, f.system(t, 4242))
	if exitCode(err) != 0 {
		t.Errorf("run(-h) = %v, want exit code 0", err)
	}
	if !strings.Contains(f.stderr.String(), "-maxargs") {
		t.Errorf("usage missing from stderr: %q", f.stderr.String())
	}
}

func TestExitCode(t *testing.T) {
	if exitCode(nil) != 0 || exitCode(flag.ErrHelp) != 0 || exitCode(errors.New("x")) != 1 {
		t.Error("exitCode mapping wrong")
	}
}

func TestFormatReasons(t *testing.T) {
	if got := formatReasons(nil); got != "none" {
		t.Errorf("formatReasons(nil) = %q", got)
	}
	got := formatReasons(map[inventory.Reason]int{inventory.NoBTF: 3, inventory.Deny: 1})
	if got != "deny=1 no_btf=3" {
		t.Errorf("formatReasons = %q", got)
	}
}

// TestRunInVM runs the whole agent against the real kernel with a small
// selection. It needs FTH_IN_VM=1 (set it on the guest's kernel command line
// or environment): on a host it would attach real trampolines.
func TestRunInVM(t *testing.T) {
	if os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_IN_VM=1 inside the test VM")
	}
	sys := realSystem()
	var out bytes.Buffer
	sys.stdout = &out
	err := run(context.Background(), []string{"-n=50", "-hold=2s", "-poweroff=false", "-events=-", "-seed=1"}, sys)
	evs := events(t, out.Bytes())
	if err != nil {
		t.Fatalf("run = %v; events:\n%s", err, out.String())
	}
	last := evs[len(evs)-1]
	if last.Kind != event.KindDone || !last.Done.OK {
		t.Errorf("last event = %+v", last)
	}
	var phases []string
	for _, e := range evs {
		if e.Kind == event.KindPhase {
			phases = append(phases, e.Phase.Name)
		}
	}
	if !slices.Equal(phases, []string{"load", "attach", "detach"}) {
		t.Errorf("phases = %v", phases)
	}
}

// The churn stage's reasons are the agent's, after its own.
func TestChurnVerdict(t *testing.T) {
	a := agent{}
	if d := a.verdict(nil, nil); !d.OK {
		t.Errorf("clean churn verdict = %+v", d)
	}
	a = agent{selected: 1, churn: churnrun.Result{
		Oracle: []string{"exact-count __x64_sys_getppid: expected 1000, got 999"},
		Other:  []string{"churn: no fentry attached in 3 tries"},
	}}
	d := a.verdict(nil, nil)
	want := "no trampoline attached (0 of 1 selected); 1 oracle failure(s): exact-count __x64_sys_getppid: expected 1000, got 999; churn: no fentry attached in 3 tries"
	if d.OK || d.Reason != want {
		t.Errorf("verdict = %+v, want reason %q", d, want)
	}
}

// TestRunChurnInVM runs a short churn scenario against the real kernel and
// checks that it passes and leaves tracefs and the preemption model as it
// found them. It needs FTH_IN_VM=1 and root.
func TestRunChurnInVM(t *testing.T) {
	if os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_IN_VM=1 inside the test VM")
	}
	sys := realSystem()
	before, _ := os.ReadFile(preemptPath)
	var out bytes.Buffer
	sys.stdout = &out
	err := run(context.Background(), []string{"-scenario=churn", "-churn=8s", "-n=0", "-hot=4", "-exactevery=2s",
		"-preemptevery=1s", "-poweroff=false", "-events=-", "-seed=1"}, sys)
	evs := events(t, out.Bytes())
	if err != nil {
		t.Fatalf("run = %v; events:\n%s", err, out.String())
	}
	if last := evs[len(evs)-1]; last.Kind != event.KindDone || !last.Done.OK {
		t.Errorf("last event = %+v", last)
	}
	kinds := map[event.Kind]int{}
	oracles := map[event.OracleName]event.Oracle{}
	for _, e := range evs {
		kinds[e.Kind]++
		// Keep the calibration and the end-of-run summaries (the
		// func-ip summary names no function).
		if o := e.Oracle; e.Kind == event.KindOracle && (o.Function == "" || o.Name == event.OracleCalibration) {
			oracles[o.Name] = *o
		}
	}
	for _, k := range []event.Kind{event.KindHotSet, event.KindTransition, event.KindPreempt, event.KindFeature, event.KindOracle} {
		if kinds[k] == 0 {
			t.Errorf("no %s event", k)
		}
	}
	if c := oracles[event.OracleCalibration]; !c.OK {
		t.Errorf("calibration = %+v", c)
	}
	if f := oracles[event.OracleFuncIP]; !f.OK || f.Checks == 0 {
		t.Errorf("func-ip summary = %+v", f)
	}
	for path, want := range map[string]string{
		"/sys/kernel/tracing/current_tracer":    "nop\n",
		"/sys/kernel/tracing/kprobe_events":     "",
		"/sys/kernel/tracing/set_ftrace_filter": "#### all functions enabled ####\n",
		preemptPath:                             string(before),
	} {
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Errorf("%s = %q after the run, want %q", path, b, want)
		}
	}
	if _, err := os.Stat("/sys/kernel/tracing/instances/" + churnrun.MixedInstance); err == nil {
		t.Error("the mixed tracers' instance is still there")
	}
}

// TestEveryScenarioRuns: every scenario the option table accepts has a
// way to run in the agent, and nothing else does.
func TestEveryScenarioRuns(t *testing.T) {
	table := scenarios()
	for _, sc := range event.Scenarios() {
		if s, ok := table[sc]; !ok || s.run == nil {
			t.Errorf("scenario %q: the agent cannot run it", sc)
		}
	}
	if len(table) != len(event.Scenarios()) {
		t.Errorf("the agent runs %d scenarios, the options know %d", len(table), len(event.Scenarios()))
	}
}
