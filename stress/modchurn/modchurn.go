// Package modchurn is the churn scenario's module churn (modules=true):
// beside the BPF churn it loads and unloads the kernel's ftrace-direct
// samples one at a time, and fth_target.ko with a function tracer filtering
// it (sometimes set before the load, so that ftrace_module_enable patches
// it), a func-ip fentry on its hot function and an exact-count window on
// its counted function, so that the module's ftrace records come and go
// under every other user.
package modchurn

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

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
	// modBufferKB keeps the instance's ring buffers small: nobody reads
	// them.
	modBufferKB = 256
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
var notCycled = map[string]bool{"ftrace_ops": true, fthtarget.Module: true, deliver.ModuleName: true, deliver.KLPModule: true, options.ScaleModuleName: true}

// Env is what the module churn takes from the churn it runs beside:
// its Loader loads the func-ip and exact-count programs on fth_target,
// and a tracer instance of Top traces fth_target's functions.
type Env struct {
	deliver.Companion
	// Anchor is a vmlinux function kept in the module instance's filter
	// so that the filter never becomes empty (which would trace every
	// function) when the module goes.
	Anchor string
	// Fail records another reason, already logged, that the run is not
	// ok: a module that would not load or unload.
	Fail func(reason string)
}

// Stats counts what the module churn did, for its summary.
type Stats struct {
	// TargetRuns counts fth_target's loads that were unloaded again.
	TargetRuns int
	// Windows and Failures count the exact-count windows on
	// fth_target_counted, and those whose count was wrong.
	Windows, Failures int
	// FIPChecks counts the func-ip checks of the fentry on fth_target's
	// hot function.
	FIPChecks int
	// Skipped says why the last window could not run.
	Skipped string
}

// Summary is the module churn's exact-count summary event, for windows
// of calls calls.
func (st Stats) Summary(calls int) event.Oracle {
	why := "fth_target never loaded"
	if st.Skipped != "" {
		why = "no window completed: " + st.Skipped
	}
	return oracle.ExactSummary(fthtarget.Counted, calls, st.Windows, st.Failures, why)
}

// modChurn is one run of the module churn with its Env.
type modChurn struct{ Env }

// Run cycles the kernel's ftrace-direct samples one at a time, and
// fth_target with a function tracer filtering it and a func-ip fentry on
// its hot function, until ctx ends; it returns what the fth_target loop
// counted.
func Run(ctx context.Context, env Env) Stats {
	m := &modChurn{env}
	var st Stats
	paths, err := modload.List(modload.DefaultDir)
	if err != nil || len(paths) == 0 {
		msg := "no modules in " + modload.DefaultDir
		if err != nil {
			msg = err.Error()
		}
		m.feature(event.Feature{Name: "modules", Msg: msg})
		return st
	}
	var samples []string
	target := ""
	only := map[string]bool{}
	for _, n := range m.Opts.ModList {
		only[n] = true
	}
	var avoided []string
	for _, p := range paths {
		n := modload.Name(p)
		if len(only) > 0 && !only[n] {
			continue
		}
		if !m.Opts.IncludeKnown && slices.Contains(known.Modules(), n) {
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
	m.feature(event.Feature{Name: "modules", Supported: true, Msg: msg})
	var wg sync.WaitGroup
	if len(samples) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &modload.Cycler{Paths: samples, Hold: m.Opts.ModHold, Rec: m.Rec, OnLoad: m.logModule}
			if err := c.Run(ctx, rand.New(rand.NewPCG(uint64(m.Opts.Seed), streamSamples))); err != nil {
				m.fail(fmt.Sprintf("modules: %v", err))
			}
		}()
	}
	if target != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.targetLoop(ctx, target, &st)
		}()
	}
	wg.Wait()
	return st
}

// feature emits a Feature event.
func (m *modChurn) feature(f event.Feature) {
	_ = m.W.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
}

// logModule logs where module name's text was loaded.
func (m *modChurn) logModule(name string) { modload.LogLoaded(m.W, name) }

// fail logs and records a non-oracle reason for a failed churn.
func (m *modChurn) fail(msg string) {
	emit.Logf(m.W, "churn: %s", msg)
	m.Fail(msg)
}

// oracleFail emits a failed check and records it for the verdict.
func (m *modChurn) oracleFail(o event.Oracle) {
	_ = m.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
	m.OracleFail(o)
}

// targetLoop is the fth_target half of Run: the module at path loaded
// and unloaded until ctx ends. st is its own.
func (m *modChurn) targetLoop(ctx context.Context, path string, st *Stats) {
	rec := m.Rec
	rng := rand.New(rand.NewPCG(uint64(m.Opts.Seed), streamTarget))
	// The tracer on fth_target's functions, unless there is no instance
	// for it or a filter cannot name a module's functions (fth_scale.ko
	// loaded): targetFilter names them, which the kernel matches by name.
	var inst tracefs.FS
	usable := false
	if m.NoNameFilter != "" {
		m.feature(event.Feature{Name: "module_tracer", Msg: "the tracer on fth_target's functions: " + m.NoNameFilter})
	} else if i, err := m.Top.Instance(modInstance); err != nil {
		m.feature(attach.FeatureErr("module_tracer_instance", err))
	} else {
		inst, usable = i, true
		_ = inst.SetBufferKB(modBufferKB)
		_ = inst.Reset()
		defer func() {
			if err := inst.Reset(); err != nil {
				emit.Logf(m.W, "modules: %v", err)
			}
			if err := m.Top.RemoveInstance(modInstance); err != nil {
				emit.Logf(m.W, "modules: %v", err)
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
			if rec.Time(opModFilter, fthtarget.Module, func() error { return inst.SetFilter(m.Anchor, targetFilter) }) != nil {
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
		m.logModule(fthtarget.Module)
		if !before && rng.IntN(2) == 0 {
			tracer(true)
		}
		m.targetChecks(ctx, rng, st)
		if rng.IntN(2) == 0 {
			tracer(false)
		}
		if err := modload.UnloadRetry(rec, fthtarget.Module, 0); err != nil {
			m.fail(fmt.Sprintf("modules: %v", err))
			return
		}
		st.TargetRuns++
	}
}

// targetChecks runs, on a freshly loaded fth_target, a func-ip fentry on
// its hot function for a random hold and an exact-count window on its
// counted function.
func (m *modChurn) targetChecks(ctx context.Context, rng *rand.Rand, st *Stats) {
	rec := m.Rec
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, fthtarget.Module, []string{fthtarget.Hot, fthtarget.Counted})
	if err != nil || len(addrs) < 2 {
		st.Skipped = fmt.Sprintf("no kallsyms addresses for %s (%v)", fthtarget.Module, err)
		ctxsleep.Sleep(ctx, m.Opts.ModHold/4)
		return
	}
	ml := m.Loader.WithAddrs(addrs)

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
	if m.Opts.ExactCalls > 0 {
		m.targetExact(ctx, ml, st)
	}

	hold := m.Opts.ModHold/4 + time.Duration(rng.Int64N(int64(m.Opts.ModHold-m.Opts.ModHold/4)+1))
	ctxsleep.Sleep(ctx, hold)

	if link >= 0 {
		_ = rec.Time(opModDetach, fthtarget.Hot, func() error { return unix.Close(link) })
		if exp, ok := ml.Expected(fthtarget.Hot); ok && ml.Checking() {
			cur, rerr := ml.Map.Read(ld.FuncIP.Slot)
			if rerr == nil {
				o := oracle.CheckFuncIP(fthtarget.Hot, oracle.FEntry, exp, prev, cur)
				st.FIPChecks++
				if !o.OK {
					m.oracleFail(o)
				}
			}
		}
	}
}

// targetExact runs one exact-count window on fth_target_counted, whose
// only caller is a write to its debugfs file, and emits its result.
func (m *modChurn) targetExact(ctx context.Context, ml *oracle.Loader, st *Stats) {
	fd, err := unix.Open(fthtarget.Call, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		st.Skipped = err.Error()
		return
	}
	defer unix.Close(fd)
	one := []byte("1")
	w := oracle.Window{
		Loader: ml, Func: fthtarget.Counted, Key: "exact:" + fthtarget.Counted, Name: "module_exact", Rec: m.Rec,
		Call: func() { _, _ = unix.Write(fd, one) },
	}
	if m.Opts.Sabotage == options.SabotageSkipCount {
		w.Skip = 1
	}
	ex, _, err := w.Exact(ctx, m.Opts.ExactCalls)
	if err != nil {
		st.Skipped = err.Error()
		return
	}
	st.Windows++
	if !ex.OK {
		st.Failures++
	}
	_ = m.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &ex})
	if !ex.OK {
		m.OracleFail(ex)
	}
}
