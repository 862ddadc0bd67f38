package churnrun

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/stress/churn"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/wire/event"
)

// exactStats counts the exact-count windows; its lock guards its fields.
type exactStats struct {
	mu       sync.Mutex
	windows  int
	failures int
	skipped  string // why the last window could not run
	fipOK    int
}

// skip records why a window could not run.
func (t *exactStats) skip(why string) {
	t.mu.Lock()
	t.skipped = why
	t.mu.Unlock()
}

// exactWindow counts one completed exact-count window, emits its result and
// fails the run on a wrong count.
func (r *run) exactWindow(t *exactStats, ex event.Oracle) {
	t.mu.Lock()
	t.windows++
	if !ex.OK {
		t.failures++
	}
	t.mu.Unlock()
	_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &ex})
	if !ex.OK {
		r.verdict.oracleFail(ex)
	}
}

// firstExact is the delay before the first exact-count window: long enough
// for the churn to be under way.
const firstExact = time.Second

// exactLoop runs an exact-count window every ExactEvery until ctx is done.
func (r *run) exactLoop(ctx context.Context, w oracle.Window, st *exactStats) {
	every := r.Opts.ExactEvery
	t := time.NewTimer(min(firstExact, every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ex, s, err := w.Exact(ctx, r.Opts.ExactCalls)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			st.skip(err.Error())
			emit.Logf(r.W, "churn: exact-count window: %v", err)
			t.Reset(every)
			continue
		}
		r.exactWindow(st, ex)
		if exp, ok := w.Loader.Expected(w.Func); ok && w.Loader.Checking() {
			fip := oracle.CheckFuncIP(w.Func, oracle.FEntry, exp, s.Before, s.After)
			if fip.OK {
				st.mu.Lock()
				st.fipOK++
				st.mu.Unlock()
			} else {
				_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &fip})
				r.verdict.oracleFail(fip)
			}
		}
		t.Reset(every)
	}
}

// emitOracleSummaries emits one summary Oracle event per oracle.
func (r *run) emitOracleSummaries(l *oracle.Loader, res churn.Result, ex *exactStats, exactFn string, calls int) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	fip := event.Oracle{Name: oracle.NameFuncIP, Checks: res.Checks + ex.fipOK, Failures: len(res.Failures), Delta: l.Delta()}
	fip.OK = fip.Failures == 0
	if !l.Checking() {
		fip.Skipped = "not calibrated"
	}
	_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &fip})

	why := "no window completed: " + ex.skipped
	if exactFn == "" {
		why = fmt.Sprintf("no traceable entry function for %s", ExactSyscall)
	}
	exs := oracle.ExactSummary(exactFn, calls, ex.windows, ex.failures, why)
	_ = r.W.Emit(event.Event{Kind: event.KindOracle, Oracle: &exs})
}
