package churn

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
)

// x86Cands is a sorted candidate list as an x86_64 kernel with
// IA32_EMULATION would give it.
var x86Cands = func() []string {
	c := []string{
		"__ia32_sys_getpid", "__ia32_sys_getppid", "__se_sys_getrusage", "__task_pid_nr_ns",
		"__x64_sys_getpid", "__x64_sys_getppid", "__x64_sys_getrusage", "__x64_sys_newuname",
		"__x64_sys_clock_gettime", "__x64_sys_sched_yield", "__x64_sys_nanosleep", "__x64_sys_read",
		"__x64_compat_sys_getrusage", "do_nanosleep", "do_sched_yield", "getrusage", "hrtimer_nanosleep",
		"ksys_read", "vfs_read", "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
	}
	slices.Sort(c)
	return c
}()

var hammerSyscalls = []string{"getpid", "getppid", "newuname", "clock_gettime", "getrusage", "read", "nanosleep", "sched_yield"}

func TestSyscallFuncs(t *testing.T) {
	got := SyscallFuncs(x86Cands, hammerSyscalls)
	want := []string{
		"__x64_sys_getpid", "__task_pid_nr_ns",
		"__x64_sys_getppid",
		"__x64_sys_newuname",
		"__x64_sys_clock_gettime",
		"__se_sys_getrusage", "__x64_sys_getrusage", "getrusage",
		"__x64_sys_read", "ksys_read", "vfs_read",
		"__x64_sys_nanosleep", "hrtimer_nanosleep", "do_nanosleep",
		"__x64_sys_sched_yield", "do_sched_yield",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SyscallFuncs =\n%v\nwant\n%v", got, want)
	}
	for _, fn := range got {
		if strings.Contains(fn, "ia32") || strings.Contains(fn, "compat") {
			t.Errorf("compat entry %s on a 64-bit hammer's path", fn)
		}
	}
}

func TestEntryFunc(t *testing.T) {
	for _, tt := range []struct {
		cands   []string
		syscall string
		want    string
	}{
		{x86Cands, "getppid", "__x64_sys_getppid"},
		{[]string{"__arm64_sys_getppid", "__se_sys_getppid"}, "getppid", "__arm64_sys_getppid"},
		{[]string{"__riscv_compat_sys_getppid", "__riscv_sys_getppid"}, "getppid", "__riscv_sys_getppid"},
		{[]string{"sys_getppid"}, "getppid", "sys_getppid"},
		{[]string{"__do_sys_getppid", "__ia32_sys_getppid"}, "getppid", "__do_sys_getppid"},
		{[]string{"__ia32_sys_getppid"}, "getppid", ""},
		{x86Cands, "getppidx", ""},
	} {
		if got := EntryFunc(tt.cands, tt.syscall); got != tt.want {
			t.Errorf("EntryFunc(%v, %s) = %q, want %q", tt.cands, tt.syscall, got, tt.want)
		}
	}
}

func TestSelectHot(t *testing.T) {
	// Without getppid (the exact-count oracle owns it) and 20 wanted:
	// every syscall-path function, then a seeded sample of the rest.
	sys := slices.DeleteFunc(slices.Clone(hammerSyscalls), func(s string) bool { return s == "getppid" })
	// The agent keeps the exact-count function out of the hot set.
	keep := func(fn string) bool { return fn != "zeta" && fn != "__x64_sys_getppid" }
	h := SelectHot(x86Cands, sys, 20, 42, keep)
	if len(h.Funcs) != 20 || len(h.SyscallPath) != 15 {
		t.Fatalf("hot = %+v", h)
	}
	if !reflect.DeepEqual(h.Funcs[:15], h.SyscallPath) {
		t.Errorf("syscall-path functions not first: %v", h.Funcs)
	}
	if slices.Contains(h.Funcs, "__x64_sys_getppid") || slices.Contains(h.Funcs, "zeta") {
		t.Errorf("excluded function picked: %v", h.Funcs)
	}
	seen := map[string]bool{}
	for _, fn := range h.Funcs {
		if seen[fn] {
			t.Errorf("%s picked twice", fn)
		}
		seen[fn] = true
	}
	if again := SelectHot(x86Cands, sys, 20, 42, keep); !reflect.DeepEqual(again, h) {
		t.Errorf("same seed, different hot set: %v vs %v", again.Funcs, h.Funcs)
	}
	if other := SelectHot(x86Cands, sys, 20, 43, keep); reflect.DeepEqual(other.Funcs, h.Funcs) {
		t.Errorf("seeds 42 and 43 gave the same hot set")
	}
	// Fewer wanted than on the syscall paths: a sample of those only.
	small := SelectHot(x86Cands, sys, 4, 1, nil)
	if len(small.Funcs) != 4 || !reflect.DeepEqual(small.Funcs, small.SyscallPath) {
		t.Errorf("k=4: %+v", small)
	}
	// More wanted than candidates: all of them.
	if all := SelectHot(x86Cands, sys, 1000, 1, nil); len(all.Funcs) != len(x86Cands) {
		t.Errorf("k=1000 picked %d of %d", len(all.Funcs), len(x86Cands))
	}
}

// checkPlan verifies the state machine a plan encodes.
func checkPlan(t *testing.T, steps []Step, update bool) {
	t.Helper()
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name()
	}
	if steps[0] != (Step{Op: OpAttach, Kind: oracle.FEntry, Item: 0}) {
		t.Fatalf("first step %v, want the first fentry: %v", steps[0], names)
	}
	links := map[int]oracle.Kind{0: oracle.FEntry}
	i := 1
	for ; steps[i].Op == OpAttach; i++ {
		links[steps[i].Item] = steps[i].Kind
	}
	if n := len(links); n < 2 || n > 3 {
		t.Errorf("%d links before the tracer, want 2 or 3: %v", n, names)
	}
	if steps[i].Op == OpUpdate {
		if !update {
			t.Errorf("update step without update support: %v", names)
		}
		if k, ok := links[steps[i].Item]; !ok || k != steps[i].Kind {
			t.Errorf("update of a link that is not there: %v", names)
		}
		i++
	}
	if steps[i].Op != OpFtraceOn {
		t.Fatalf("step %d = %s, want ftrace_on: %v", i, names[i], names)
	}
	i++
	ftrace := true
	if steps[i].Op == OpFtraceOff {
		ftrace = false
		i++
	}
	if steps[i].Op != OpKprobeOn {
		t.Fatalf("step %d = %s, want kprobe_on: %v", i, names[i], names)
	}
	// The rest removes exactly what is there, each once.
	rest := steps[i+1:]
	want := len(links) + 1
	if ftrace {
		want++
	}
	if len(rest) != want {
		t.Errorf("%d removals, want %d: %v", len(rest), want, names)
	}
	kprobe := true
	for _, s := range rest {
		switch s.Op {
		case OpDetach:
			if k, ok := links[s.Item]; !ok || k != s.Kind {
				t.Errorf("detach of %d %s: not attached: %v", s.Item, s.Kind, names)
			}
			delete(links, s.Item)
		case OpFtraceOff:
			if !ftrace {
				t.Errorf("ftrace_off twice: %v", names)
			}
			ftrace = false
		case OpKprobeOff:
			if !kprobe {
				t.Errorf("kprobe_off twice: %v", names)
			}
			kprobe = false
		default:
			t.Errorf("%s among the removals: %v", s.Name(), names)
		}
	}
	if len(links) > 0 || ftrace || kprobe {
		t.Errorf("cycle ends with something attached: %v", names)
	}
}

func TestPlan(t *testing.T) {
	orders := map[string]bool{}
	kept := 0
	for c := range 200 {
		update := c%2 == 0
		steps := Plan(CycleRNG(42, c%7, c), update)
		checkPlan(t, steps, update)
		var b strings.Builder
		for _, s := range steps {
			b.WriteString(s.Name() + " ")
		}
		orders[b.String()] = true
		for _, s := range steps[len(steps)-4:] {
			if s.Op == OpFtraceOff {
				kept++
				break
			}
		}
	}
	// The seed spreads cycles over many orders, and both tracer choices.
	if len(orders) < 30 || kept == 0 {
		t.Errorf("%d distinct orders in 200 cycles, tracer kept %d times", len(orders), kept)
	}
	// Reproducible: same seed, function and cycle give the same plan.
	if a, b := Plan(CycleRNG(7, 3, 11), true), Plan(CycleRNG(7, 3, 11), true); !reflect.DeepEqual(a, b) {
		t.Errorf("same inputs, different plans:\n%v\n%v", a, b)
	}
	if a, b := Plan(CycleRNG(7, 3, 11), true), Plan(CycleRNG(7, 4, 11), true); reflect.DeepEqual(a, b) && reflect.DeepEqual(Plan(CycleRNG(7, 3, 12), true), a) {
		t.Error("function and cycle do not change the plan")
	}
}

func TestStepNames(t *testing.T) {
	for s, want := range map[Step]string{
		{Op: OpAttach, Kind: oracle.FEntry}:          "fentry_first",
		{Op: OpAttach, Kind: oracle.FExit, Item: 1}:  "add_fexit",
		{Op: OpAttach, Kind: oracle.FEntry, Item: 2}: "add_fentry",
		{Op: OpUpdate}:                     "link_update",
		{Op: OpFtraceOn}:                   "ftrace_on",
		{Op: OpFtraceOff}:                  "ftrace_off",
		{Op: OpKprobeOn}:                   "kprobe_on",
		{Op: OpKprobeOff}:                  "kprobe_off",
		{Op: OpDetach, Kind: oracle.FExit}: "detach_fexit",
		{Op: Op(99)}:                       "unknown",
	} {
		if got := s.Name(); got != want {
			t.Errorf("%+v.Name() = %q, want %q", s, got, want)
		}
	}
}

// fakeKernel records what the runner does and checks that each function's
// callsite state stays consistent.
type fakeKernel struct {
	mu      sync.Mutex
	nextFD  int
	links   map[int]string
	progs   int // loaded, not released
	ftrace  map[string]bool
	kprobe  map[string]bool
	calls   map[string][]string
	failOn  map[string]error // by "op:fn"
	bad     map[string]bool  // functions whose check fails
	block   chan struct{}    // if set, Link waits on it
	checked map[string]int
	linked  map[string]int // links since the last Check, like new hits
}

func newFake() *fakeKernel {
	return &fakeKernel{links: map[int]string{}, ftrace: map[string]bool{}, kprobe: map[string]bool{},
		calls: map[string][]string{}, failOn: map[string]error{}, bad: map[string]bool{}, checked: map[string]int{}, linked: map[string]int{}}
}

func (k *fakeKernel) note(fn, op string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls[fn] = append(k.calls[fn], op)
	return k.failOn[op+":"+fn]
}

func (k *fakeKernel) Load(fn string, kind oracle.Kind) (Prog, error) {
	if err := k.note(fn, "load"); err != nil {
		return Prog{}, err
	}
	k.mu.Lock()
	k.progs++
	k.mu.Unlock()
	return Prog{Func: fn, Kind: kind}, nil
}

func (k *fakeKernel) Link(p Prog) (Link, error) {
	if k.block != nil {
		<-k.block
	}
	if err := k.note(p.Func, "link_"+p.Kind.String()); err != nil {
		return Link{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nextFD++
	k.links[k.nextFD] = p.Func
	k.linked[p.Func]++
	return Link{Func: p.Func, Kind: p.Kind, FD: k.nextFD}, nil
}

func (k *fakeKernel) Update(l Link, p Prog) error { return k.note(l.Func, "update") }

func (k *fakeKernel) Unlink(l Link) error {
	_ = k.note(l.Func, "unlink_"+l.Kind.String())
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.links[l.FD]; !ok {
		return fmt.Errorf("unlink of fd %d: %w", l.FD, unix.EBADF)
	}
	delete(k.links, l.FD)
	return nil
}

func (k *fakeKernel) Release(p Prog) {
	k.mu.Lock()
	k.progs--
	k.mu.Unlock()
}

func (k *fakeKernel) toggle(m map[string]bool, fn, op string, on bool) error {
	if err := k.note(fn, op); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if m[fn] == on {
		return fmt.Errorf("%s of %s: already %v", op, fn, on)
	}
	m[fn] = on
	return nil
}

func (k *fakeKernel) FtraceOn(fn string) error  { return k.toggle(k.ftrace, fn, "ftrace_on", true) }
func (k *fakeKernel) FtraceOff(fn string) error { return k.toggle(k.ftrace, fn, "ftrace_off", false) }
func (k *fakeKernel) KprobeOn(fn string) error  { return k.toggle(k.kprobe, fn, "kprobe_on", true) }
func (k *fakeKernel) KprobeOff(fn string) error { return k.toggle(k.kprobe, fn, "kprobe_off", false) }

func (k *fakeKernel) Check(fn string) ([]event.Oracle, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.checked[fn]++
	// Like the real slots: nothing new since the last check, no result.
	if k.linked[fn] == 0 {
		return nil, nil
	}
	k.linked[fn] = 0
	o := event.Oracle{Name: oracle.NameFuncIP, Function: fn, OK: !k.bad[fn], Expected: 0x1000}
	if !o.OK {
		o.Got = 0x1004
	}
	return []event.Oracle{o}, nil
}

func (k *fakeKernel) clean(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.links) != 0 || k.progs != 0 {
		t.Errorf("left %d links and %d programs", len(k.links), k.progs)
	}
	for fn, on := range k.ftrace {
		if on {
			t.Errorf("%s left in the function tracer", fn)
		}
	}
	for fn, on := range k.kprobe {
		if on {
			t.Errorf("%s left with a kprobe", fn)
		}
	}
}

func TestRunCycles(t *testing.T) {
	k := newFake()
	k.bad["b"] = true
	k.failOn["link_fexit:c"] = fmt.Errorf("BPF_LINK_CREATE: %w", unix.EBUSY)
	k.failOn["kprobe_on:a"] = fmt.Errorf("write: %w", unix.EINVAL)
	var mem emit.Memory
	rec := tally.New(&mem, 0)
	funcs := []string{"a", "b", "c", "d", "e"}
	res, err := Run(context.Background(), Config{
		Funcs: funcs, Seed: 9, Cycles: 4, Workers: 2, Update: true,
		Kernel: k, Rec: rec, Emit: &mem, ProgressInterval: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	k.clean(t)
	if res.Cycles != 20 || res.Checks != 20 || len(res.Failures) != 4 || res.Failures[0].Function != "b" {
		t.Errorf("result = %+v", res)
	}
	if o := mem.OfKind(event.KindOracle); len(o) != 4 || o[0].Oracle.Got != 0x1004 {
		t.Errorf("oracle events = %+v", o)
	}
	// Once per cycle, and once more at the end for cycles cut short.
	for _, fn := range funcs {
		if k.checked[fn] != 5 {
			t.Errorf("%s checked %d times, want 5", fn, k.checked[fn])
		}
	}
	// Function a's kprobe never came on, so it was never switched off.
	if slices.Contains(k.calls["a"], "kprobe_off") {
		t.Errorf("kprobe_off after a failed kprobe_on: %v", k.calls["a"])
	}
	// Each function's call sequence is its plans in order, however the
	// workers interleaved.
	for i, fn := range funcs {
		var want []string
		for c := range 4 {
			for _, s := range Plan(CycleRNG(9, i, c), true) {
				switch s.Op {
				case OpAttach:
					want = append(want, "load", "link_"+s.Kind.String())
				case OpUpdate:
					want = append(want, "load", "update")
				case OpDetach:
					want = append(want, "unlink_"+s.Kind.String())
				default:
					want = append(want, s.Name())
				}
			}
		}
		// A failed step skips its undo, so only functions without
		// injected transition failures follow their plans exactly.
		if fn == "a" || fn == "c" {
			continue
		}
		if got := k.calls[fn]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s calls =\n%v\nwant\n%v", fn, got, want)
		}
	}
	sums := map[string]event.Phase{}
	for _, p := range rec.Summaries() {
		sums[p.Name] = p
	}
	if p := sums["fentry_first"]; p.Attempted != 20 || p.Succeeded != 20 || p.Latency.Count != 20 {
		t.Errorf("fentry_first = %+v", p)
	}
	if p := sums["kprobe_on"]; p.Failed != 4 || p.Errnos["EINVAL"] != 4 {
		t.Errorf("kprobe_on = %+v", p)
	}
	if p := sums["load"]; p.Attempted < 40 {
		t.Errorf("load = %+v", p)
	}
	if f := mem.OfKind(event.KindFailure); len(f) == 0 || f[0].Failure.Errno == "" {
		t.Errorf("failure events = %+v", f)
	}
}

func TestRunCanceledCleansUp(t *testing.T) {
	k := newFake()
	k.block = make(chan struct{})
	var mem emit.Memory
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := Run(ctx, Config{Funcs: []string{"a", "b"}, Seed: 1, Duration: time.Hour, Workers: 2, Kernel: k, Rec: tally.New(&mem, 0), Emit: &mem})
		done <- err
	}()
	// Let a few links through, then cancel mid-cycle.
	for range 3 {
		k.block <- struct{}{}
	}
	cancel()
	close(k.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k.clean(t)
}

func TestRunDuration(t *testing.T) {
	k := newFake()
	var mem emit.Memory
	t0 := time.Now()
	res, err := Run(context.Background(), Config{Funcs: []string{"a"}, Seed: 1, Duration: 30 * time.Millisecond, Kernel: k, Rec: tally.New(&mem, 0), Emit: &mem})
	if err != nil || res.Cycles == 0 || time.Since(t0) > 5*time.Second {
		t.Errorf("Run = %+v, %v after %v", res, err, time.Since(t0))
	}
	k.clean(t)
}

func TestRunConfigErrors(t *testing.T) {
	var mem emit.Memory
	for _, c := range []Config{
		{Kernel: newFake(), Emit: &mem, Cycles: 1},
		{Funcs: []string{"a"}, Emit: &mem, Cycles: 1},
		{Funcs: []string{"a"}, Kernel: newFake(), Emit: &mem},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		}
	}
}

func TestRunCountsFailedRemoval(t *testing.T) {
	k := newFake()
	k.failOn["ftrace_off:a"] = errors.New("boom")
	var mem emit.Memory
	_, err := Run(context.Background(), Config{Funcs: []string{"a"}, Seed: 3, Cycles: 1, Kernel: k, Rec: tally.New(&mem, 0), Emit: &mem})
	// ftrace_off failing in the plan is counted, not a cleanup error: the
	// runner does not retry it.
	if err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestRunTwins: with Twins, each function's BPF steps are its plan's and
// its twin's (a plan of another seed), the tracer and kprobe steps its
// plan's alone, both run within the same cycle, and nothing is left.
func TestRunTwins(t *testing.T) {
	k := newFake()
	var mem emit.Memory
	funcs := []string{"a", "b", "c"}
	const cycles = 3
	res, err := Run(context.Background(), Config{
		Funcs: funcs, Seed: 5, Cycles: cycles, Workers: 2, Update: true, Twins: true,
		Kernel: k, Rec: tally.New(&mem, 0), Emit: &mem, ProgressInterval: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	k.clean(t)
	if res.Cycles != cycles*len(funcs) {
		t.Errorf("cycles = %d, want %d", res.Cycles, cycles*len(funcs))
	}
	count := func(calls []string) map[string]int {
		m := map[string]int{}
		for _, c := range calls {
			m[c]++
		}
		return m
	}
	for i, fn := range funcs {
		want := map[string]int{}
		for c := range cycles {
			for twin, seed := range []int64{5, 5 ^ twinSeed} {
				for _, s := range Plan(CycleRNG(seed, i, c), true) {
					switch s.Op {
					case OpAttach:
						want["load"]++
						want["link_"+s.Kind.String()]++
					case OpUpdate:
						want["load"]++
						want["update"]++
					case OpDetach:
						want["unlink_"+s.Kind.String()]++
					default:
						if twin == 0 {
							want[s.Name()]++
						}
					}
				}
			}
		}
		if got := count(k.calls[fn]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s calls = %v, want %v", fn, got, want)
		}
	}
}
