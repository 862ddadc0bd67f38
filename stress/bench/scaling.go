package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/ftrace-harness/fth/results/event"
	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/options"
	"github.com/ftrace-harness/fth/stress/report"
)

// noPhases passes events on except Phase events: the attach package emits
// one per phase, and the host keeps them by phase name, so each N would
// overwrite the last in result.json. The bench event holds them all.
type noPhases struct{ report.Emitter }

// Emit implements report.Emitter.
func (e noPhases) Emit(ev event.Event) error {
	if ev.Kind == event.KindPhase {
		return nil
	}
	return e.Emitter.Emit(ev)
}

// capCounts caps each count at limit and drops repeats, keeping the order:
// two requests above the candidate count would measure the same N twice.
func capCounts(ns []int, limit int) []int {
	var out []int
	for _, n := range ns {
		n = min(n, limit)
		if n > 0 && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// scaling attaches N fresh trampolines and detaches them all, for each N,
// with the attach package's timing.
func (r *runner) scaling(ctx context.Context) (*event.BenchScaling, error) {
	out := &event.BenchScaling{Candidates: len(r.order)}
	ns := capCounts(r.cfg.ScalingN, len(r.order))
	if len(ns) == 0 {
		out.Skipped = fmt.Sprintf("no count to measure (scalingn %v, %d candidates)", r.cfg.ScalingN, len(r.order))
		return out, nil
	}
	if err := attach.PrepareLimits(slices.Max(ns)); err != nil {
		report.Logf(r.cfg.Emit, "bench: limits: %v", err)
	}
	at, err := attach.New(attach.Config{Cache: r.cfg.Cache, Emit: noPhases{r.cfg.Emit}})
	if err != nil {
		return out, err
	}
	out.Supported = true
	for _, n := range ns {
		pt, err := r.scalingPoint(ctx, at, n)
		if len(out.Points) > 0 {
			first := out.Points[0]
			pt.AttachRatio = PerOpRatio(pt.AttachSeconds, pt.Attach.Count, first.AttachSeconds, first.Attach.Count)
			pt.DetachRatio = PerOpRatio(pt.DetachSeconds, pt.Detach.Count, first.DetachSeconds, first.Detach.Count)
		} else if pt.Attach.Count > 0 {
			pt.AttachRatio, pt.DetachRatio = 1, 1
		}
		out.Points = append(out.Points, pt)
		report.Logf(r.cfg.Emit, "bench: scaling N=%d: attach %.2fs (median %v, x%.2f per op), detach %.2fs (median %v, x%.2f per op), %d attached",
			n, pt.AttachSeconds, pt.Attach.Median, pt.AttachRatio, pt.DetachSeconds, pt.Detach.Median, pt.DetachRatio, pt.Attached)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// scalingPoint loads, attaches and detaches the first n functions of the
// order. Its set is closed on every path, so no link outlives the point.
func (r *runner) scalingPoint(ctx context.Context, at *attach.Attacher, n int) (pt event.BenchScalingPoint, err error) {
	pt = event.BenchScalingPoint{N: n}
	set := attach.NewSet()
	defer func() {
		if cerr := set.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	lp, err := at.Load(ctx, set, r.order[:n])
	pt.Loaded, pt.LoadSeconds = lp.Succeeded, seconds(lp.Wall.Std())
	addErrnos(&pt, lp)
	if err != nil {
		return pt, err
	}
	ap, err := at.Attach(ctx, set)
	pt.Attached, pt.AttachSeconds, pt.Attach = ap.Succeeded, seconds(ap.Wall.Std()), ap.Latency
	addErrnos(&pt, ap)
	if err != nil {
		return pt, err
	}
	dp, err := at.Detach(ctx, set, options.All)
	pt.Detached, pt.DetachSeconds, pt.Detach = dp.Succeeded, seconds(dp.Wall.Std()), dp.Latency
	addErrnos(&pt, dp)
	return pt, err
}

// addErrnos counts ph's failures in pt as "<phase>:<errno>".
func addErrnos(pt *event.BenchScalingPoint, ph event.Phase) {
	for e, c := range ph.Errnos {
		if pt.Errnos == nil {
			pt.Errnos = map[string]int{}
		}
		pt.Errnos[ph.Name+":"+e] += c
	}
}
