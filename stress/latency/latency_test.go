package latency

import (
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func d(x int) event.Duration { return event.Duration(time.Duration(x) * time.Millisecond) }

func TestSummarize(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: Summarize must sort
	}
	tests := []struct {
		name string
		in   []time.Duration
		want event.Latency
	}{
		{"empty", nil, event.Latency{}},
		{"one", ms(7), event.Latency{Count: 1, Min: d(7), Median: d(7), P90: d(7), P99: d(7), Max: d(7)}},
		{"two", ms(9, 1), event.Latency{Count: 2, Min: d(1), Median: d(1), P90: d(9), P99: d(9), Max: d(9)}},
		{"ten", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), event.Latency{Count: 10, Min: d(1), Median: d(5), P90: d(9), P99: d(10), Max: d(10)}},
		{"hundred", ms(hundred...), event.Latency{Count: 100, Min: d(1), Median: d(50), P90: d(90), P99: d(99), Max: d(100)}},
		{"outlier", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 1000), event.Latency{Count: 10, Min: d(1), Median: d(1), P90: d(1), P99: d(1000), Max: d(1000)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var orig []time.Duration
			orig = append(orig, tt.in...)
			got := Summarize(tt.in)
			if got != tt.want {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
			for i := range orig {
				if orig[i] != tt.in[i] {
					t.Fatalf("Summarize modified its input")
				}
			}
		})
	}
}
