package compare

import (
	"fmt"
	"slices"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// BenchRule decides when a bench figure got worse rather than noisier. The
// constants come from three tcg-single bench runs of one kernel on the
// 2-core reference machine (out/runs/bench-full1, bench-quick1 and
// bench-quick2; their bench sections are in testdata/), not from theory.
//
// Ratios to the baseline (ftrace-ops points, syscall states). Each figure
// is the median of 3 (ops) or 5 (syscall) timed runs under TCG, and one
// slow run moves it: between full1 and quick2 the ratio of one relevant
// plus ten irrelevant ops went from 3.02× to 4.79× (+59%) with nothing
// changed, while their fastest-run ratios (3.56×, 7.03×) disagreed even
// more. No single number is steady, but each run brackets its ratio
// between the median-based and the fastest-run one. So B regresses when
// the low end of its bracket exceeds the high end of A's by more than the
// largest of: RatioGrowth of A's high end; RatioFloor (small ratios near
// 1 move by tenths on their own); and, for ftrace-ops points, A's own
// run-to-run range over its baseline (runs_ns lists every run, and a
// difference smaller than the one between two runs of A says nothing).
// The baselines themselves, and the syscall's baseline_end (drift of the
// same baseline at the end), are controls and not judged.
//
// Scaling: attach (and detach) seconds for the same N moved by up to 41%
// (N=100: 1.03 vs 1.46 s) and 28% (N=1000) between those runs; hence 50%.
// ScalingFloor keeps sub-second points on fast hosts quiet; it is a guess,
// as no KVM bench run exists here to measure it. A point where not all N
// attached (or detached) measured something else and is not compared.
//
// Wakeup: the storm p99 of full1 and quick2 were 8593 and 8511 µs. B
// regresses when its storm p99 exceeds WakeupFactor times A's and also
// A's own p99.9 (a p99 below what A saw once in a thousand wakeups is A's
// own tail), with WakeupMinSamples on each side (p99 of fewer rests on a
// handful of wakeups), and only when both storms attached something (a
// storm that did nothing measured a quiet system). quick1 came from an
// older agent whose storm hammer ran SCHED_FIFO threads that throttled the
// measured thread: its storm p99 of 19562 µs is 2.3× quick2's and above
// quick2's p99.9, and the rule flags it, as it should.
type BenchRule struct {
	// RatioGrowth is the smallest growth of a ratio, relative to A's, that
	// counts; RatioFloor the smallest absolute growth.
	RatioGrowth, RatioFloor float64
	// ScalingGrowth is the smallest relative growth of attach or detach
	// seconds at one N that counts; ScalingFloor the smallest absolute, in
	// seconds.
	ScalingGrowth, ScalingFloor float64
	// WakeupFactor is how many times A's storm p99 B's must exceed.
	WakeupFactor float64
	// WakeupMinSamples is how many wakeups each storm run needs.
	WakeupMinSamples int64
}

// DefaultBenchRule is the rule above with its measured constants.
func DefaultBenchRule() BenchRule {
	return BenchRule{RatioGrowth: 0.25, RatioFloor: 0.3, ScalingGrowth: 0.5, ScalingFloor: 0.25, WakeupFactor: 2, WakeupMinSamples: 1000}
}

// String states the rule for a table footer.
func (r BenchRule) String() string {
	return fmt.Sprintf("bench ratio up by more than max(%.0f%%, %.2g, A's run-to-run range) between the runs' median/fastest brackets; "+
		"scaling seconds at one N up by more than max(%.0f%%, %.2g s); storm wakeup p99 above %.3g× A's and above A's p99.9, with %d wakeups each",
		r.RatioGrowth*100, r.RatioFloor, r.ScalingGrowth*100, r.ScalingFloor, r.WakeupFactor, r.WakeupMinSamples)
}

// Bench issue kinds, all regressions but KindNotComparable notes.
const (
	// KindBenchRatio is a ratio to the baseline that grew.
	KindBenchRatio Kind = "bench-ratio"
	// KindScaling is an attach or detach at one N that got slower.
	KindScaling Kind = "scaling"
	// KindWakeup is a storm wakeup p99 that grew.
	KindWakeup Kind = "wakeup"
)

// compareBench applies the bench rule to two cells' bench sections.
func compareBench(a, b *results.Result, rule BenchRule) []Issue {
	ba, bb := a.Bench, b.Bench
	switch {
	case ba == nil && bb == nil:
		return nil
	case ba == nil || bb == nil:
		if a.Verdict != b.Verdict {
			return nil // the verdict change says more
		}
		return []Issue{{Kind: KindNotComparable, Detail: "bench: measured in one run only"}}
	case a.Accel != b.Accel:
		return []Issue{{Kind: KindNotComparable, Detail: fmt.Sprintf("bench: accelerators differ (%s vs %s)", a.Accel, b.Accel)}}
	}
	var out []Issue
	out = append(out, compareOps(ba.Ops, bb.Ops, rule)...)
	out = append(out, compareSyscall(ba.Syscall, bb.Syscall, rule)...)
	out = append(out, compareScaling(ba.Scaling, bb.Scaling, rule)...)
	out = append(out, compareWakeup(ba.Wakeup, bb.Wakeup, rule)...)
	return out
}

// partsRan reports whether a bench part ran on both sides, with a note
// when it ran in A only (a part B could not run is worth a look, though
// not a slowdown).
func partsRan(name string, aRan, bRan bool, bSkipped string) (bool, []Issue) {
	switch {
	case aRan && bRan:
		return true, nil
	case aRan:
		return false, []Issue{{Kind: KindNotComparable, Detail: fmt.Sprintf("bench %s: ran in the baseline only (%s)", name, orText(bSkipped, "no reason given"))}}
	}
	return false, nil
}

// bracket is what one run says a ratio is: its median-based and its
// fastest-run ratio bound it (the fastest is 0 when not measured).
func bracket(ratio, best float64) (lo, hi float64) {
	if best <= 0 {
		return ratio, ratio
	}
	return min(ratio, best), max(ratio, best)
}

// ratioIssue judges one ratio; spread is A's own run-to-run range in
// ratio units (0 when unknown).
func ratioIssue(what string, aRatio, aBest, bRatio, bBest, spread float64, rule BenchRule) *Issue {
	if aRatio <= 0 || bRatio <= 0 {
		return nil // no baseline on one side: nothing to compare
	}
	aLo, aHi := bracket(aRatio, aBest)
	bLo, bHi := bracket(bRatio, bBest)
	limit := aHi + max(rule.RatioGrowth*aHi, rule.RatioFloor, spread)
	if bLo <= limit {
		return nil
	}
	return &Issue{Kind: KindBenchRatio, Regression: true, Detail: fmt.Sprintf("%s ratio %s→%s (limit %.2f×)", what, span(aLo, aHi), span(bLo, bHi), limit)}
}

func span(lo, hi float64) string {
	if lo == hi {
		return fmt.Sprintf("%.2f×", lo)
	}
	return fmt.Sprintf("%.2f–%.2f×", lo, hi)
}

type opsKey struct {
	relevant, irrelevant int
	saveRegs             bool
}

func compareOps(a, b *event.BenchOps, rule BenchRule) []Issue {
	if a == nil || b == nil {
		return nil
	}
	ok, notes := partsRan("ftrace-ops", a.Supported, b.Supported, b.Skipped)
	if !ok {
		return notes
	}
	byKey := map[opsKey]event.BenchOpsPoint{}
	for _, p := range b.Points {
		byKey[opsKey{p.Relevant, p.Irrelevant, p.SaveRegs}] = p
	}
	var out []Issue
	for _, pa := range a.Points {
		pb, found := byKey[opsKey{pa.Relevant, pa.Irrelevant, pa.SaveRegs}]
		if !found || pa.Error != "" || pb.Error != "" {
			continue
		}
		if is := ratioIssue(opsName(pa), pa.Ratio, pa.BestRatio, pb.Ratio, pb.BestRatio, runRange(pa, a.Baseline), rule); is != nil {
			out = append(out, *is)
		}
	}
	return out
}

func opsName(p event.BenchOpsPoint) string {
	s := fmt.Sprintf("ftrace-ops %d relevant + %d irrelevant", p.Relevant, p.Irrelevant)
	if p.SaveRegs {
		s += " save_regs"
	}
	return s
}

// runRange is how far apart a point's own runs were, over the baseline:
// the noise of that point in ratio units.
func runRange(p event.BenchOpsPoint, base *event.BenchOpsPoint) float64 {
	if len(p.RunsNs) < 2 || base == nil || base.NsPerCall <= 0 {
		return 0
	}
	return (slices.Max(p.RunsNs) - slices.Min(p.RunsNs)) / base.NsPerCall
}

// controlStates are the syscall states that measure the untraced call,
// the denominators and their drift, not a traced state.
var controlStates = []string{"baseline", "baseline_end"}

func compareSyscall(a, b *event.BenchSyscall, rule BenchRule) []Issue {
	if a == nil || b == nil {
		return nil
	}
	ok, notes := partsRan("syscall", a.Supported, b.Supported, b.Skipped)
	if !ok {
		return notes
	}
	byName := map[string]event.BenchSyscallState{}
	for _, s := range b.States {
		byName[s.Name] = s
	}
	var out []Issue
	for _, sa := range a.States {
		sb, found := byName[sa.Name]
		if !found || slices.Contains(controlStates, sa.Name) || sa.Skipped != "" || sb.Skipped != "" {
			continue
		}
		if is := ratioIssue("syscall "+sa.Name, sa.Ratio, sa.BestRatio, sb.Ratio, sb.BestRatio, 0, rule); is != nil {
			out = append(out, *is)
		}
	}
	return out
}

func compareScaling(a, b *event.BenchScaling, rule BenchRule) []Issue {
	if a == nil || b == nil {
		return nil
	}
	ok, notes := partsRan("scaling", a.Supported, b.Supported, b.Skipped)
	if !ok {
		return notes
	}
	byN := map[int]event.BenchScalingPoint{}
	for _, p := range b.Points {
		byN[p.N] = p
	}
	var out []Issue
	for _, pa := range a.Points {
		pb, found := byN[pa.N]
		if !found {
			continue
		}
		for _, ph := range []struct {
			name       string
			done       func(event.BenchScalingPoint) int
			aSec, bSec float64
		}{
			{"attach", func(p event.BenchScalingPoint) int { return p.Attached }, pa.AttachSeconds, pb.AttachSeconds},
			{"detach", func(p event.BenchScalingPoint) int { return p.Detached }, pa.DetachSeconds, pb.DetachSeconds},
		} {
			if ph.done(pa) != pa.N || ph.done(pb) != pb.N {
				out = append(out, Issue{Kind: KindNotComparable, Detail: fmt.Sprintf("scaling N=%d %s: %d vs %d of %d done", pa.N, ph.name, ph.done(pa), ph.done(pb), pa.N)})
				continue
			}
			limit := ph.aSec + max(rule.ScalingGrowth*ph.aSec, rule.ScalingFloor)
			if ph.aSec <= 0 || ph.bSec <= limit {
				continue
			}
			out = append(out, Issue{Kind: KindScaling, Regression: true, Detail: fmt.Sprintf("scaling N=%d %s %.2f s→%.2f s (+%.0f%%, limit %.2f s)",
				pa.N, ph.name, ph.aSec, ph.bSec, 100*(ph.bSec-ph.aSec)/ph.aSec, limit)})
		}
	}
	return out
}

func compareWakeup(a, b *event.BenchWakeup, rule BenchRule) []Issue {
	if a == nil || b == nil {
		return nil
	}
	ok, notes := partsRan("wakeup", a.Supported, b.Supported, b.Skipped)
	if !ok {
		return notes
	}
	sa, sb := a.Storm, b.Storm
	notComparable := func(why string) []Issue {
		return []Issue{{Kind: KindNotComparable, Detail: "wakeup storm: " + why}}
	}
	switch {
	case sa == nil || sb == nil:
		return notComparable("measured in one run only")
	case sa.Samples < rule.WakeupMinSamples || sb.Samples < rule.WakeupMinSamples:
		return notComparable(fmt.Sprintf("%d vs %d wakeups, need %d each", sa.Samples, sb.Samples, rule.WakeupMinSamples))
	case a.StormAttaches == 0 || b.StormAttaches == 0:
		return notComparable(fmt.Sprintf("%d vs %d attaches during the storm: a storm that attached nothing measured a quiet system", a.StormAttaches, b.StormAttaches))
	}
	limit := max(rule.WakeupFactor*sa.P99, sa.P999)
	if sa.P99 <= 0 || sb.P99 <= limit {
		return nil
	}
	return []Issue{{Kind: KindWakeup, Regression: true, Detail: fmt.Sprintf("wakeup storm p99 %.0f µs→%.0f µs (%.1f×, limit %.0f µs)", sa.P99, sb.P99, sb.P99/sa.P99, limit)}}
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
