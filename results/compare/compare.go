// Package compare tells what got worse between two runs of the same cells: a
// baseline A and a candidate B. Cells are matched by name. A regression is
// one of:
//
//   - a verdict that became fail (pass→fail, or error/skip→fail);
//   - a finding title in B that A's cell did not have;
//   - an attach or detach median slower than the Rule allows;
//   - a churn oracle that passed in A and fails in B;
//   - a bench figure worse than the BenchRule allows: a ratio to the
//     baseline (ftrace-ops point, syscall state), the attach or detach
//     seconds at one N of the scaling curve, the wakeup p99 under storm.
//
// Measurements are never compared across accelerators. Everything else that changed (a cell gone or new, a fail that became a
// pass, a pass that became an error, latencies not comparable) is a note:
// shown, but not a reason to fail a CI job.
package compare

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// Rule decides when a slower median is a regression rather than noise.
//
// B's median regresses when it exceeds A's median by more than the largest
// of: MinRatio of A's median; SpreadFactor times A's p50→p90 spread; Floor.
//
// Why these terms: the per-operation median of 2,000 attaches is stable
// within a run, but not between runs. Three identical tcg-single runs on the
// 2-core reference machine gave attach medians of 16.4, 20.5 and 20.7 ms, a
// 26% spread, with the host's other load as the only difference; hence a
// 30% floor. A baseline whose own distribution is wide (p90 twice the
// median) came from a noisier host, and its median moves more between runs,
// so half its p50→p90 spread widens the band. Twice that spread, the first
// idea, would need a threefold slowdown on these TCG runs before saying
// anything. Floor keeps sub-millisecond jitter on fast (KVM) runs quiet.
type Rule struct {
	// MinRatio is the smallest slowdown, relative to A's median, that counts.
	MinRatio float64
	// SpreadFactor scales A's p50→p90 spread into an allowed slowdown.
	SpreadFactor float64
	// Floor is the smallest absolute slowdown that counts.
	Floor time.Duration
	// MinSamples is how many operations each side needs; fewer, and the
	// phase is noted as not comparable.
	MinSamples int
	// Bench judges the bench scenario's figures.
	Bench BenchRule
}

// DefaultRule is the rule above with its measured constants.
func DefaultRule() Rule {
	return Rule{MinRatio: 0.30, SpreadFactor: 0.5, Floor: 500 * time.Microsecond, MinSamples: 50, Bench: DefaultBenchRule()}
}

// Limit is the slowest median B may have against baseline a.
func (r Rule) Limit(a event.Latency) time.Duration {
	med := a.Median.Std()
	spread := a.P90.Std() - med
	allowed := max(time.Duration(r.MinRatio*float64(med)), time.Duration(r.SpreadFactor*float64(spread)), r.Floor)
	return med + allowed
}

// String states the latency rule for a table footer (the bench rule
// states itself).
func (r Rule) String() string {
	return fmt.Sprintf("median slower by more than max(%.0f%% of baseline median, %.1f× baseline p50→p90 spread, %s), with at least %d operations on each side", r.MinRatio*100, r.SpreadFactor, r.Floor, r.MinSamples)
}

// Kind classifies an Issue.
type Kind string

// Issue kinds. The first three are regressions, as are KindOracle and the
// bench kinds (KindBenchRatio, KindScaling, KindWakeup).
const (
	KindVerdict    Kind = "verdict"
	KindNewFinding Kind = "new-finding"
	KindSlower     Kind = "slower"
	// KindFixed is a fail that became a pass.
	KindFixed Kind = "fixed"
	// KindInfra is a cell that stopped reaching a verdict (error).
	KindInfra Kind = "error"
	// KindMissing is a cell of A that B does not have.
	KindMissing Kind = "missing"
	// KindAdded is a cell of B that A does not have.
	KindAdded Kind = "added"
	// KindNotComparable is a latency that could not be judged.
	KindNotComparable Kind = "not-comparable"
)

// Issue is one thing that changed in a cell.
type Issue struct {
	Kind Kind
	// Regression marks the issues that make fth compare exit 1.
	Regression bool
	// Detail is one line for people.
	Detail string
}

// Latency is one phase's median in both runs.
type Latency struct {
	// Phase is "attach" or "detach".
	Phase string
	// A and B are the medians; Limit is the slowest B allowed. All are zero
	// when the phase was not compared.
	A, B, Limit time.Duration
	// Compared is false when the rule could not be applied (see Issues).
	Compared bool
}

// Row is one cell in both runs.
type Row struct {
	// Cell is the name the two runs share.
	Cell string
	// A and B are the verdicts, "" when the run has no such cell.
	A, B results.Verdict
	// Latencies has one entry per compared phase, attach then detach.
	Latencies []Latency
	// Issues lists what changed, regressions and notes alike.
	Issues []Issue
}

// Regressed reports whether any issue of the row is a regression.
func (r Row) Regressed() bool {
	return slices.ContainsFunc(r.Issues, func(i Issue) bool { return i.Regression })
}

// Report is the comparison of two runs.
type Report struct {
	// Rule is the latency rule the comparison used.
	Rule Rule
	// Rows has one entry per cell name in either run.
	Rows []Row
}

// Regressions counts the regressions over all rows.
func (r Report) Regressions() int {
	n := 0
	for _, row := range r.Rows {
		for _, i := range row.Issues {
			if i.Regression {
				n++
			}
		}
	}
	return n
}

// phases are the latencies compared, in table order.
var phases = [...]string{"attach", "detach"}

// Compare matches the cells of baseline a and candidate b by name. Rows come
// in a's order, then b's new cells in b's order.
func Compare(a, b []results.Result, rule Rule) Report {
	rep := Report{Rule: rule}
	byName := map[string]*results.Result{}
	for i := range b {
		byName[b[i].Cell] = &b[i]
	}
	seen := map[string]bool{}
	for i := range a {
		ra := &a[i]
		seen[ra.Cell] = true
		rep.Rows = append(rep.Rows, compareCell(ra, byName[ra.Cell], rule))
	}
	for i := range b {
		if !seen[b[i].Cell] {
			rep.Rows = append(rep.Rows, compareCell(nil, &b[i], rule))
		}
	}
	return rep
}

func compareCell(a, b *results.Result, rule Rule) Row {
	row := Row{}
	switch {
	case a == nil:
		row.Cell, row.B = b.Cell, b.Verdict
		row.Issues = append(row.Issues, Issue{Kind: KindAdded, Detail: "not in the baseline"})
	case b == nil:
		row.Cell, row.A = a.Cell, a.Verdict
		row.Issues = append(row.Issues, Issue{Kind: KindMissing, Detail: "not in the candidate run"})
		return row
	default:
		row.Cell, row.A, row.B = a.Cell, a.Verdict, b.Verdict
	}
	row.Issues = append(row.Issues, verdictIssues(a, b)...)
	row.Issues = append(row.Issues, newFindings(a, b)...)
	if a == nil {
		return row
	}
	for _, ph := range phases {
		lat, issue := compareLatency(ph, a, b, rule)
		row.Latencies = append(row.Latencies, lat)
		if issue != nil {
			row.Issues = append(row.Issues, *issue)
		}
	}
	row.Issues = append(row.Issues, compareOracles(a, b)...)
	row.Issues = append(row.Issues, compareBench(a, b, rule.Bench)...)
	return row
}

func verdictIssues(a, b *results.Result) []Issue {
	if b.Verdict == results.Fail && (a == nil || a.Verdict != results.Fail) {
		from := "no cell"
		if a != nil {
			from = string(a.Verdict)
		}
		return []Issue{{Kind: KindVerdict, Regression: true, Detail: fmt.Sprintf("%s→fail: %s", from, b.Title())}}
	}
	if a == nil {
		return nil
	}
	switch {
	case a.Verdict == results.Fail && b.Verdict == results.Pass:
		return []Issue{{Kind: KindFixed, Detail: "fail→pass: " + a.Title() + " gone"}}
	case a.Verdict != results.Error && b.Verdict == results.Error:
		return []Issue{{Kind: KindInfra, Detail: fmt.Sprintf("%s→error: %s", a.Verdict, b.Reason)}}
	}
	return nil
}

// newFindings lists B's finding titles that A's cell did not have, once each.
func newFindings(a, b *results.Result) []Issue {
	old := map[string]bool{}
	if a != nil {
		for _, f := range a.Findings {
			old[f.Title] = true
		}
	}
	var out []Issue
	for _, f := range b.Findings {
		if old[f.Title] {
			continue
		}
		old[f.Title] = true
		out = append(out, Issue{Kind: KindNewFinding, Regression: true, Detail: fmt.Sprintf("new finding: %s", f.Title)})
	}
	return out
}

func compareLatency(phase string, a, b *results.Result, rule Rule) (Latency, *Issue) {
	lat := Latency{Phase: phase}
	pa, pb := a.Phases[phase], b.Phases[phase]
	notComparable := func(why string) (Latency, *Issue) {
		return lat, &Issue{Kind: KindNotComparable, Detail: phase + ": " + why}
	}
	switch {
	case pa == nil && pb == nil:
		return lat, nil
	case pa == nil || pb == nil:
		// A phase that vanished goes with a verdict change, which says more.
		if b.Verdict != a.Verdict {
			return lat, nil
		}
		return notComparable("measured in one run only")
	case a.Accel != b.Accel:
		return notComparable(fmt.Sprintf("accelerators differ (%s vs %s)", a.Accel, b.Accel))
	case pa.Latency.Count < rule.MinSamples || pb.Latency.Count < rule.MinSamples:
		return notComparable(fmt.Sprintf("%d vs %d operations, need %d each", pa.Latency.Count, pb.Latency.Count, rule.MinSamples))
	}
	lat.A, lat.B, lat.Limit, lat.Compared = pa.Latency.Median.Std(), pb.Latency.Median.Std(), rule.Limit(pa.Latency), true
	if lat.B <= lat.Limit {
		return lat, nil
	}
	pct := 100 * (float64(lat.B) - float64(lat.A)) / float64(lat.A)
	return lat, &Issue{Kind: KindSlower, Regression: true, Detail: fmt.Sprintf("%s median %s→%s (+%.0f%%, limit %s)", phase, ms(lat.A), ms(lat.B), pct, ms(lat.Limit))}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

// WriteTable prints one line per cell and a footer with the rule and the
// count of regressions.
func (r Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CELL\tVERDICT A→B\tATTACH p50 A→B\tDETACH p50 A→B\tISSUES")
	cells := 0
	for _, row := range r.Rows {
		mark := ""
		if row.Regressed() {
			mark = "REGRESSION "
			cells++
		}
		var issues []string
		for _, i := range row.Issues {
			issues = append(issues, i.Detail)
		}
		fmt.Fprintf(tw, "%s\t%s→%s\t%s\t%s\t%s%s\n", row.Cell, orDash(string(row.A)), orDash(string(row.B)), latencyCell(row, "attach"), latencyCell(row, "detach"), mark, strings.Join(issues, "; "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d regressions in %d of %d cells. Latency rule: %s.\nBench rule: %s.\n", r.Regressions(), cells, len(r.Rows), r.Rule, r.Rule.Bench)
}

func latencyCell(row Row, phase string) string {
	for _, l := range row.Latencies {
		if l.Phase == phase && l.Compared {
			return fmt.Sprintf("%.1f→%.1f ms", float64(l.A)/1e6, float64(l.B)/1e6)
		}
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
