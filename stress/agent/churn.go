package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/churn"
	"github.com/ftrace-harness/fth/stress/cpuhp"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/preempt"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/stress/tracers"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// exactSyscall is the syscall the exact-count oracle counts. Nothing in a
// u-root guest calls getppid but the hammer, which leaves it out in the
// churn scenario, and the Go runtime never does.
const exactSyscall = hammer.SysGetppid

// calibrationSyscall is the fallback calibration target when the exact
// oracle is off: any hit will do, so a syscall the hammer makes is fine.
const calibrationSyscall = hammer.SysGetpid

// mixedInstance is the tracefs instance the mixed tracers use, so that they
// never fight the churn over the top level's current_tracer.
const mixedInstance = "fth_mixed"

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

// maxReasons bounds how many oracle failures Done.Reason lists.
const maxReasons = 5

// churnSyscalls are the hammer's syscalls the hot set is drawn from: all of
// them except the one the exact-count oracle owns.
func churnSyscalls(exact bool) []string {
	var out []string
	for _, s := range hammer.Syscalls {
		if exact && s == exactSyscall {
			continue
		}
		out = append(out, string(s))
	}
	return out
}

// executeChurn runs the churn scenario after the inventory: hot set,
// optional background trampolines, then the churn with mixed tracers,
// preemption switching, hotplug and the exact-count windows around it.
func (a *agent) executeChurn(ctx context.Context, cache *btf.Cache, inv inventory.Result) (err error) {
	o := a.opts
	a.churn = &churnVerdict{}
	a.stage(event.StageStorm, "")

	addrs, err := ksyms.Read(ksyms.DefaultPath, inv.Candidates)
	if err != nil {
		a.feature(event.Feature{Name: "kallsyms_addresses", Msg: err.Error()})
		addrs = nil
	}
	exactFn := ""
	if o.ExactCalls > 0 {
		exactFn = churn.EntryFunc(inv.Candidates, string(exactSyscall))
	}
	// funcs= names the background exactly, as it names the storm's
	// selection: a finding found on one function is reproduced by the
	// campaign a user runs, on that function alone.
	named := make(map[string]bool, len(o.Funcs))
	for _, fn := range o.Funcs {
		named[fn] = true
	}
	keep := func(fn string) bool {
		if fn == exactFn || named[fn] || options.ScaleModuleFunc(fn) {
			return false
		}
		if addrs == nil {
			return true
		}
		_, ok := addrs.Addr(fn)
		return ok
	}
	hot := churn.SelectHot(inv.Candidates, churnSyscalls(exactFn != ""), o.Hot, o.Seed, keep)
	if len(hot.Funcs) == 0 {
		return errors.New("churn: no hot function among the candidates")
	}
	_ = a.w.Emit(event.Event{Kind: event.KindHotSet, HotSet: &event.HotSet{Functions: hot.Funcs, SyscallPath: hot.SyscallPath, Exact: exactFn}})

	// Background trampolines on functions the churn never touches.
	busy := map[string]bool{exactFn: true}
	for _, fn := range hot.Funcs {
		busy[fn] = true
	}
	rest := slices.DeleteFunc(slices.Clone(inv.Candidates), func(fn string) bool { return busy[fn] })
	bg := selectFuncs(rest, o.N, o.Seed)
	if len(o.Funcs) > 0 {
		bg = o.Funcs
	}
	a.selected = len(bg)
	_ = a.w.Emit(event.Event{Kind: event.KindInventory, Inventory: inv.Event(len(bg) + len(hot.Funcs))})
	if o.MultiHold > 0 {
		// Held from before the storm to after its detach: on an early
		// return only closed.
		held, herr := a.holdMulti(ctx, cache, multiFuncs(rest, bg, o.MultiHold, o.Seed))
		defer held.Close()
		if herr != nil {
			return herr
		}
		if held != nil {
			defer func() {
				if err == nil {
					if _, derr := held.Detach(); derr != nil {
						err = fmt.Errorf("multi detach phase: %w", derr)
					}
				}
			}()
		}
	}
	emit.Logf(a.w, "churn: %d hot functions (%d on hammer syscall paths), exact-count on %q, %d background trampolines",
		len(hot.Funcs), len(hot.SyscallPath), exactFn, len(bg))

	hcfg := hammer.Config{Threads: o.Threads, Stall: o.Stall, Seed: o.Seed, Emit: a.w, RT: o.RT, TimerPeriod: o.TimerPeriod, FairShare: fairShare(o.RTReserve)}
	if exactFn != "" {
		hcfg.Exclude = []hammer.Syscall{exactSyscall}
	}
	if a.ham, err = hammer.Start(ctx, hcfg); err != nil {
		return fmt.Errorf("hammer: %w", err)
	}
	// Each hot function holds at most three links and a program at once.
	if err := attach.PrepareLimits(len(bg) + 4*len(hot.Funcs)); err != nil {
		emit.Logf(a.w, "limits: %v", err)
	}

	campaign := a.opts.Scenario == options.ScenarioCampaign
	beside := campaign && !a.opts.StormFirst
	// The campaign's storm loads beside the churn's loads: a btf.Cache of
	// its own, since cilium/ebpf's is not safe for concurrent loads (one
	// shared cache killed the agent: fatal error: concurrent map writes).
	stormCache := cache
	if beside {
		stormCache = btf.NewCache()
	}
	at, err := attach.New(attach.Config{Cache: stormCache, Emit: a.w, FExitEvery: a.opts.FExitEvery})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	storm := func(ctx context.Context) error {
		if len(bg) == 0 {
			return nil
		}
		if _, err := at.Load(ctx, a.set, bg); err != nil {
			return fmt.Errorf("background load phase: %w", err)
		}
		ph, err := at.Attach(ctx, a.set)
		a.attached = ph.Succeeded
		if err != nil {
			return fmt.Errorf("background attach phase: %w", err)
		}
		return nil
	}
	started := a.sys.now()
	// The campaign's storm attaches beside the churn, so that the oracles
	// run from the first seconds: attached first, the storm took 96-124 s
	// of a campaign's 2.5 minutes on x86_64 before any oracle ran, and
	// most of the time to detect a broken kernel (2026-11-29). The churn
	// meets the background at every size from none to all; the race stage
	// waits for all of it. The churn scenario, and a campaign with
	// stormfirst=true, keep the storm first. stormDone carries the
	// storm's result while it runs beside the churn; nil once it is known.
	var stormDone chan error
	if beside {
		sctx, cancel := context.WithCancel(ctx)
		stormDone = make(chan error, 1)
		go func() { stormDone <- storm(sctx) }()
		// On an early return the storm stops, and is waited for: nothing
		// of it runs on past executeChurn.
		defer func() {
			cancel()
			if stormDone != nil {
				<-stormDone
			}
		}()
		emit.Logf(a.w, "campaign: the storm attaches %d trampolines beside the churn", len(bg))
	} else if err := storm(ctx); err != nil {
		return err
	}

	if campaign {
		a.opts.Churn = churnBudget(o)
	}
	if a.opts.Churn == 0 && a.opts.Cycles == 0 {
		a.stage(event.StageChurn, "churn=0 and the budget leaves it no time")
	} else {
		a.stage(event.StageChurn, "")
		if err := a.runChurn(ctx, cache, addrs, hot, exactFn, inv.Candidates); err != nil {
			return err
		}
	}
	if stormDone != nil {
		err := <-stormDone
		stormDone = nil
		if err != nil {
			return err
		}
		emit.Logf(a.w, "campaign: the storm attached %d trampolines, %.1fs after it began", a.attached, a.sys.now().Sub(started).Seconds())
	}
	if campaign {
		// The preemptor must be the only real-time task of the held CPU.
		a.stopHammer()
		if err := a.raceStage(ctx, raceStageBudget(o, a.sys.now().Sub(started))); err != nil {
			return err
		}
		a.stage(event.StageDetach, "")
	}

	if len(bg) > 0 {
		if _, err := at.Detach(ctx, a.set, o.Detach); err != nil {
			return fmt.Errorf("background detach phase: %w", err)
		}
		a.detachedN = o.Detach != options.All
	}
	a.stopHammer()
	return nil
}

// runChurn sets up tracefs, the oracle map and calibration, runs the churn
// and its companions, and restores everything it changed on every path.
func (a *agent) runChurn(ctx context.Context, cache *btf.Cache, addrs ksyms.Table, hot churn.Hot, exactFn string, cands []string) (err error) {
	o := a.opts
	top := tracefs.New(tracefs.DefaultRoot)
	if !top.Exists() {
		return fmt.Errorf("churn: no %s/current_tracer (tracefs not mounted, or no function tracer)", tracefs.DefaultRoot)
	}
	if tr, _ := top.Tracer(); tr != "" && tr != tracefs.Nop {
		emit.Logf(a.w, "churn: current_tracer was %q; resetting to nop", tr)
	}
	// Start from a known state: nothing of ours from an earlier run, no
	// tracer on. The same calls end the run, whatever path it takes.
	if err := errors.Join(top.Reset(), top.ClearProbes(churn.KprobeGroup)); err != nil {
		return fmt.Errorf("churn: reset tracefs: %w", err)
	}
	if o.ScaleModule {
		top.Index = a.filterIndex(top, hot.Funcs[0])
	}
	rec := tally.New(a.w, 0)
	rec.LogOps(time.Now())

	// 8 spare slots for the exact-count, module and delivery programs.
	loader, err := oracle.NewLoader(2*len(hot.Funcs)+12, cache)
	if err != nil {
		return fmt.Errorf("churn: %w", err)
	}
	defer loader.Close()
	loader.Addrs, loader.Serial = addrs, &sync.Mutex{}

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
	_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &cal})
	switch {
	case calErr == nil:
		emit.Logf(a.w, "churn: func-ip calibrated on %s: delta %d", calFn, cal.Delta)
	case cal.Skipped != "":
		emit.Logf(a.w, "churn: func-ip oracle off: %v", calErr)
	default:
		// The kernel answered, wrongly: that is a finding.
		a.oracleFail(cal)
	}

	if o.Sabotage == options.SabotageWrongIP && loader.Checking() {
		// Test only: every program now expects an address it can never see.
		loader.Skew = sabotageSkew
		emit.Logf(a.w, "churn: SABOTAGE wrong-ip: every func-ip program expects its address %+d", sabotageSkew)
	}

	kern := churn.NewReal(loader, tracers.NewFiltered(top, tracefs.Function), top)
	defer func() {
		if cerr := kern.Close(); cerr != nil {
			emit.Logf(a.w, "churn: cleanup: %v", cerr)
			if err == nil {
				err = cerr
			}
		}
	}()
	upd := kern.ProbeLinkUpdate(hot.Funcs)
	a.feature(upd)

	// Companions run until the churn ends.
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()

	sw := preempt.New(preempt.DefaultPath, rec)
	if o.PreemptEvery > 0 {
		if perr := sw.Probe(); perr != nil {
			emit.Logf(a.w, "churn: %v", perr)
		}
	} else {
		_ = sw.Observe()
		sw.Disable("disabled (preemptevery=0)")
	}
	_ = a.w.Emit(event.Event{Kind: event.KindPreempt, Preempt: sw.Event()})
	wg.Add(1)
	go func() {
		defer wg.Done()
		sw.Run(cctx, o.PreemptEvery, rand.New(rand.NewPCG(uint64(o.Seed), streamPreempt)))
	}()

	if o.Mixed {
		mx := &tracers.Mixed{Top: top, Pool: hot.Funcs, Group: churn.KprobeGroup, Rec: rec, Emit: a.w}
		inst, ierr := top.Instance(mixedInstance)
		if ierr != nil {
			a.feature(featureErr("tracefs_instance", ierr))
		} else {
			a.feature(event.Feature{Name: "tracefs_instance", Supported: true})
			_ = inst.SetBufferKB(mixedBufferKB)
			if rerr := inst.Reset(); rerr != nil {
				emit.Logf(a.w, "churn: %v", rerr)
			}
			mx.Inst = &inst
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if merr := mx.Run(cctx, rand.New(rand.NewPCG(uint64(o.Seed), streamMixed))); merr != nil {
				emit.Logf(a.w, "churn: %v", merr)
			}
			// Run has reset the instance; only now can it go.
			if mx.Inst != nil {
				if rerr := top.RemoveInstance(mixedInstance); rerr != nil {
					emit.Logf(a.w, "churn: %v", rerr)
				}
			}
		}()
	}

	hp := cpuhp.Feature(cpuhp.DefaultDir)
	a.feature(hp)
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
			emit.Logf(a.w, "churn: SABOTAGE skip-count: each exact-count window makes one call fewer than it counts on")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.exactLoop(cctx, w, exact)
		}()
	}

	mods := &modStats{}
	if o.Modules {
		anchor := modAnchor(cands, hot.Funcs, exactFn, o.Seed)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.runModules(cctx, top, loader, rec, anchor, mods)
		}()
	}

	opening := make(chan struct{})
	openingDone := sync.OnceFunc(func() { close(opening) })
	if o.Delivery {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer openingDone()
			a.runDelivery(cctx, top, loader, rec, upd.Supported, openingDone)
		}()
	} else {
		openingDone()
	}

	res, runErr := churn.Run(ctx, churn.Config{
		Funcs: hot.Funcs, Seed: o.Seed, Duration: o.Churn, Cycles: o.Cycles, Workers: o.Workers,
		Update: upd.Supported, Twins: o.Twins, Kernel: kern, Rec: rec, Emit: a.w,
	})
	a.awaitOpening(ctx, opening)
	stop()
	wg.Wait()

	for _, f := range res.Failures {
		a.oracleFail(f)
	}
	if p, ok := rec.Get("fentry_first"); ok && p.Succeeded == 0 {
		a.churn.mu.Lock()
		a.churn.other = append(a.churn.other, fmt.Sprintf("churn: no fentry attached in %d tries", p.Attempted))
		a.churn.mu.Unlock()
	}
	_ = rec.EmitSummaries()
	_ = a.w.Emit(event.Event{Kind: event.KindPreempt, Preempt: sw.Event()})
	a.emitOracleSummaries(loader, res, exact, exactFn, o.ExactCalls)
	if o.Modules {
		ms := mods.summary(o.ExactCalls)
		_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &ms})
		emit.Logf(a.w, "churn: fth_target loaded %d times, %d module exact-count windows (%d failed), %d module func-ip checks",
			mods.targetRuns, mods.windows, mods.failures, mods.fipChecks)
	}
	emit.Logf(a.w, "churn: %d cycles, %d func-ip checks, %d failures", res.Cycles, res.Checks, len(res.Failures))
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
func (a *agent) awaitOpening(ctx context.Context, opening <-chan struct{}) {
	select {
	case <-opening:
		return
	default:
	}
	emit.Logf(a.w, "churn: the budget is spent; the delivery churn finishes its opening (at most %v more)", options.DeliveryOpeningGrace)
	t0 := a.sys.now()
	select {
	case <-opening:
		emit.Logf(a.w, "churn: the delivery opening ended %.1fs after the budget", a.sys.now().Sub(t0).Seconds())
	case <-time.After(options.DeliveryOpeningGrace):
		emit.Logf(a.w, "churn: the delivery opening did not end within %v of the budget; stopping it", options.DeliveryOpeningGrace)
	case <-ctx.Done():
	}
}

// exactStats counts the exact-count windows.
type exactStats struct {
	windowTally
	fipOK int
}

// windowTally counts one exact-count oracle's windows; its lock also
// guards the fields of the structs that embed it.
type windowTally struct {
	mu       sync.Mutex
	windows  int
	failures int
	skipped  string // why the last window could not run
}

// skip records why a window could not run.
func (t *windowTally) skip(why string) {
	t.mu.Lock()
	t.skipped = why
	t.mu.Unlock()
}

// exactWindow counts one completed exact-count window, emits its result and
// fails the run on a wrong count.
func (a *agent) exactWindow(t *windowTally, ex event.Oracle) {
	t.mu.Lock()
	t.windows++
	if !ex.OK {
		t.failures++
	}
	t.mu.Unlock()
	_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &ex})
	if !ex.OK {
		a.oracleFail(ex)
	}
}

// firstExact is the delay before the first exact-count window: long enough
// for the churn to be under way.
const firstExact = time.Second

// exactLoop runs an exact-count window every ExactEvery until ctx is done.
func (a *agent) exactLoop(ctx context.Context, w oracle.Window, st *exactStats) {
	every := a.opts.ExactEvery
	t := time.NewTimer(min(firstExact, every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ex, s, err := w.Exact(ctx, a.opts.ExactCalls)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			st.skip(err.Error())
			emit.Logf(a.w, "churn: exact-count window: %v", err)
			t.Reset(every)
			continue
		}
		a.exactWindow(&st.windowTally, ex)
		if exp, ok := w.Loader.Expected(w.Func); ok && w.Loader.Checking() {
			fip := oracle.CheckFuncIP(w.Func, oracle.FEntry, exp, s.Before, s.After)
			if fip.OK {
				st.mu.Lock()
				st.fipOK++
				st.mu.Unlock()
			} else {
				_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &fip})
				a.oracleFail(fip)
			}
		}
		t.Reset(every)
	}
}

// emitOracleSummaries emits one summary Oracle event per oracle.
func (a *agent) emitOracleSummaries(l *oracle.Loader, res churn.Result, ex *exactStats, exactFn string, calls int) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	fip := event.Oracle{Name: oracle.NameFuncIP, Checks: res.Checks + ex.fipOK, Failures: len(res.Failures), Delta: l.Delta()}
	fip.OK = fip.Failures == 0
	if !l.Checking() {
		fip.Skipped = "not calibrated"
	}
	_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &fip})

	why := "no window completed: " + ex.skipped
	if exactFn == "" {
		why = fmt.Sprintf("no traceable entry function for %s", exactSyscall)
	}
	exs := exactSummary(exactFn, calls, ex.windows, ex.failures, why)
	_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &exs})
}

// churnVerdict collects what makes a churn run not ok. Oracle failures
// arrive from concurrent goroutines, hence the lock.
type churnVerdict struct {
	mu     sync.Mutex
	oracle []string
	other  []string
}

// reasons returns the Done.Reason parts.
func (v *churnVerdict) reasons() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	if len(v.oracle) > 0 {
		out = append(out, oracleReason(v.oracle))
	}
	return append(out, v.other...)
}

// oracleFail records a failed oracle check for the verdict, naming the
// oracle and function.
func (a *agent) oracleFail(o event.Oracle) {
	msg := fmt.Sprintf("%s %s", o.Name, o.Function)
	if o.Msg != "" {
		msg += ": " + o.Msg
	} else {
		msg += fmt.Sprintf(": expected %d, got %d", o.Expected, o.Got)
	}
	a.churn.mu.Lock()
	a.churn.oracle = append(a.churn.oracle, msg)
	a.churn.mu.Unlock()
}

// scaleNameFilter is why a churn beside fth_scale.ko leaves out what only a
// tracefs filter by name can reach: a module's functions.
const scaleNameFilter = "left out with scalemod=true: a tracefs filter on a module's function is matched by name, every ftrace record looked up among fth_scale.ko's 32,768 symbols under ftrace_lock (minutes under TCG, past the RCU-tasks stall timeout)"

// filterIndex reads vmlinux's filter indices for a churn beside
// fth_scale.ko, where every tracefs filter by name costs records × the
// module's symbols (minutes under TCG, past the RCU-tasks stall timeout),
// and checks one: fn written by index must read back as fn. nil (filters
// by name) when it cannot.
func (a *agent) filterIndex(top tracefs.FS, fn string) *tracefs.FuncIndex {
	const name = "filter_index"
	x, err := tracefs.ReadFuncIndex(top.Root)
	if err != nil {
		a.feature(featureErr(name, err))
		return nil
	}
	inst, err := tracefs.FS{Root: top.Root, Index: x}.Instance("fth-index-check")
	if err != nil {
		a.feature(featureErr(name, err))
		return nil
	}
	defer func() { _ = inst.SetFilter(); _ = top.RemoveInstance("fth-index-check") }()
	if err := inst.SetFilter(fn); err != nil {
		a.feature(featureErr(name, err))
		return nil
	}
	if got, err := inst.Filter(); err != nil || len(got) == 0 || slices.ContainsFunc(got, func(g string) bool { return g != fn }) {
		a.feature(event.Feature{Name: name, Msg: fmt.Sprintf("%s written by its index read back as %v (%v): filters stay by name", fn, got, err)})
		return nil
	}
	a.feature(event.Feature{Name: name, Supported: true, Msg: fmt.Sprintf("tracefs filters name vmlinux's %d functions by index (fth_scale.ko loaded; %s checked)", x.Len(), fn)})
	return x
}

func (a *agent) feature(f event.Feature) {
	_ = a.w.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
}

func featureErr(name string, err error) event.Feature {
	errno, _ := attach.ErrnoOf(err)
	return event.Feature{Name: name, Errno: errno, Msg: attach.Message(err)}
}

// oracleReason summarises oracle failures for Done.Reason, naming the
// first few.
func oracleReason(fails []string) string {
	shown := fails[:min(len(fails), maxReasons)]
	s := fmt.Sprintf("%d oracle failure(s): %s", len(fails), strings.Join(shown, "; "))
	if len(fails) > len(shown) {
		s += fmt.Sprintf("; and %d more", len(fails)-len(shown))
	}
	return s
}

// exactSummary is an exact-count oracle's summary event: skipped when
// disabled, or with whyNone when no window completed.
func exactSummary(fn string, calls, windows, failures int, whyNone string) event.Oracle {
	o := event.Oracle{Name: oracle.NameExact, Function: fn, Expected: uint64(calls), Checks: windows, Failures: failures, OK: failures == 0}
	switch {
	case calls == 0:
		o.Skipped = "disabled (exactcalls=0)"
	case windows == 0:
		o.Skipped = whyNone
	}
	return o
}
