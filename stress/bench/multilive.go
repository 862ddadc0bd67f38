package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/multi"
	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// multiLive grows a tracing_multi population (kprobe_multi where the
// kernel has no tracing_multi) to each size of MultiLiveN in turn, in one
// boot, and at each size attaches and detaches the same
// benchopts.MultiLiveSamples per-link trampolines on functions outside it,
// profiled at the profiled sizes. The population is vmlinux's functions of
// the order first, then the scale module's; the samples are the order's
// last functions. Every link of the population is closed at the end, and
// counted.
func (r *runner) multiLive(ctx context.Context) (out *event.BenchMultiLive, err error) {
	samples := benchopts.MultiLiveSamples
	out = &event.BenchMultiLive{Samples: samples}
	if len(r.order) <= samples {
		out.Skipped = fmt.Sprintf("%d candidates: none left beside the %d per-link samples", len(r.order), samples)
		return out, nil
	}
	sampleFns := r.order[len(r.order)-samples:]
	pop := multi.OwnFirst(r.order[:len(r.order)-samples], options.ScaleModuleFunc)
	sizes := capCounts(r.cfg.MultiLiveN, len(pop))
	if len(sizes) == 0 {
		out.Skipped = fmt.Sprintf("no population size to measure (multiliven %v, %d candidates)", r.cfg.MultiLiveN, len(pop))
		return out, nil
	}
	slices.Sort(sizes)
	if err := attach.PrepareLimits(samples); err != nil {
		emit.Logf(r.cfg.Emit, "bench: limits: %v", err)
	}
	at, err := attach.New(attach.Config{Cache: r.cfg.Cache, Emit: noPhases{r.cfg.Emit}, FExitEvery: r.cfg.FExitEvery})
	if err != nil {
		return out, err
	}
	emit.Logf(r.cfg.Emit, "bench: multilive: %s; sizes %v, %d per-link samples at each", multi.Note, sizes, samples)
	var held *multi.Held
	defer func() {
		if held == nil {
			return
		}
		dp, derr := held.Detach()
		out.Detach = &dp
		emit.Logf(r.cfg.Emit, "bench: multilive: the population's %d functions detached in %.2fs (%d links closed, %d failed)",
			dp.Attempted, dp.Wall.Std().Seconds(), dp.Latency.Count, dp.Failed)
		if derr != nil {
			err = errors.Join(err, fmt.Errorf("detach the population: %w", derr))
		}
	}()
	cfg := multi.Config{Emit: noPhases{r.cfg.Emit}}
	grown := 0
	for _, size := range sizes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		groups, release, err := multi.Split(r.cfg.Cache, pop[grown:size], options.ScaleModuleName, options.ScaleModuleFunc)
		if err != nil {
			return out, err
		}
		var grow event.Phase
		if held == nil {
			var refused error
			held, grow, refused, err = multi.HoldBest(ctx, cfg, groups)
			out.Kind = string(held.Kind())
			if refused != nil {
				out.TracingRefused = refused.Error()
			}
		} else {
			grow, err = held.Add(ctx, groups)
		}
		release()
		grown = size
		if err != nil && held.Functions == 0 && multi.Refused(err) {
			out.Skipped = "the kernel refused both tracing_multi and kprobe_multi populations: " + err.Error()
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("grow the population to %d: %w", size, err)
		}
		out.Supported = true
		pt := event.MultiLivePoint{Live: held.Functions, Grow: grow}
		settle(ctx)
		pt.Link, err = r.scalingPoint(ctx, at, sampleFns, fmt.Sprintf("with %d live", held.Functions), r.profileAt(sizes, size))
		out.Points = append(out.Points, pt)
		l := pt.Link
		emit.Logf(r.cfg.Emit, "bench: multilive: %d live (grown in %.2fs, %d refused): per-link attach p50 %v p99 %v, detach p50 %v p99 %v (%d of %d attached)",
			pt.Live, grow.Wall.Std().Seconds(), grow.Failed, l.Attach.Median, l.Attach.P99, l.Detach.Median, l.Detach.P99, l.Attached, l.N)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
