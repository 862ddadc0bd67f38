package oracle

import (
	"fmt"

	"github.com/ftrace-harness/fth/wire/event"
)

// Oracle names as they appear in Oracle events (wire/event owns them,
// so the host reads the same names the guest writes).
const (
	NameFuncIP      = event.OracleFuncIP
	NameCalibration = event.OracleCalibration
	NameExact       = event.OracleExact
)

// deltaStep and maxDelta bound a plausible calibration: bpf_get_func_ip may
// return the symbol address plus the size of whatever an architecture puts
// before the patched call (x86 ENDBR64 is 4 bytes, an arm64 BTI landing pad
// 4, a ppc64 global entry 8), always whole instructions.
const (
	deltaStep = 4
	maxDelta  = 16
)

// Delta returns observed - addr if it is a plausible offset: one of 0, 4,
// 8, 12, 16. Anything else means bpf_get_func_ip returned an address that
// is not this function's entry, which is itself a finding.
func Delta(addr, observed uint64) (int64, error) {
	d := int64(observed - addr)
	if d < 0 || d > maxDelta || d%deltaStep != 0 {
		return d, fmt.Errorf("bpf_get_func_ip returned %#x for a function at %#x: offset %d is not one of 0, 4, 8, 12, 16", observed, addr, d)
	}
	return d, nil
}

// CheckFuncIP compares two reads of a func-ip slot of kind on fn. Any new
// mismatch is a failure, reported with the last wrong address.
func CheckFuncIP(fn string, kind Kind, expected uint64, prev, cur Counters) event.Oracle {
	d := cur.Sub(prev)
	o := event.Oracle{Name: NameFuncIP, Function: fn, Expected: expected, OK: d.Bad == 0}
	if !o.OK {
		o.Got = cur.LastBad
		o.Msg = fmt.Sprintf("%s: %d of %d hits saw bpf_get_func_ip %#x, want %#x", kind, d.Bad, d.Hits, cur.LastBad, expected)
	}
	return o
}

// CheckExact compares the hits counted during an exact-count window with
// the calls made. A lost call (fewer hits) and a doubled one (more) are
// both failures; misses is the program's recursion-miss count, which tells
// a skipped run from a lost one.
func CheckExact(fn string, calls int, s Sample) event.Oracle {
	d := s.After.Sub(s.Before)
	o := event.Oracle{Name: NameExact, Function: fn, Expected: uint64(calls), Got: d.Hits, OK: d.Hits == uint64(calls)}
	if !o.OK {
		o.Msg = fmt.Sprintf("%d calls, %d hits (%+d); recursion misses %d", calls, d.Hits, int64(d.Hits)-int64(calls), s.RecursionMisses)
	}
	return o
}

// ExactSummary is an exact-count oracle's summary event, of windows
// windows of calls calls on fn: skipped when disabled (calls 0), or with
// whyNone when no window completed.
func ExactSummary(fn string, calls, windows, failures int, whyNone string) event.Oracle {
	o := event.Oracle{Name: NameExact, Function: fn, Expected: uint64(calls), Checks: windows, Failures: failures, OK: failures == 0}
	switch {
	case calls == 0:
		o.Skipped = "disabled (exactcalls=0)"
	case windows == 0:
		o.Skipped = whyNone
	}
	return o
}
