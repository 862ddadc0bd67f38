// Package churnrun is the churn scenario's churn stage, which the campaign
// runs too: it sets up tracefs and the oracle loader, calibrates func-ip,
// and runs the churn engine (stress/churn) on the hot set with its
// companions until the budget is spent: preemption-model switching, the
// mixed tracers, CPU hotplug, the exact-count windows, the module churn
// (stress/modchurn) and the delivery oracle (stress/deliver); then it
// emits the oracles' summaries and restores everything it changed, on
// every path. Its Result is what makes the run not ok; the agent keeps
// the storm's background, the hammer and the campaign's other stages.
package churnrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/churn"
	"github.com/ftrace-harness/fth/stress/cpuhp"
	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modchurn"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/preempt"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/stress/tracers"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// ExactSyscall is the syscall the exact-count oracle counts. Nothing in a
// u-root guest calls getppid but the hammer, which leaves it out in the
// churn scenario, and the Go runtime never does.
const ExactSyscall = hammer.SysGetppid

// calibrationSyscall is the fallback calibration target when the exact
// oracle is off: any hit will do, so a syscall the hammer makes is fine.
const calibrationSyscall = hammer.SysGetpid

// MixedInstance is the tracefs instance the mixed tracers use, so that
// they never fight the churn over the top level's current_tracer.
const MixedInstance = "fth_mixed"

// mixedBufferKB keeps the instance's ring buffers small: nobody reads them.
const mixedBufferKB = 256

// Seeded streams of the churn's helpers, separate from every other stream
// drawn from the same seed.
const (
	streamPreempt = 0x6674687072656d70
	streamMixed   = 0x6674686d69786564
	streamHotplug = 0x667468686f74706c
	streamAnchor  = 0x667468616e63686f
)

// sabotageSkew is how far off the wrong-ip sabotage puts every expected
// address: far enough that no calibration slack can absorb it.
const sabotageSkew = 0x40

// scaleNameFilter is why a churn beside fth_scale.ko leaves out what only a
// tracefs filter by name can reach: a module's functions.
const scaleNameFilter = "left out with scalemod=true: a tracefs filter on a module's function is matched by name, every ftrace record looked up among fth_scale.ko's 32,768 symbols under ftrace_lock (minutes under TCG, past the RCU-tasks stall timeout)"

// modAnchor picks the vmlinux function the module tracer's filter keeps
// besides the module's: a seeded choice among the candidates nothing else
// in the churn touches.
func modAnchor(cands, hot []string, exactFn string, seed int64) string {
	busy := map[string]bool{exactFn: true}
	for _, f := range hot {
		busy[f] = true
	}
	var free []string
	for _, c := range cands {
		if !busy[c] && !options.ScaleModuleFunc(c) {
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return hot[0]
	}
	return free[rand.New(rand.NewPCG(uint64(seed), streamAnchor)).IntN(len(free))]
}

// HotSyscalls are the hammer's syscalls the hot set is drawn from: all of
// them except the one the exact-count oracle owns when exact is set.
func HotSyscalls(exact bool) []string {
	var out []string
	for _, s := range hammer.Syscalls {
		if exact && s == ExactSyscall {
			continue
		}
		out = append(out, string(s))
	}
	return out
}

// Env is what the churn stage takes from the agent that runs it.
type Env struct {
	// W receives the churn's events and log lines.
	W *emit.Writer
	// Opts are the run's options; Churn and Cycles bound the churn.
	Opts options.Options
	// Cache holds vmlinux's BTF, which the oracle programs load against.
	Cache *btf.Cache
	// Addrs are the candidates' kallsyms addresses, which the func-ip
	// oracle checks against; nil when kallsyms could not be read.
	Addrs ksyms.Table
	// Hot is the hot set the churn drives (churn.SelectHot).
	Hot churn.Hot
	// ExactFn is ExactSyscall's entry function the exact-count windows
	// count on; "" for none.
	ExactFn string
	// Candidates are the inventory's candidates: the calibration's
	// fallback and the module tracer's anchor are drawn from them.
	Candidates []string
}

// Run sets up tracefs, the oracle map and calibration, runs the churn
// and its companions, and restores everything it changed on every path.
// Its Result holds what made the run not ok so far, whatever the error.
func Run(ctx context.Context, env Env) (Result, error) {
	r := &run{Env: env}
	err := r.run(ctx)
	return r.verdict.result(), err
}

// run is one churn stage with its Env and the verdict its goroutines
// add to.
type run struct {
	Env
	verdict verdict
}

func (r *run) run(ctx context.Context) (err error) {
	o, hot, exactFn, cands := r.Opts, r.Hot, r.ExactFn, r.Candidates
	top := tracefs.New(tracefs.DefaultRoot)
	if !top.Exists() {
		return fmt.Errorf("churn: no %s/current_tracer (tracefs not mounted, or no function tracer)", tracefs.DefaultRoot)
	}
	if tr, _ := top.Tracer(); tr != "" && tr != tracefs.Nop {
		emit.Logf(r.W, "churn: current_tracer was %q; resetting to nop", tr)
	}
	// Start from a known state: nothing of ours from an earlier run, no
	// tracer on. The same calls end the run, whatever path it takes.
	if err := errors.Join(top.Reset(), top.ClearProbes(churn.KprobeGroup)); err != nil {
		return fmt.Errorf("churn: reset tracefs: %w", err)
	}
	noNameFilter := ""
	if o.ScaleModule {
		top.Index = r.filterIndex(top, hot.Funcs[0])
		noNameFilter = scaleNameFilter
	}
	rec := tally.New(r.W, 0)
	rec.LogOps(time.Now())

	// 8 spare slots for the exact-count, module and delivery programs.
	loader, err := oracle.NewLoader(2*len(hot.Funcs)+12, r.Cache)
	if err != nil {
		return fmt.Errorf("churn: %w", err)
	}
	defer loader.Close()
	loader.Addrs, loader.Serial = r.Addrs, &sync.Mutex{}

	// Calibrate before any goroutine shares the loader.
	calFn, calCall := exactFn, func() { _ = unix.Getppid() }
	if calFn == "" {
		calFn, calCall = churn.EntryFunc(cands, string(calibrationSyscall)), func() { _ = unix.Getpid() }
	}
	var (
		cal    event.Oracle
		calErr error
	)
	if calFn == "" {
		cal = event.Oracle{Name: oracle.NameCalibration, Skipped: "no traceable getppid or getpid entry function"}
		calErr = errors.New(cal.Skipped)
	} else {
		cal, calErr = loader.Calibrate(ctx, calFn, calCall, rec)
	}
	_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &cal})
	switch {
	case calErr == nil:
		emit.Logf(r.W, "churn: func-ip calibrated on %s: delta %d", calFn, cal.Delta)
	case cal.Skipped != "":
		emit.Logf(r.W, "churn: func-ip oracle off: %v", calErr)
	default:
		// The kernel answered, wrongly: that is a finding.
		r.verdict.oracleFail(cal)
	}

	if o.Sabotage == options.SabotageWrongIP && loader.Checking() {
		// Test only: every program now expects an address it can never see.
		loader.Skew = sabotageSkew
		emit.Logf(r.W, "churn: SABOTAGE wrong-ip: every func-ip program expects its address %+d", sabotageSkew)
	}

	kern := churn.NewReal(loader, tracers.NewFiltered(top, tracefs.Function), top)
	defer func() {
		if cerr := kern.Close(); cerr != nil {
			emit.Logf(r.W, "churn: cleanup: %v", cerr)
			if err == nil {
				err = cerr
			}
		}
	}()
	upd := kern.ProbeLinkUpdate(hot.Funcs)
	r.feature(upd)

	// Companions run until the churn ends.
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()

	sw := preempt.New(preempt.DefaultPath, rec)
	if o.PreemptEvery > 0 {
		if perr := sw.Probe(); perr != nil {
			emit.Logf(r.W, "churn: %v", perr)
		}
	} else {
		_ = sw.Observe()
		sw.Disable("disabled (preemptevery=0)")
	}
	_ = r.W.Emit(event.Event{Kind: event.KindPreempt, Preempt: sw.Event()})
	wg.Add(1)
	go func() {
		defer wg.Done()
		sw.Run(cctx, o.PreemptEvery, rand.New(rand.NewPCG(uint64(o.Seed), streamPreempt)))
	}()

	if o.Mixed {
		mx := &tracers.Mixed{Top: top, Pool: hot.Funcs, Group: churn.KprobeGroup, Rec: rec, Emit: r.W}
		inst, ierr := top.Instance(MixedInstance)
		if ierr != nil {
			r.feature(attach.FeatureErr("tracefs_instance", ierr))
		} else {
			r.feature(event.Feature{Name: "tracefs_instance", Supported: true})
			_ = inst.SetBufferKB(mixedBufferKB)
			if rerr := inst.Reset(); rerr != nil {
				emit.Logf(r.W, "churn: %v", rerr)
			}
			mx.Inst = &inst
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if merr := mx.Run(cctx, rand.New(rand.NewPCG(uint64(o.Seed), streamMixed))); merr != nil {
				emit.Logf(r.W, "churn: %v", merr)
			}
			// Run has reset the instance; only now can it go.
			if mx.Inst != nil {
				if rerr := top.RemoveInstance(MixedInstance); rerr != nil {
					emit.Logf(r.W, "churn: %v", rerr)
				}
			}
		}()
	}

	hp := cpuhp.Feature(cpuhp.DefaultDir)
	r.feature(hp)
	if o.Hotplug > 0 && hp.Supported {
		tg := &cpuhp.Toggler{Dir: cpuhp.DefaultDir, CPUs: cpuhp.Hotpluggable(cpuhp.DefaultDir), Rec: rec}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg.Run(cctx, o.Hotplug, rand.New(rand.NewPCG(uint64(o.Seed), streamHotplug)))
		}()
	}

	exact := &exactStats{}
	if exactFn != "" {
		w := oracle.Window{Loader: loader, Func: exactFn, Call: func() { _ = unix.Getppid() }, Key: "exact:" + exactFn, Name: "exact", Rec: rec}
		if o.Sabotage == options.SabotageSkipCount {
			w.Skip = 1
			emit.Logf(r.W, "churn: SABOTAGE skip-count: each exact-count window makes one call fewer than it counts on")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.exactLoop(cctx, w, exact)
		}()
	}

	companion := deliver.Companion{W: r.W, Opts: o, Top: top, Loader: loader, Rec: rec, NoNameFilter: noNameFilter,
		OracleFail: r.verdict.oracleFail}
	var mods modchurn.Stats
	if o.Modules {
		menv := modchurn.Env{Companion: companion, Anchor: modAnchor(cands, hot.Funcs, exactFn, o.Seed), Fail: r.verdict.other}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mods = modchurn.Run(cctx, menv)
		}()
	}

	opening := make(chan struct{})
	openingDone := sync.OnceFunc(func() { close(opening) })
	if o.Delivery {
		denv := deliver.Env{Companion: companion, LinkUpdate: upd.Supported, OpeningDone: openingDone}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer openingDone()
			deliver.Run(cctx, denv)
		}()
	} else {
		openingDone()
	}

	res, runErr := churn.Run(ctx, churn.Config{
		Funcs: hot.Funcs, Seed: o.Seed, Duration: o.Churn, Cycles: o.Cycles, Workers: o.Workers,
		Update: upd.Supported, Twins: o.Twins, Kernel: kern, Rec: rec, Emit: r.W,
	})
	r.awaitOpening(ctx, opening)
	stop()
	wg.Wait()

	for _, f := range res.Failures {
		r.verdict.oracleFail(f)
	}
	if p, ok := rec.Get("fentry_first"); ok && p.Succeeded == 0 {
		r.verdict.other(fmt.Sprintf("churn: no fentry attached in %d tries", p.Attempted))
	}
	_ = rec.EmitSummaries()
	_ = r.W.Emit(event.Event{Kind: event.KindPreempt, Preempt: sw.Event()})
	r.emitOracleSummaries(loader, res, exact, exactFn, o.ExactCalls)
	if o.Modules {
		ms := mods.Summary(o.ExactCalls)
		_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &ms})
		emit.Logf(r.W, "churn: fth_target loaded %d times, %d module exact-count windows (%d failed), %d module func-ip checks",
			mods.TargetRuns, mods.Windows, mods.Failures, mods.FIPChecks)
	}
	emit.Logf(r.W, "churn: %d cycles, %d func-ip checks, %d failures", res.Cycles, res.Checks, len(res.Failures))
	if runErr != nil {
		return fmt.Errorf("churn: %w", runErr)
	}
	return ctx.Err()
}

// awaitOpening lets the delivery churn finish its opening after the
// churn's budget, for at most options.DeliveryOpeningGrace: the opening's
// ordered changes are what the delivery oracle's mutants need, and with
// thousands of trampolines live a change took seconds on a slow machine
// (8 changes in 75 s, 2026-11-28), so a wall-clock budget alone made the
// campaign's power depend on the machine. The oracles, the hammer and the
// preemptions go on meanwhile; the BPF churn has stopped.
func (r *run) awaitOpening(ctx context.Context, opening <-chan struct{}) {
	select {
	case <-opening:
		return
	default:
	}
	emit.Logf(r.W, "churn: the budget is spent; the delivery churn finishes its opening (at most %v more)", options.DeliveryOpeningGrace)
	t0 := time.Now()
	select {
	case <-opening:
		emit.Logf(r.W, "churn: the delivery opening ended %.1fs after the budget", time.Since(t0).Seconds())
	case <-time.After(options.DeliveryOpeningGrace):
		emit.Logf(r.W, "churn: the delivery opening did not end within %v of the budget; stopping it", options.DeliveryOpeningGrace)
	case <-ctx.Done():
	}
}

// filterIndex reads vmlinux's filter indices for a churn beside
// fth_scale.ko, where every tracefs filter by name costs records × the
// module's symbols (minutes under TCG, past the RCU-tasks stall timeout),
// and checks one: fn written by index must read back as fn. nil (filters
// by name) when it cannot.
func (r *run) filterIndex(top tracefs.FS, fn string) *tracefs.FuncIndex {
	const name = "filter_index"
	x, err := tracefs.ReadFuncIndex(top.Root)
	if err != nil {
		r.feature(attach.FeatureErr(name, err))
		return nil
	}
	inst, err := tracefs.FS{Root: top.Root, Index: x}.Instance("fth-index-check")
	if err != nil {
		r.feature(attach.FeatureErr(name, err))
		return nil
	}
	defer func() { _ = inst.SetFilter(); _ = top.RemoveInstance("fth-index-check") }()
	if err := inst.SetFilter(fn); err != nil {
		r.feature(attach.FeatureErr(name, err))
		return nil
	}
	if got, err := inst.Filter(); err != nil || len(got) == 0 || slices.ContainsFunc(got, func(g string) bool { return g != fn }) {
		r.feature(event.Feature{Name: name, Msg: fmt.Sprintf("%s written by its index read back as %v (%v): filters stay by name", fn, got, err)})
		return nil
	}
	r.feature(event.Feature{Name: name, Supported: true, Msg: fmt.Sprintf("tracefs filters name vmlinux's %d functions by index (fth_scale.ko loaded; %s checked)", x.Len(), fn)})
	return x
}

// feature emits a Feature event.
func (r *run) feature(f event.Feature) {
	_ = r.W.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
}
