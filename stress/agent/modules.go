package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// fth_target.ko beyond stress/fthtarget: the churn's filter and
// instance.
const (
	// targetFilter names the module's functions before it is loaded: the
	// kernel keeps the entry and applies it in ftrace_module_enable.
	targetFilter = "fth_target_*:mod:fth_target"
	// modInstance is the tracefs instance whose function tracer filters
	// the module, apart from the churn's and the mixed tracers'.
	modInstance = "fth_mod"
)

// Module op names beyond modload.OpLoad/OpUnload.
const (
	opModFilter   = "module_filter_on"
	opModTracerOn = "module_tracer_on"
	opModTraceOff = "module_tracer_off"
	opModFentry   = "module_fentry_attach"
	opModDetach   = "module_fentry_detach"
)

// Streams of the module companions.
const (
	streamSamples = 0x667468736d706c73
	streamTarget  = 0x6674687461726774
)

// notCycled are modules the loop never loads: ftrace-ops runs a benchmark
// in its init (the overhead measurement's job, not the churn's); the
// delivery oracle owns fth_deliver and its livepatch fth_klp; fth_scale, when present, holds the
// scale run's candidates and stays loaded.
var notCycled = map[string]bool{"ftrace_ops": true, fthtarget.Module: true, deliver.ModuleName: true, klpModule: true, options.ScaleModuleName: true}

// modStats counts what the module companions did, for the summary.
type modStats struct {
	windowTally
	targetRuns int
	fipChecks  int
}

// runModules cycles the kernel's ftrace-direct samples one at a time, and
// fth_target with a function tracer filtering it (sometimes set before
// the load, so that ftrace_module_enable patches it) and a func-ip fentry
// on its hot function, until ctx ends. anchor is a vmlinux function kept in
// the module instance's filter so that the filter never becomes empty
// (which would trace every function) when the module goes.
func (a *agent) runModules(ctx context.Context, top tracefs.FS, loader *oracle.Loader, rec *tally.Recorder, anchor string, st *modStats) {
	paths, err := modload.List(modload.DefaultDir)
	if err != nil || len(paths) == 0 {
		msg := "no modules in " + modload.DefaultDir
		if err != nil {
			msg = err.Error()
		}
		a.feature(event.Feature{Name: "modules", Msg: msg})
		return
	}
	var samples []string
	target := ""
	only := map[string]bool{}
	for _, n := range a.opts.ModList {
		only[n] = true
	}
	var avoided []string
	for _, p := range paths {
		n := modload.Name(p)
		if len(only) > 0 && !only[n] {
			continue
		}
		if !a.opts.IncludeKnown && slices.Contains(known.Modules(), n) {
			avoided = append(avoided, n)
			continue
		}
		switch {
		case n == fthtarget.Module:
			target = p
		case !notCycled[n]:
			samples = append(samples, p)
		}
	}
	msg := fmt.Sprintf("%d samples cycled, fth_target %v", len(samples), target != "")
	if len(avoided) > 0 {
		msg += fmt.Sprintf("; not cycled, known findings (includeknown=true cycles them): %s", strings.Join(avoided, ", "))
	}
	a.feature(event.Feature{Name: "modules", Supported: true, Msg: msg})
	var wg sync.WaitGroup
	if len(samples) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &modload.Cycler{Paths: samples, Hold: a.opts.ModHold, Rec: rec, OnLoad: a.logModule}
			if err := c.Run(ctx, rand.New(rand.NewPCG(uint64(a.opts.Seed), streamSamples))); err != nil {
				a.churnOther(fmt.Sprintf("modules: %v", err))
			}
		}()
	}
	if target != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.targetLoop(ctx, top, loader, rec, target, anchor, st)
		}()
	}
	wg.Wait()
}

// churnOther records a non-oracle reason for a failed churn.
func (a *agent) churnOther(msg string) {
	emit.Logf(a.w, "churn: %s", msg)
	a.churn.mu.Lock()
	a.churn.other = append(a.churn.other, msg)
	a.churn.mu.Unlock()
}

// targetLoop is the fth_target half of runModules.
func (a *agent) targetLoop(ctx context.Context, top tracefs.FS, loader *oracle.Loader, rec *tally.Recorder, path, anchor string, st *modStats) {
	rng := rand.New(rand.NewPCG(uint64(a.opts.Seed), streamTarget))
	// The tracer on fth_target's functions, unless there is no instance
	// for it or fth_scale.ko is loaded: targetFilter names a module's
	// functions, which the kernel matches by name.
	var inst tracefs.FS
	usable := false
	if a.opts.ScaleModule {
		a.feature(event.Feature{Name: "module_tracer", Msg: "the tracer on fth_target's functions: " + scaleNameFilter})
	} else if i, err := top.Instance(modInstance); err != nil {
		a.feature(featureErr("module_tracer_instance", err))
	} else {
		inst, usable = i, true
		_ = inst.SetBufferKB(mixedBufferKB)
		_ = inst.Reset()
		defer func() {
			if err := inst.Reset(); err != nil {
				emit.Logf(a.w, "modules: %v", err)
			}
			if err := top.RemoveInstance(modInstance); err != nil {
				emit.Logf(a.w, "modules: %v", err)
			}
		}()
	}
	tracerOn := false
	tracer := func(on bool) {
		if !usable || on == tracerOn {
			return
		}
		if on {
			// Filter first: the tracer never runs with an empty filter.
			if rec.Time(opModFilter, fthtarget.Module, func() error { return inst.SetFilter(anchor, targetFilter) }) != nil {
				return
			}
			tracerOn = rec.Time(opModTracerOn, fthtarget.Module, func() error { return inst.SetTracer(tracefs.Function) }) == nil
			return
		}
		tracerOn = false
		_ = rec.Time(opModTraceOff, fthtarget.Module, func() error { return inst.Reset() })
	}
	defer tracer(false)

	for ctx.Err() == nil {
		before := rng.IntN(2) == 0
		if before {
			tracer(true)
		}
		if rec.Time(modload.OpLoad, fthtarget.Module, func() error { return modload.Load(path, "nthreads=2") }) != nil {
			ctxsleep.Sleep(ctx, 200*time.Millisecond)
			continue
		}
		a.logModule(fthtarget.Module)
		if !before && rng.IntN(2) == 0 {
			tracer(true)
		}
		a.targetChecks(ctx, loader, rec, rng, st)
		if rng.IntN(2) == 0 {
			tracer(false)
		}
		if err := modload.UnloadRetry(rec, fthtarget.Module, 0); err != nil {
			a.churnOther(fmt.Sprintf("modules: %v", err))
			return
		}
		st.mu.Lock()
		st.targetRuns++
		st.mu.Unlock()
	}
}

// targetChecks runs, on a freshly loaded fth_target, a func-ip fentry on
// its hot function for a random hold and an exact-count window on its
// counted function.
func (a *agent) targetChecks(ctx context.Context, loader *oracle.Loader, rec *tally.Recorder, rng *rand.Rand, st *modStats) {
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, fthtarget.Module, []string{fthtarget.Hot, fthtarget.Counted})
	if err != nil || len(addrs) < 2 {
		st.skip(fmt.Sprintf("no kallsyms addresses for %s (%v)", fthtarget.Module, err))
		ctxsleep.Sleep(ctx, a.opts.ModHold/4)
		return
	}
	ml := loader.WithAddrs(addrs)

	// func-ip on the hot function, across the hold.
	key := oracle.Key(oracle.FEntry, fthtarget.Hot)
	ld, lerr := ml.Load(fthtarget.Hot, oracle.FEntry, key)
	link := -1
	var prev oracle.Counters
	if lerr == nil {
		prev, _ = ml.Map.Read(ld.FuncIP.Slot)
		_ = rec.Time(opModFentry, fthtarget.Hot, func() error {
			fd, errno := attach.LinkCreate(ld.Prog.FD(), oracle.FEntry.LinkType())
			if errno != 0 {
				return fmt.Errorf("BPF_LINK_CREATE: %w", errno)
			}
			link = fd
			return nil
		})
		ld.Prog.Close()
	}

	// Exact count on the counted function, while the hot one is traced.
	if a.opts.ExactCalls > 0 {
		a.targetExact(ctx, ml, rec, st)
	}

	hold := a.opts.ModHold/4 + time.Duration(rng.Int64N(int64(a.opts.ModHold-a.opts.ModHold/4)+1))
	ctxsleep.Sleep(ctx, hold)

	if link >= 0 {
		_ = rec.Time(opModDetach, fthtarget.Hot, func() error { return unix.Close(link) })
		if exp, ok := ml.Expected(fthtarget.Hot); ok && ml.Checking() {
			cur, rerr := ml.Map.Read(ld.FuncIP.Slot)
			if rerr == nil {
				o := oracle.CheckFuncIP(fthtarget.Hot, oracle.FEntry, exp, prev, cur)
				st.mu.Lock()
				st.fipChecks++
				st.mu.Unlock()
				if !o.OK {
					_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
					a.oracleFail(o)
				}
			}
		}
	}
}

// targetExact runs one exact-count window on fth_target_counted, whose
// only caller is a write to its debugfs file.
func (a *agent) targetExact(ctx context.Context, ml *oracle.Loader, rec *tally.Recorder, st *modStats) {
	fd, err := unix.Open(fthtarget.Call, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		st.skip(err.Error())
		return
	}
	defer unix.Close(fd)
	one := []byte("1")
	w := oracle.Window{
		Loader: ml, Func: fthtarget.Counted, Key: "exact:" + fthtarget.Counted, Name: "module_exact", Rec: rec,
		Call: func() { _, _ = unix.Write(fd, one) },
	}
	if a.opts.Sabotage == options.SabotageSkipCount {
		w.Skip = 1
	}
	ex, _, err := w.Exact(ctx, a.opts.ExactCalls)
	if err != nil {
		st.skip(err.Error())
		return
	}
	a.exactWindow(&st.windowTally, ex)
}

// summary is the module companions' exact-count summary event.
func (st *modStats) summary(calls int) event.Oracle {
	st.mu.Lock()
	defer st.mu.Unlock()
	why := "fth_target never loaded"
	if st.skipped != "" {
		why = "no window completed: " + st.skipped
	}
	return exactSummary(fthtarget.Counted, calls, st.windows, st.failures, why)
}

// logModule records where a module's text was loaded: the address a hung
// or crashed CPU is found at (registers.txt, an oops RIP) can then be
// matched to a module that was already unloaded.
func (a *agent) logModule(name string) {
	emit.Logf(a.w, "module %s loaded, .text at %s", name, modload.TextAddr(name))
}

// scaleModule loads fth_scale.ko when the scalemod option asks for it and
// returns its BTF for the inventory; nil when not asked.
func (a *agent) scaleModule(cache *btf.Cache) (map[string]*btf.Spec, error) {
	if !a.opts.ScaleModule {
		return nil, nil
	}
	name := options.ScaleModuleName
	t0 := time.Now()
	if !modload.Loaded(name) {
		path := filepath.Join(modload.DefaultDir, name+".ko")
		if err := modload.Load(path, ""); err != nil {
			return nil, fmt.Errorf("load %s (the host builds it for cells run with --agent-arg scalemod=true): %w", path, err)
		}
	}
	spec, err := cache.Module(name)
	if err != nil {
		return nil, fmt.Errorf("BTF of %s (CONFIG_DEBUG_INFO_BTF_MODULES): %w", name, err)
	}
	emit.Logf(a.w, "scale module %s loaded with its BTF in %v", name, time.Since(t0).Round(time.Millisecond))
	return map[string]*btf.Spec{name: spec}, nil
}
