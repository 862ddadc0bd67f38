package compare

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// loadBench reads a real bench section from testdata: bench-full1 and
// bench-quick2 are two tcg-single runs of one kernel by the current agent,
// bench-quick1 an older agent's whose storm hammer throttled the measured
// thread (see BenchRule).
func loadBench(t *testing.T, name string) *event.Bench {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var bench event.Bench
	if err := json.Unmarshal(b, &bench); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &bench
}

// benchCell is a passing tcg-single bench cell.
func benchCell(b *event.Bench) results.Result {
	return results.Result{Cell: "x86_64-bench", Arch: "x86_64", Accel: "tcg-single", Scenario: "bench", Verdict: results.Pass, Bench: b}
}

// churnCell is a churn cell with the oracles of the real churn-safe run,
// all passing.
func churnCell(v results.Verdict, extra ...event.Oracle) results.Result {
	os := []event.Oracle{
		{Name: event.OracleCalibration, Function: "__do_sys_getppid", Expected: 0xffffffff810796c0, Got: 0xffffffff810796c0, OK: true, Checks: 1},
		{Name: event.OracleFuncIP, OK: true, Checks: 55},
		{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, OK: true, Checks: 10},
		{Name: event.OracleExact, Function: "fth_target_counted", Expected: 1000, OK: true, Checks: 7},
	}
	return results.Result{Cell: "x86_64-churn", Arch: "x86_64", Accel: "tcg-single", Scenario: "churn", Verdict: v, Oracles: append(os, extra...)}
}

// plant returns a copy of the real full1 bench with fn applied.
func plant(t *testing.T, fn func(b *event.Bench)) *event.Bench {
	t.Helper()
	b := loadBench(t, "bench-full1")
	fn(b)
	return b
}

func TestCompareBenchAndOracles(t *testing.T) {
	full1, quick2, quick1 := loadBench(t, "bench-full1"), loadBench(t, "bench-quick2"), loadBench(t, "bench-quick1")
	onAccel := func(r results.Result, accel string) results.Result { r.Accel = accel; return r }
	tests := []struct {
		name        string
		a, b        results.Result
		regressions int
		kinds       []Kind
		detail      string
	}{
		// The noise every rule must tolerate: two real runs, both ways.
		{name: "real runs full1→quick2 are noise", a: benchCell(full1), b: benchCell(quick2)},
		{name: "real runs quick2→full1 are noise", a: benchCell(quick2), b: benchCell(full1)},
		{name: "a run against itself", a: benchCell(full1), b: benchCell(full1)},
		{
			name: "real: the throttled storm of the older agent regresses the wakeup p99",
			a:    benchCell(quick2), b: benchCell(quick1),
			regressions: 1, kinds: []Kind{KindWakeup}, detail: "wakeup storm p99 8511 µs→19562 µs (2.3×, limit 18137 µs)",
		},
		{
			name: "planted: irrelevant ops three times as dear",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				p := &b.Ops.Points[4] // 1 relevant + 100 irrelevant: 3.19×, best 3.67×
				p.Ratio, p.BestRatio = 9.6, 11.0
			})),
			regressions: 1, kinds: []Kind{KindBenchRatio}, detail: "ftrace-ops 1 relevant + 100 irrelevant ratio 3.19–3.67×→9.60–11.00× (limit 6.27×)",
		},
		{
			name: "planted: ops ratio inside A's own run-to-run range",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				p := &b.Ops.Points[4]
				p.Ratio, p.BestRatio = 6.2, 6.2 // above +25%, below A's range of 2.59
			})),
		},
		{
			name: "planted: fentry on the syscall twice as dear",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				s := &b.Syscall.States[1] // fentry: 1.55×, best 1.75×
				s.Ratio, s.BestRatio = 3.1, 3.5
			})),
			regressions: 1, kinds: []Kind{KindBenchRatio}, detail: "syscall fentry ratio 1.55–1.75×→3.10–3.50× (limit 2.18×)",
		},
		{
			name: "planted: syscall ratio just inside 25%",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				s := &b.Syscall.States[5] // kprobe: 3.85×, best 4.10×: limit 5.13×
				s.Ratio, s.BestRatio = 5.1, 5.6
			})),
		},
		{
			name: "planted: a drifting baseline_end is a control, not judged",
			a:    benchCell(full1),
			b:    benchCell(plant(t, func(b *event.Bench) { b.Syscall.States[7].Ratio, b.Syscall.States[7].BestRatio = 3, 3 })),
		},
		{
			name: "planted: attach at N=5000 superlinear",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				b.Scaling.Points[4].AttachSeconds = 130 // 79.9 s
			})),
			regressions: 1, kinds: []Kind{KindScaling}, detail: "scaling N=5000 attach 79.90 s→130.00 s (+63%, limit 119.85 s)",
		},
		{
			name: "planted: attach at N=5000 slower by 45% is noise",
			a:    benchCell(full1),
			b:    benchCell(plant(t, func(b *event.Bench) { b.Scaling.Points[4].AttachSeconds = 115.8 })),
		},
		{
			name: "planted: detach at N=100 doubles, under the floor",
			a:    benchCell(plant(t, func(b *event.Bench) { b.Scaling.Points[0].DetachSeconds = 0.1 })),
			b:    benchCell(plant(t, func(b *event.Bench) { b.Scaling.Points[0].DetachSeconds = 0.2 })),
		},
		{
			name:  "planted: failed attaches make a point not comparable",
			a:     benchCell(full1),
			b:     benchCell(plant(t, func(b *event.Bench) { b.Scaling.Points[5].Attached = 9000; b.Scaling.Points[5].AttachSeconds = 900 })),
			kinds: []Kind{KindNotComparable},
		},
		{
			name: "planted: storm wakeup p99 three times longer",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				b.Wakeup.Storm.P99, b.Wakeup.Storm.P999 = 25800, 40000 // 8593 µs, p99.9 20316 µs
			})),
			regressions: 1, kinds: []Kind{KindWakeup}, detail: "wakeup storm p99 8593 µs→25800 µs (3.0×, limit 20316 µs)",
		},
		{
			name:  "planted: a storm that attached nothing is not compared",
			a:     benchCell(full1),
			b:     benchCell(plant(t, func(b *event.Bench) { b.Wakeup.StormAttaches = 0; b.Wakeup.Storm.P99 = 30000 })),
			kinds: []Kind{KindNotComparable},
		},
		{
			name:  "different accelerators: not compared at all",
			a:     benchCell(full1),
			b:     onAccel(benchCell(plant(t, func(b *event.Bench) { b.Scaling.Points[4].AttachSeconds = 400 })), "tcg-multi"),
			kinds: []Kind{KindNotComparable},
		},
		{
			name: "a part that ran in A only is a note",
			a:    benchCell(full1),
			b: benchCell(plant(t, func(b *event.Bench) {
				*b.Multi = event.BenchMulti{}
				*b.Scaling = event.BenchScaling{Skipped: "not requested"}
			})),
			kinds: []Kind{KindNotComparable},
		},
		// Oracles, from the shapes of the real sabotage runs.
		{name: "oracles passing on both sides", a: churnCell(results.Pass), b: churnCell(results.Pass)},
		{
			name: "planted: exact-count passed, now fails",
			a:    churnCell(results.Pass),
			b: func() results.Result {
				r := churnCell(results.Fail)
				r.Oracles[3] = event.Oracle{Name: event.OracleExact, Function: "fth_target_counted", Expected: 1000, Checks: 7, Failures: 1}
				return r
			}(),
			regressions: 2, kinds: []Kind{KindVerdict, KindOracle}, detail: "oracle exact-count on fth_target_counted passed (7 checks), now fails: 1 of 7 checks failed",
		},
		{
			name: "planted: func-ip fails in a guest that died before its summaries",
			a:    churnCell(results.Fail),
			b: results.Result{Cell: "x86_64-churn", Accel: "tcg-multi", Verdict: results.Fail, Oracles: []event.Oracle{
				{Name: event.OracleFuncIP, Function: "__task_pid_nr_ns", Expected: 0xffffffff81085990, Got: 0xffffffff81085950, Msg: "fentry: 7047 of 7047 hits saw bpf_get_func_ip 0xffffffff81085950, want 0xffffffff81085990"},
			}},
			regressions: 1, kinds: []Kind{KindOracle}, detail: "oracle func-ip passed (55 checks), now fails: on __task_pid_nr_ns: fentry: 7047 of 7047 hits",
		},
		{
			name: "an oracle skipped in B is not a failure",
			a:    churnCell(results.Pass),
			b: func() results.Result {
				r := churnCell(results.Pass)
				r.Oracles[1] = event.Oracle{Name: event.OracleFuncIP, Skipped: "not calibrated"}
				return r
			}(),
		},
		{
			name:  "an oracle whose checks already failed in A is not new, whatever A's summary says",
			a:     churnCell(results.Fail, event.Oracle{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Got: 999}),
			b:     churnCell(results.Fail, event.Oracle{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Got: 998}),
			kinds: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Compare([]results.Result{tt.a}, []results.Result{tt.b}, DefaultRule())
			var kinds []Kind
			var details []string
			for _, row := range rep.Rows {
				for _, i := range row.Issues {
					kinds = append(kinds, i.Kind)
					details = append(details, i.Detail)
				}
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			if rep.Regressions() != tt.regressions || !reflect.DeepEqual(kinds, tt.kinds) {
				t.Errorf("regressions %d, kinds %v; want %d, %v\n%s", rep.Regressions(), kinds, tt.regressions, tt.kinds, table.String())
			}
			if tt.detail != "" && !strings.Contains(strings.Join(details, "\n"), tt.detail) {
				t.Errorf("no issue says %q:\n%s", tt.detail, strings.Join(details, "\n"))
			}
		})
	}
}

func TestBenchRuleString(t *testing.T) {
	want := "bench ratio up by more than max(25%, 0.3, A's run-to-run range) between the runs' median/fastest brackets; scaling seconds at one N up by more than max(50%, 0.25 s); storm wakeup p99 above 2× A's and above A's p99.9, with 1000 wakeups each"
	if got := DefaultBenchRule().String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}
