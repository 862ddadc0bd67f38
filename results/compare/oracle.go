package compare

import (
	"fmt"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// KindOracle is a churn oracle that passed in A and fails in B: the
// kernel now gets something wrong it used to get right.
const KindOracle Kind = "oracle"

// isSummary tells an oracle's summary from a single check, the way
// results.AddOracle keeps them.
func isSummary(o event.Oracle) bool {
	return o.Function == "" || o.Checks > 0 || o.Skipped != ""
}

// compareOracles flags every oracle that passed in A (its summary is OK
// and A kept no failed check of it) and fails in B. An oracle fails in B when its summary says so or, for a guest that
// died before writing summaries, when B kept a failed check of it on the
// same function (any function, for an oracle whose summary covers all,
// like func-ip). Accelerators do not matter here: a wrong answer is wrong
// however slowly it came.
func compareOracles(a, b *results.Result) []Issue {
	var out []Issue
	seen := map[string]bool{}
	for _, oa := range a.Oracles {
		if !isSummary(oa) || !oa.OK || oa.Skipped != "" {
			continue
		}
		key := string(oa.Name) + "\x00" + oa.Function
		if seen[key] {
			continue
		}
		seen[key] = true
		// A summary cannot outvote A's own failed checks: then it did
		// not pass in A.
		if _, failedInA := oracleFails(oa, a.Oracles); failedInA {
			continue
		}
		if why, failed := oracleFails(oa, b.Oracles); failed {
			out = append(out, Issue{Kind: KindOracle, Regression: true, Detail: fmt.Sprintf("oracle %s passed (%d checks), now fails: %s", oracleName(oa), oa.Checks, why)})
		}
	}
	return out
}

// oracleFails looks in bs for a failure of the oracle summarised by a.
func oracleFails(a event.Oracle, bs []event.Oracle) (string, bool) {
	for _, o := range bs {
		if o.Name != a.Name || o.OK || o.Skipped != "" {
			continue
		}
		switch {
		case isSummary(o) && o.Function == a.Function:
			return fmt.Sprintf("%d of %d checks failed", o.Failures, o.Checks), true
		case !isSummary(o) && (a.Function == "" || o.Function == a.Function):
			return fmt.Sprintf("on %s: %s", o.Function, orText(o.Msg, checkValues(o))), true
		}
	}
	return "", false
}

func oracleName(o event.Oracle) string {
	if o.Function == "" {
		return string(o.Name)
	}
	return string(o.Name) + " on " + o.Function
}

// checkValues says what a check without a message compared: counts for
// exact-count, addresses (in hex, as kallsyms prints them) for func-ip.
func checkValues(o event.Oracle) string {
	if o.Name == event.OracleExact {
		return fmt.Sprintf("expected %d hits, got %d", o.Expected, o.Got)
	}
	return fmt.Sprintf("expected %#x, got %#x", o.Expected, o.Got)
}
