package compare

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

func msd(v float64) event.Duration { return event.Duration(v * float64(time.Millisecond)) }

// lat builds a phase from the figures result.json records.
func lat(count int, median, p90 float64) *event.Phase {
	return &event.Phase{Latency: event.Latency{Count: count, Median: msd(median), P90: msd(p90)}}
}

// cell is a tcg-single x86_64 cell; the figures of the named runs below are
// the real ones from out/runs/tcg-modes-20261121-071934 (2,000 trampolines,
// seed 42, the same kernel and flags each time).
func cell(name string, v results.Verdict, attach, detach *event.Phase, titles ...string) results.Result {
	r := results.Result{Cell: name, Arch: "x86_64", Accel: "tcg-single", Verdict: v, Phases: map[string]*event.Phase{}}
	if attach != nil {
		r.Phases["attach"] = attach
	}
	if detach != nil {
		r.Phases["detach"] = detach
	}
	for _, t := range titles {
		r.Findings = append(r.Findings, results.Finding{Title: t})
	}
	return r
}

const x86 = "x86_64-direct-calls-full"

var (
	// Three identical tcg-single runs: the noise the rule must tolerate.
	single1 = cell(x86, results.Pass, lat(2000, 16.418928, 33.32284), lat(2000, 18.859393, 41.7973))
	single2 = cell(x86, results.Pass, lat(2000, 20.495706, 46.847523), lat(2000, 18.83345, 37.523509))
	single3 = cell(x86, results.Pass, lat(2000, 20.731115, 38.635916), lat(2000, 19.743206, 37.231138))
)

func TestCompare(t *testing.T) {
	withAccel := func(r results.Result, accel string) results.Result { r.Accel = accel; return r }
	tests := []struct {
		name        string
		a, b        []results.Result
		regressions int
		kinds       []Kind
	}{
		{name: "identical runs 1→2 are noise", a: []results.Result{single1}, b: []results.Result{single2}},
		{name: "identical runs 1→3 are noise", a: []results.Result{single1}, b: []results.Result{single3}},
		{name: "identical runs 2→1 are noise", a: []results.Result{single2}, b: []results.Result{single1}},
		{
			name:        "attach median 2.4× slower regresses",
			a:           []results.Result{single1},
			b:           []results.Result{cell(x86, results.Pass, lat(2000, 39.680892, 69.586155), lat(2000, 18.9, 40))},
			regressions: 1, kinds: []Kind{KindSlower},
		},
		{
			name: "just inside the 30% floor when the spread is narrow",
			a:    []results.Result{cell(x86, results.Pass, lat(2000, 10, 11), nil)},
			b:    []results.Result{cell(x86, results.Pass, lat(2000, 12.9, 14), nil)},
		},
		{
			name:        "just outside the 30% floor when the spread is narrow",
			a:           []results.Result{cell(x86, results.Pass, lat(2000, 10, 11), nil)},
			b:           []results.Result{cell(x86, results.Pass, lat(2000, 13.1, 14), nil)},
			regressions: 1, kinds: []Kind{KindSlower},
		},
		{
			name: "a wide baseline spread widens the band",
			a:    []results.Result{cell(x86, results.Pass, lat(2000, 10, 30), nil)},
			b:    []results.Result{cell(x86, results.Pass, lat(2000, 19.9, 35), nil)},
		},
		{
			name: "sub-millisecond jitter is under the floor",
			a:    []results.Result{cell(x86, results.Pass, lat(2000, 0.2, 0.25), nil)},
			b:    []results.Result{cell(x86, results.Pass, lat(2000, 0.6, 0.7), nil)},
		},
		{
			name:        "detach regresses on its own",
			a:           []results.Result{single1},
			b:           []results.Result{cell(x86, results.Pass, lat(2000, 16.5, 33), lat(2000, 60, 90))},
			regressions: 1, kinds: []Kind{KindSlower},
		},
		{
			name:  "too few operations are not compared",
			a:     []results.Result{cell(x86, results.Pass, lat(10, 1, 2), nil)},
			b:     []results.Result{cell(x86, results.Pass, lat(10, 50, 60), nil)},
			kinds: []Kind{KindNotComparable},
		},
		{
			name:  "different accelerators are not compared",
			a:     []results.Result{single1},
			b:     []results.Result{withAccel(cell(x86, results.Pass, lat(2000, 39.7, 69.6), lat(2000, 12.9, 20.1)), "tcg-multi")},
			kinds: []Kind{KindNotComparable, KindNotComparable},
		},
		{
			name:        "pass→fail with a new finding: the real tcg-multi oops",
			a:           []results.Result{single1},
			b:           []results.Result{cell(x86, results.Fail, lat(2000, 16.5, 33), nil, "Oops: int3 in up_read", "kernel panic: Fatal exception in interrupt")},
			regressions: 3, kinds: []Kind{KindVerdict, KindNewFinding, KindNewFinding},
		},
		{
			name: "same failure again is not new",
			a:    []results.Result{cell(x86, results.Fail, nil, nil, "Oops: int3 in up_read")},
			b:    []results.Result{cell(x86, results.Fail, nil, nil, "Oops: int3 in up_read", "Oops: int3 in up_read")},
		},
		{
			name:        "a second title in a failing cell is new",
			a:           []results.Result{cell(x86, results.Fail, nil, nil, "Oops: int3 in up_read")},
			b:           []results.Result{cell(x86, results.Fail, nil, nil, "Oops: int3 in up_read", "WARNING in ftrace_bug")},
			regressions: 1, kinds: []Kind{KindNewFinding},
		},
		{
			name:  "fail→pass is a note",
			a:     []results.Result{cell(x86, results.Fail, nil, nil, "Oops: int3 in up_read")},
			b:     []results.Result{single1},
			kinds: []Kind{KindFixed},
		},
		{
			name:  "pass→error is a note, not a kernel regression",
			a:     []results.Result{single1},
			b:     []results.Result{cell(x86, results.Error, nil, nil)},
			kinds: []Kind{KindInfra},
		},
		{
			name:        "hang without findings: error→fail regresses on the verdict",
			a:           []results.Result{cell(x86, results.Error, nil, nil)},
			b:           []results.Result{cell(x86, results.Fail, nil, nil)},
			regressions: 1, kinds: []Kind{KindVerdict},
		},
		{
			name:        "cells matched by name; gone and new cells are notes unless failing",
			a:           []results.Result{single1, cell("arm64-call-ops-full", results.Pass, nil, nil)},
			b:           []results.Result{single2, cell("riscv64-call-ops-full", results.Pass, nil, nil), cell("ppc64le-direct-calls-full", results.Fail, nil, nil, "BUG: soft lockup in ftrace_modify_all_code")},
			regressions: 2, kinds: []Kind{KindMissing, KindAdded, KindAdded, KindVerdict, KindNewFinding},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Compare(tt.a, tt.b, DefaultRule())
			var kinds []Kind
			for _, row := range rep.Rows {
				for _, i := range row.Issues {
					kinds = append(kinds, i.Kind)
				}
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			if rep.Regressions() != tt.regressions || !reflect.DeepEqual(kinds, tt.kinds) {
				t.Errorf("regressions %d, kinds %v; want %d, %v\n%s", rep.Regressions(), kinds, tt.regressions, tt.kinds, table.String())
			}
		})
	}
}

func TestLimit(t *testing.T) {
	r := DefaultRule()
	tests := []struct {
		median, p90, want float64
	}{
		{10, 11, 13},                      // 30% of the median
		{10, 30, 20},                      // half the p50→p90 spread
		{16.418928, 33.32284, 24.8708840}, // the real single-1 baseline
		{0.2, 0.25, 0.7},                  // the floor
	}
	for _, tt := range tests {
		got := float64(r.Limit(event.Latency{Median: msd(tt.median), P90: msd(tt.p90)})) / 1e6
		if d := got - tt.want; d > 1e-3 || d < -1e-3 {
			t.Errorf("Limit(p50 %v, p90 %v) = %.4f ms, want %.4f", tt.median, tt.p90, got, tt.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	rep := Compare([]results.Result{single1}, []results.Result{cell(x86, results.Fail, lat(2000, 39.680892, 69.586155), nil, "Oops: int3 in up_read")}, DefaultRule())
	var b bytes.Buffer
	rep.WriteTable(&b)
	for _, want := range []string{
		"CELL                      VERDICT A→B  ATTACH p50 A→B  DETACH p50 A→B  ISSUES\n",
		"x86_64-direct-calls-full  pass→fail    16.4→39.7 ms    -               REGRESSION pass→fail: Oops: int3 in up_read; new finding: Oops: int3 in up_read; attach median 16.4ms→39.7ms (+142%, limit 24.9ms)\n",
		"\n3 regressions in 1 of 1 cells. Latency rule: median slower by more than max(30% of baseline median, 0.5× baseline p50→p90 spread, 500µs), with at least 50 operations on each side.\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
