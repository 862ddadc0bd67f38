package report

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// churnView is what the churn scenario records besides phases: its
// transitions, oracles, the kernel facilities it probed, preemption-model
// switching and the hot functions it drove.
type churnView struct {
	Transitions []transitionRow
	Oracles     []oracleRow
	// FailedChecks are the single failed oracle checks result.json kept
	// (up to results.MaxOracleFailures).
	FailedChecks []checkRow
	Features     []featureRow
	Preempt      []fact
	HotSet       []hotRow
	Exact        string
	Delivery     *deliveryView
}

// deliveryView is the delivery oracle's coverage: its users and every
// state change the callsite went through, the ones it never made (N 0)
// included.
type deliveryView struct {
	Steps   int
	Checked uint64
	Users   []event.DeliveryUser
	Edges   []edgeRow
}

type edgeRow struct {
	K string
	N int
}

func buildDelivery(d *event.Delivery) *deliveryView {
	if d == nil {
		return nil
	}
	v := &deliveryView{Steps: d.Steps, Checked: d.Checked, Users: d.Users}
	seen := map[string]bool{}
	for _, e := range event.DeliveryEdges() {
		v.Edges = append(v.Edges, edgeRow{e, d.Edges[e]})
		seen[e] = true
	}
	for _, e := range slices.Sorted(maps.Keys(d.Edges)) {
		if !seen[e] {
			v.Edges = append(v.Edges, edgeRow{e, d.Edges[e]})
		}
	}
	return v
}

type transitionRow struct {
	Name                         string
	Attempted, Succeeded, Failed int
	Median, P99, Errnos          string
}

type oracleRow struct {
	Name, Function, Checks, Failures, Result, Detail string
	// Bad marks a failed oracle.
	Bad bool
}

type checkRow struct {
	Name, Function, Expected, Got, Msg string
}

type featureRow struct {
	Name, Supported, Detail string
	OK                      bool
}

type hotRow struct {
	Function string
	Syscall  bool
}

// empty reports whether a cell has none of the churn's records.
func (v *churnView) empty() bool {
	return len(v.Transitions) == 0 && len(v.Oracles) == 0 && len(v.FailedChecks) == 0 &&
		len(v.Features) == 0 && len(v.Preempt) == 0 && len(v.HotSet) == 0 && v.Exact == "" && v.Delivery == nil
}

// buildChurn gathers the churn records of r; nil when it has none.
func buildChurn(r results.Result) *churnView {
	v := &churnView{
		Transitions: transitionRows(r.Transitions),
		Features:    featureRows(r.Features),
		Preempt:     preemptFacts(r.Preempt),
		Delivery:    buildDelivery(r.Delivery),
	}
	v.Oracles, v.FailedChecks = oracleRows(r.Oracles)
	if h := r.HotSet; h != nil {
		for _, f := range h.Functions {
			v.HotSet = append(v.HotSet, hotRow{Function: f, Syscall: slices.Contains(h.SyscallPath, f)})
		}
		v.Exact = h.Exact
	}
	if v.empty() {
		return nil
	}
	return v
}

func transitionRows(ts map[string]*event.Phase) []transitionRow {
	var out []transitionRow
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		if t == nil {
			continue
		}
		out = append(out, transitionRow{Name: name, Attempted: t.Attempted, Succeeded: t.Succeeded, Failed: t.Failed,
			Median: msText(t.Latency.Median), P99: msText(t.Latency.P99), Errnos: countsText(t.Errnos)})
	}
	return out
}

// isSummary tells an oracle's summary from one of its single checks, the
// way results.AddOracle keeps them: a summary has no function, or counts
// checks, or says why the oracle was skipped.
func isSummary(o event.Oracle) bool {
	return o.Function == "" || o.Checks > 0 || o.Skipped != ""
}

func oracleRows(os []event.Oracle) ([]oracleRow, []checkRow) {
	var sums []oracleRow
	var checks []checkRow
	for _, o := range os {
		if !isSummary(o) {
			checks = append(checks, checkRow{Name: string(o.Name), Function: o.Function, Expected: oracleValue(o, o.Expected), Got: oracleValue(o, o.Got), Msg: o.Msg})
			continue
		}
		row := oracleRow{Name: string(o.Name), Function: o.Function, Checks: fmt.Sprint(o.Checks), Failures: fmt.Sprint(o.Failures), Detail: o.Msg}
		switch {
		case o.Skipped != "":
			row.Result = "skipped: " + o.Skipped
		case o.OK:
			row.Result = "ok"
		default:
			row.Result, row.Bad = "FAILED", true
		}
		if o.Name == event.OracleExact && o.Expected > 0 {
			row.Detail = joinNonEmpty("; ", fmt.Sprintf("%d calls per window", o.Expected), row.Detail)
		}
		sums = append(sums, row)
	}
	return sums, checks
}

// oracleValue prints what an oracle compares: a count for exact-count, an
// address (as kallsyms prints it) for the func-ip oracles.
func oracleValue(o event.Oracle, v uint64) string {
	if o.Name == event.OracleExact {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%#x", v)
}

func featureRows(fs []event.Feature) []featureRow {
	var out []featureRow
	for _, f := range fs {
		out = append(out, featureRow{Name: f.Name, Supported: yesNo(f.Supported), OK: f.Supported, Detail: joinNonEmpty(": ", f.Errno, f.Msg)})
	}
	return out
}

func preemptFacts(p *event.Preempt) []fact {
	if p == nil {
		return nil
	}
	var out []fact
	add := func(k, v string) {
		if v != "" {
			out = append(out, fact{k, v})
		}
	}
	add("skipped", p.Skipped)
	add("offered", strings.Join(p.Offered, " "))
	add("initial", p.Initial)
	add("accepted", strings.Join(p.Accepted, " "))
	var rejected []string
	for _, m := range slices.Sorted(maps.Keys(p.Rejected)) {
		rejected = append(rejected, m+" ("+p.Rejected[m]+")")
	}
	add("rejected", strings.Join(rejected, " "))
	if p.Skipped == "" {
		add("switches", fmt.Sprint(p.Switches))
	}
	add("failed switches", countsText(p.Errnos))
	return out
}

// boardView is the SSH board a soak ran on.
type boardView struct {
	Facts      []fact
	Reconnects []reconnectRow
	// Pstore links the pstore records saved after reboots.
	Pstore []fact
}

type reconnectRow struct {
	At, Rebooted, Back, Tries, Waited, Err string
}

// buildBoard describes r.Board; cellDir prefixes the pstore files'
// links, which result.json records relative to the cell directory.
func buildBoard(b *results.Board, cellDir string) *boardView {
	if b == nil {
		return nil
	}
	v := &boardView{}
	add := func(k, s string) {
		if s != "" {
			v.Facts = append(v.Facts, fact{k, s})
		}
	}
	add("target", b.Target)
	add("uname", b.Uname)
	add("release", b.Release)
	add("kernel config", b.Config)
	add("boot ids", strings.Join(b.BootIDs, " → "))
	if n := len(b.BootIDs) - 1; n > 0 {
		add("reboots", fmt.Sprintf("%d during the soak", n))
	}
	var deploys []string
	for _, s := range b.DeploySeconds {
		deploys = append(deploys, fmt.Sprintf("%.1f s", s))
	}
	add("deploys", strings.Join(deploys, ", "))
	for _, rc := range b.Reconnects {
		v.Reconnects = append(v.Reconnects, reconnectRow{
			At: fmt.Sprintf("%.1f s", rc.At), Rebooted: yesNo(rc.Rebooted), Back: yesNo(rc.Back),
			Tries: fmt.Sprint(rc.Tries), Waited: fmt.Sprintf("%.1f s", rc.Waited), Err: rc.Err,
		})
	}
	for _, p := range b.Pstore {
		v.Pstore = append(v.Pstore, fact{p, filepath.ToSlash(filepath.Join(cellDir, p))})
	}
	return v
}
