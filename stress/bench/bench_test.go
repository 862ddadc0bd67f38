package bench

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestRatio(t *testing.T) {
	for _, tt := range []struct {
		x, base, want float64
	}{
		{30, 15, 2},
		{15, 15, 1},
		{10, 30, 0.333},
		{20.0005, 10, 2},
		{5, 0, 0},  // no baseline: no ratio, not +Inf
		{5, -1, 0}, // nor a negative one
		{-1, 5, 0},
		{0, 5, 0},
	} {
		if got := Ratio(tt.x, tt.base); got != tt.want {
			t.Errorf("Ratio(%v, %v) = %v, want %v", tt.x, tt.base, got, tt.want)
		}
	}
}

func TestPerOpRatio(t *testing.T) {
	for _, tt := range []struct {
		total  float64
		n      int
		total0 float64
		n0     int
		want   float64
	}{
		{1.0, 100, 1.0, 100, 1},
		{10.0, 1000, 1.0, 100, 1}, // linear
		{40.0, 2000, 1.0, 100, 2}, // twice the cost per trampoline
		{2.5, 500, 1.0, 100, 0.5}, // cheaper per trampoline
		{1.0, 0, 1.0, 100, 0},     // nothing attempted
		{1.0, 100, 0.0, 100, 0},   // no first point
	} {
		if got := PerOpRatio(tt.total, tt.n, tt.total0, tt.n0); got != tt.want {
			t.Errorf("PerOpRatio(%v, %d, %v, %d) = %v, want %v", tt.total, tt.n, tt.total0, tt.n0, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{9, 1, 1, 1, 100}, 1},
	} {
		in := slices.Clone(tt.in)
		if got := median(in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("median modified its input: %v", in)
		}
	}
}

func TestCapCounts(t *testing.T) {
	for _, tt := range []struct {
		in    []int
		limit int
		want  []int
	}{
		{[]int{100, 500, 1000}, 5000, []int{100, 500, 1000}},
		{[]int{100, 500, 1000, 2000, 5000, 10000}, 1500, []int{100, 500, 1000, 1500}},
		{[]int{100}, 0, nil},
		{[]int{500, 100, 500}, 1000, []int{500, 100}},
	} {
		if got := capCounts(tt.in, tt.limit); !slices.Equal(got, tt.want) {
			t.Errorf("capCounts(%v, %d) = %v, want %v", tt.in, tt.limit, got, tt.want)
		}
	}
}

func TestShuffled(t *testing.T) {
	cands := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	x, y := shuffled(cands, 7), shuffled(cands, 7)
	if !slices.Equal(x, y) {
		t.Errorf("same seed, different orders: %v, %v", x, y)
	}
	if slices.Equal(x, cands) && slices.Equal(shuffled(cands, 8), cands) {
		t.Error("two seeds left the order alone")
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if !slices.Equal(s, cands) {
		t.Errorf("shuffle lost or invented names: %v", x)
	}
	if cands[0] != "a" {
		t.Error("shuffled modified its input")
	}
}

type recorder struct{ evs []event.Event }

func (r *recorder) Emit(e event.Event) error { r.evs = append(r.evs, e); return nil }

func TestNoPhases(t *testing.T) {
	var rec recorder
	e := noPhases{&rec}
	for _, k := range []event.Kind{event.KindOp, event.KindPhase, event.KindProgress, event.KindFailure} {
		_ = e.Emit(event.Event{Kind: k})
	}
	var kinds []event.Kind
	for _, ev := range rec.evs {
		kinds = append(kinds, ev.Kind)
	}
	if want := []event.Kind{event.KindOp, event.KindProgress, event.KindFailure}; !slices.Equal(kinds, want) {
		t.Errorf("passed %v, want %v", kinds, want)
	}
}

// TestBenchEventRoundTrip checks that a bench event survives the wire and
// lands in result.json through results.Apply.
func TestBenchEventRoundTrip(t *testing.T) {
	b := event.Bench{
		CPU: 1,
		Ops: &event.BenchOps{Supported: true, Module: DefaultOpsModule, Calls: 100000, Runs: 3,
			Baseline: &event.BenchOpsPoint{NsPerCall: 15.2, RunsNs: []float64{15.2, 15.3, 15.1}},
			Points:   []event.BenchOpsPoint{{Relevant: 1, NsPerCall: 30.4, Ratio: 2, Tracee: "tracee_relevant [ftrace_ops]"}}},
		Syscall: &event.BenchSyscall{Supported: true, Syscall: "getppid", Function: "__x64_sys_getppid",
			States: []event.BenchSyscallState{{Name: StateBaseline, NsPerCall: 500, Ratio: 1}, {Name: StateBPFKprobe, Skipped: "no"}}},
		Scaling: &event.BenchScaling{Supported: true, Candidates: 17000, Points: []event.BenchScalingPoint{{N: 100, Attached: 100, AttachSeconds: 1.5,
			Attach: event.Latency{Count: 100, Median: event.Duration(15 * time.Millisecond)}, AttachRatio: 1, Errnos: map[string]int{"attach:EBUSY": 1}}}},
		Multi: &event.BenchMulti{Supported: true, KprobeMulti: event.BenchMultiLink{Skipped: "CONFIG_FPROBE is off"},
			TracingMulti: event.BenchMultiLink{Supported: true, Points: []event.BenchMultiPoint{{N: 100, AttachSeconds: 0.2, AttachRatio: 0.133}}}},
		Wakeup: &event.BenchWakeup{Supported: true, Period: event.Duration(time.Millisecond), For: event.Duration(10 * time.Second), Priority: 90,
			Quiet: &event.WakeupSummary{Samples: 10000, WakeupPercentiles: event.WakeupPercentiles{P50: 50, P99: 120}},
			Storm: &event.WakeupSummary{Samples: 9990, Overruns: 3, WakeupPercentiles: event.WakeupPercentiles{P50: 60, P99: 900}},
			Ratio: &event.WakeupPercentiles{P50: 1.2, P99: 7.5}},
	}
	line, err := json.Marshal(event.Event{Kind: event.KindBench, Bench: &b})
	if err != nil {
		t.Fatal(err)
	}
	var ev event.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatal(err)
	}
	var r results.Result
	results.Apply(&r, ev)
	if r.Bench == nil || !reflect.DeepEqual(*r.Bench, b) {
		t.Errorf("after the wire and Apply: %+v\nwant %+v", r.Bench, b)
	}
}

func TestRunNothingRequested(t *testing.T) {
	var rec recorder
	b, err := Run(context.Background(), Config{Emit: &rec, Cache: btf.NewCache()})
	if err != nil {
		t.Fatal(err)
	}
	// Every part is present and says why it has no numbers.
	for name, skipped := range map[string]string{
		"ops": b.Ops.Skipped, "syscall": b.Syscall.Skipped, "scaling": b.Scaling.Skipped, "multi": b.Multi.Skipped, "wakeup": b.Wakeup.Skipped,
	} {
		if skipped != NotRequested {
			t.Errorf("%s: skipped = %q, want %q", name, skipped, NotRequested)
		}
	}
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Error("Run without Emit and Cache: no error")
	}
}

func TestGrowthExponent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ns   []int
		secs []float64
		want float64
	}{
		{"linear", []int{100, 1000, 10000}, []float64{1, 10, 100}, 1},
		{"quadratic", []int{100, 1000}, []float64{0.5, 50}, 2},
		{"riscv64's kprobe_multi", []int{100, 1000}, []float64{0.58, 67}, 2.063},
		{"one point", []int{100}, []float64{1}, 0},
		{"zeros skipped", []int{0, 100, 200}, []float64{5, 0, 2}, 0},
		{"same N", []int{100, 100}, []float64{1, 2}, 0},
	} {
		if got := growthExponent(tc.ns, tc.secs); got != tc.want {
			t.Errorf("%s: growthExponent = %v, want %v", tc.name, got, tc.want)
		}
	}
}
