package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/churn"
	"github.com/ftrace-harness/fth/stress/churnrun"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// executeChurn runs the churn scenario after the inventory: hot set,
// optional background trampolines, then the churn with mixed tracers,
// preemption switching, hotplug and the exact-count windows around it.
func (a *agent) executeChurn(ctx context.Context, cache *btf.Cache, inv inventory.Result) (err error) {
	o := a.opts
	a.stage(event.StageStorm, "")

	addrs, err := ksyms.Read(ksyms.DefaultPath, inv.Candidates)
	if err != nil {
		a.feature(event.Feature{Name: "kallsyms_addresses", Msg: err.Error()})
		addrs = nil
	}
	exactFn := ""
	if o.ExactCalls > 0 {
		exactFn = churn.EntryFunc(inv.Candidates, string(churnrun.ExactSyscall))
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
	hot := churn.SelectHot(inv.Candidates, churnrun.HotSyscalls(exactFn != ""), o.Hot, o.Seed, keep)
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
		hcfg.Exclude = []hammer.Syscall{churnrun.ExactSyscall}
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
		// The churn stage: the churn, its oracles and companions
		// (stress/churnrun); its verdict is the agent's.
		res, err := churnrun.Run(ctx, churnrun.Env{
			W: a.w, Opts: a.opts, Cache: cache, Addrs: addrs, Hot: hot, ExactFn: exactFn,
			Candidates: inv.Candidates,
		})
		a.churn = res
		if err != nil {
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

// feature emits a Feature event.
func (a *agent) feature(f event.Feature) {
	_ = a.w.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
}
