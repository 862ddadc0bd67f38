package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/bench"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/wire/event"
)

// executeBench runs the bench scenario after the inventory and emits its one
// bench event. A bench has no verdict of its own: Done is OK unless a part
// could not run to its end or left the kernel in a state it could not undo.
func (a *agent) executeBench(ctx context.Context, cache *btf.Cache, inv inventory.Result) error {
	o := a.opts
	// Selected is the most the scaling curve attaches at once.
	sel := 0
	if len(o.ScalingN) > 0 {
		sel = min(slices.Max(o.ScalingN), len(inv.Candidates))
	}
	_ = a.w.Emit(event.Event{Kind: event.KindInventory, Inventory: inv.Event(sel)})
	emit.Logf(a.w, "bench: parts %v on %d candidates; rejected: %s", o.BenchParts, len(inv.Candidates), formatReasons(inv.Rejected))

	b, err := bench.Run(ctx, bench.Config{
		Parts:        o.BenchParts,
		Emit:         a.w,
		Cache:        cache,
		Candidates:   inv.Candidates,
		Seed:         o.Seed,
		OpsSweep:     o.OpsSweep,
		OpsCalls:     o.OpsCalls,
		SyscallCalls: o.SyscallCalls,
		ScalingN:     o.ScalingN,
		MultiN:       o.MultiN,
		MultiLiveN:   o.MultiLiveN,
		WakeupFor:    o.WakeupFor,
		Profile:      o.Profile,
		FExitEvery:   o.FExitEvery,
		StartHammer:  a.startBenchHammer,
	})
	_ = a.w.Emit(event.Event{Kind: event.KindBench, Bench: &b})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// startBenchHammer starts the agent's hammer for the wakeup storm, so that
// its liveness and stalls are reported as in any other scenario; the
// returned stop emits the final liveness. It runs no RT threads: without
// RT group scheduling every RT task of a CPU shares one RT bandwidth, so
// once the hammer's RT threads used it up the measured SCHED_FIFO thread
// would be throttled with them, and the storm's latency would be the
// throttling's.
func (a *agent) startBenchHammer(ctx context.Context) (func(), error) {
	if a.ham != nil {
		return nil, fmt.Errorf("the hammer already ran in this boot")
	}
	o := a.opts
	emit.Logf(a.w, "bench: hammer: %d threads, none RT (rt=%d ignored in the bench storm)", o.Threads, o.RT)
	h, err := hammer.Start(ctx, hammer.Config{Threads: o.Threads, Stall: o.Stall, Seed: o.Seed, Emit: a.w, TimerPeriod: o.TimerPeriod})
	if err != nil {
		return nil, err
	}
	a.ham = h
	return a.stopHammer, nil
}
