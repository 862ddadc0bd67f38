// Package latency summarises per-operation durations into the wire format's
// event.Latency.
package latency

import (
	"slices"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// Summarize returns the distribution of samples. Percentiles use the
// nearest-rank method (the smallest sample with at least p of the samples at
// or below it), so every reported value is a time that was actually measured:
// with a few thousand samples interpolation buys nothing and hides outliers.
// samples is not modified.
func Summarize(samples []time.Duration) event.Latency {
	if len(samples) == 0 {
		return event.Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	return event.Latency{
		Count:  len(s),
		Min:    event.Duration(s[0]),
		Median: event.Duration(rank(s, 50)),
		P90:    event.Duration(rank(s, 90)),
		P99:    event.Duration(rank(s, 99)),
		Max:    event.Duration(s[len(s)-1]),
	}
}

// rank returns the nearest-rank pct-th percentile of sorted, non-empty s.
func rank(s []time.Duration, pct int) time.Duration {
	// ceil(pct*n/100) in integers, then to a 0-based index.
	i := (pct*len(s)+99)/100 - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}
