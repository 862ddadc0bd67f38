package churnrun

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ftrace-harness/fth/wire/event"
)

// maxReasons bounds how many oracle failures Done.Reason lists.
const maxReasons = 5

// Result is what makes a churn run not ok: nothing in a clean run.
type Result struct {
	// Oracle are the failed oracle checks in the order they came, each
	// naming the oracle and function.
	Oracle []string
	// Other are the other reasons: a churn that never attached, a module
	// that would not load or unload.
	Other []string
}

// Reasons returns the Done.Reason parts: the oracle failures, the first
// few named, then the other reasons.
func (r Result) Reasons() []string {
	var out []string
	if len(r.Oracle) > 0 {
		out = append(out, oracleReason(r.Oracle))
	}
	return append(out, r.Other...)
}

// verdict collects a Result. Oracle failures arrive from concurrent
// goroutines, hence the lock.
type verdict struct {
	mu  sync.Mutex
	res Result
}

// oracleFail records a failed oracle check for the verdict, naming the
// oracle and function.
func (v *verdict) oracleFail(o event.Oracle) {
	msg := fmt.Sprintf("%s %s", o.Name, o.Function)
	if o.Msg != "" {
		msg += ": " + o.Msg
	} else {
		msg += fmt.Sprintf(": expected %d, got %d", o.Expected, o.Got)
	}
	v.mu.Lock()
	v.res.Oracle = append(v.res.Oracle, msg)
	v.mu.Unlock()
}

// other records a reason that is not an oracle's.
func (v *verdict) other(msg string) {
	v.mu.Lock()
	v.res.Other = append(v.res.Other, msg)
	v.mu.Unlock()
}

// result is a copy of what the verdict holds.
func (v *verdict) result() Result {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Result{Oracle: slices.Clone(v.res.Oracle), Other: slices.Clone(v.res.Other)}
}

// oracleReason summarises oracle failures for Done.Reason, naming the
// first few.
func oracleReason(fails []string) string {
	shown := fails[:min(len(fails), maxReasons)]
	s := fmt.Sprintf("%d oracle failure(s): %s", len(fails), strings.Join(shown, "; "))
	if len(fails) > len(shown) {
		s += fmt.Sprintf("; and %d more", len(fails)-len(shown))
	}
	return s
}
