package bench

import (
	"math"
	"testing"

	"github.com/ftrace-harness/fth/wire/event"
)

// within reports whether got is within the histogram's 3 significant digits
// of want.
func within(got, want float64) bool {
	return math.Abs(got-want) <= want*1e-3+1e-9
}

func TestSummarize(t *testing.T) {
	h := NewHistogram()
	// 1..1000 µs, one sample each: the percentiles are known.
	for us := int64(1); us <= 1000; us++ {
		if err := h.RecordValue(us * 1000); err != nil {
			t.Fatal(err)
		}
	}
	s := Summarize(h, 4)
	if s.Samples != 1000 || s.Overruns != 4 {
		t.Errorf("samples %d overruns %d, want 1000 and 4", s.Samples, s.Overruns)
	}
	for name, c := range map[string][2]float64{
		"min": {s.Min, 1}, "p50": {s.P50, 500}, "p90": {s.P90, 900}, "p99": {s.P99, 990}, "p99.9": {s.P999, 999}, "max": {s.Max, 1000},
	} {
		if !within(c[0], c[1]) {
			t.Errorf("%s = %v µs, want %v", name, c[0], c[1])
		}
	}
}

func TestSummarizeOutlier(t *testing.T) {
	h := NewHistogram()
	for range 9999 {
		_ = h.RecordValue(50_000) // 50 µs
	}
	_ = h.RecordValue(20_000_000) // one 20 ms wakeup
	s := Summarize(h, 0)
	if !within(s.P50, 50) || !within(s.P99, 50) || !within(s.P999, 50) {
		t.Errorf("one outlier in 10000 moved the percentiles: %+v", s)
	}
	if !within(s.Max, 20000) {
		t.Errorf("max = %v µs, want 20000", s.Max)
	}
	// An empty histogram summarises to zeros, not garbage.
	if e := Summarize(NewHistogram(), 0); e != (event.WakeupSummary{}) {
		t.Errorf("empty: %+v", e)
	}
}

func TestPercentileRatio(t *testing.T) {
	q := event.WakeupPercentiles{Min: 10, P50: 50, P90: 80, P99: 100, P999: 200, Max: 0}
	s := event.WakeupPercentiles{Min: 10, P50: 75, P90: 160, P99: 1000, P999: 300, Max: 900}
	want := event.WakeupPercentiles{Min: 1, P50: 1.5, P90: 2, P99: 10, P999: 1.5, Max: 0}
	if got := PercentileRatio(s, q); got != want {
		t.Errorf("PercentileRatio = %+v, want %+v", got, want)
	}
}
