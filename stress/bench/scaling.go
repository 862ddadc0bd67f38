package bench

import (
	"context"
	"fmt"
	"slices"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// noPhases passes events on except Phase events: the attach package emits
// one per phase, and the host keeps them by phase name, so each N would
// overwrite the last in result.json. The bench event holds them all.
type noPhases struct{ emit.Emitter }

// Emit implements emit.Emitter.
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
		emit.Logf(r.cfg.Emit, "bench: limits: %v", err)
	}
	at, err := attach.New(attach.Config{Cache: r.cfg.Cache, Emit: noPhases{r.cfg.Emit}, FExitEvery: r.cfg.FExitEvery})
	if err != nil {
		return out, err
	}
	out.Supported = true
	defer func() {
		var pn []int
		var as, ds []float64
		for _, p := range out.Points {
			if p.Attached == p.N && p.Detached == p.N {
				pn, as, ds = append(pn, p.N), append(as, p.AttachSeconds), append(ds, p.DetachSeconds)
			}
		}
		out.AttachExponent, out.DetachExponent = growthExponent(pn, as), growthExponent(pn, ds)
		if len(pn) > 1 {
			emit.Logf(r.cfg.Emit, "bench: scaling: total time grows as N^%.2f (attach) and N^%.2f (detach) over N = %v", out.AttachExponent, out.DetachExponent, pn)
		}
	}()
	for _, n := range ns {
		pt, err := r.scalingPoint(ctx, at, r.order[:n], fmt.Sprintf("N=%d", n), r.profileAt(ns, n))
		if len(out.Points) > 0 {
			first := out.Points[0]
			pt.AttachRatio = PerOpRatio(pt.AttachSeconds, pt.Attach.Count, first.AttachSeconds, first.Attach.Count)
			pt.DetachRatio = PerOpRatio(pt.DetachSeconds, pt.Detach.Count, first.DetachSeconds, first.Detach.Count)
		} else if pt.Attach.Count > 0 {
			pt.AttachRatio, pt.DetachRatio = 1, 1
		}
		out.Points = append(out.Points, pt)
		emit.Logf(r.cfg.Emit, "bench: scaling N=%d: attach %.2fs (median %v, p99 %v, x%.2f per op), detach %.2fs (median %v, p99 %v, x%.2f per op), %d attached holding %s",
			n, pt.AttachSeconds, pt.Attach.Median, pt.Attach.P99, pt.AttachRatio, pt.DetachSeconds, pt.Detach.Median, pt.Detach.P99, pt.DetachRatio, pt.Attached, formatKB(pt.MemoryKB))
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// scalingPoint loads, attaches and detaches funcs, profiling the attach
// and the detach when prof (label names the point in the profiles' log
// lines). Its set is closed on every path, so no link outlives the point.
func (r *runner) scalingPoint(ctx context.Context, at *attach.Attacher, funcs []string, label string, prof bool) (pt event.BenchScalingPoint, err error) {
	pt = event.BenchScalingPoint{N: len(funcs)}
	set := attach.NewSet()
	defer func() {
		if cerr := set.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	before := settledKernelFree(ctx)
	lp, err := at.Load(ctx, set, funcs)
	pt.Loaded, pt.LoadSeconds = lp.Succeeded, seconds(lp.Wall.Std())
	addErrnos(&pt, lp)
	if err != nil {
		return pt, err
	}
	var ap event.Phase
	pt.AttachProfile, err = r.profiled(prof, "attach "+label, func() (err error) {
		ap, err = at.Attach(ctx, set)
		return err
	})
	if after := settledKernelFree(ctx); before >= 0 && after >= 0 {
		pt.MemoryKB = before - after
	}
	pt.Attached, pt.AttachSeconds, pt.Attach = ap.Succeeded, seconds(ap.Wall.Std()), ap.Latency
	addErrnos(&pt, ap)
	if err != nil {
		return pt, err
	}
	var dp event.Phase
	pt.DetachProfile, err = r.profiled(prof, "detach "+label, func() (err error) {
		dp, err = at.Detach(ctx, set, options.All)
		return err
	})
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
