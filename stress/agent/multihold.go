package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/multi"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// multiFuncs picks the multihold population: n of rest (the candidates
// the churn does not touch) that the storm's bg does not take, in the
// seeded order the storm draws from, vmlinux's functions before the scale
// module's.
func multiFuncs(rest, bg []string, n int, seed int64) []string {
	storm := make(map[string]bool, len(bg))
	for _, fn := range bg {
		storm[fn] = true
	}
	free := slices.DeleteFunc(selectFuncs(rest, options.All, seed), func(fn string) bool { return storm[fn] })
	out := multi.OwnFirst(free, options.ScaleModuleFunc)
	return out[:min(n, len(out))]
}

// holdMulti attaches funcs through tracing_multi links, one program for
// vmlinux's functions and one for the scale module's, or through
// kprobe_multi links where the kernel has no tracing_multi (each a
// feature event). A kernel that refuses both is a feature not supported,
// and the run goes on without the population: nil Held and no error. An
// error that is not the kernel's refusal fails the run.
func (a *agent) holdMulti(ctx context.Context, cache *btf.Cache, funcs []string) (*multi.Held, error) {
	if len(funcs) < a.opts.MultiHold {
		emit.Logf(a.w, "multi: %d functions asked for, %d candidates left beside the storm and the churn", a.opts.MultiHold, len(funcs))
	}
	groups, release, err := multi.Split(cache, funcs, options.ScaleModuleName, options.ScaleModuleFunc)
	defer release()
	if err != nil {
		return nil, fmt.Errorf("multi: %w", err)
	}
	i := slices.IndexFunc(funcs, options.ScaleModuleFunc)
	if i < 0 {
		i = len(funcs)
	}
	emit.Logf(a.w, "multi: %s; %d functions (%d of vmlinux, %d of %s)", multi.Note, len(funcs), i, len(funcs)-i, options.ScaleModuleName)
	held, ph, refused, err := multi.HoldBest(ctx, multi.Config{Emit: a.w}, groups)
	if refused != nil {
		a.feature(event.Feature{Name: "tracing_multi", Msg: refused.Error()})
	}
	if err != nil && held.Functions == 0 && ctx.Err() == nil && multi.Refused(err) {
		held.Close()
		a.feature(event.Feature{Name: string(held.Kind()), Msg: err.Error()})
		emit.Logf(a.w, "multi: no multi-function population: %v", err)
		return nil, nil
	}
	if err != nil {
		return held, fmt.Errorf("multi: %w", err)
	}
	a.feature(event.Feature{Name: string(held.Kind()), Supported: true,
		Msg: fmt.Sprintf("%d of %d functions held by %s links in %.1f s", ph.Succeeded, ph.Attempted, held.Kind(), ph.Wall.Std().Seconds())})
	if ph.Failed > 0 {
		emit.Logf(a.w, "multi: the kernel refused %d functions: %v", ph.Failed, ph.Errnos)
	}
	return held, nil
}
