package main

import (
	"testing"

	"github.com/ftrace-harness/fth/results/event"
)

func TestJudgeInjection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      event.Injection
		stopped bool
		want    string
	}{
		{"held the whole window", event.Injection{HeldMS: 2989, SpunMS: 2927}, true, event.InjSurvived},
		// Measured before the preemptor's threads were pinned: the racer's
		// call returned in 110 ms while the preemptor "spun" 1.2 s.
		{"ran on beside the preemptor", event.Injection{HeldMS: 110, SpunMS: 1200, FreedInWindow: true}, true, event.InjNotPreempted},
		{"freed while held", event.Injection{HeldMS: 1247, SpunMS: 1200, FreedInWindow: true}, true, event.InjFreedUnderTask},
		// riscv64 7.3 before the action ran beside the window: the check
		// ended after the preemptor's bound, so "freed" proves nothing.
		{"check after the bound", event.Injection{HeldMS: 10060, SpunMS: 10000, FreedInWindow: true}, false, event.InjNotPreempted},
		{"no preemption at all", event.Injection{HeldMS: 3, SpunMS: 700}, true, event.InjNotPreempted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			judge(&in, tc.stopped)
			if in.Outcome != tc.want {
				t.Errorf("outcome %q (%s), want %q", in.Outcome, in.Msg, tc.want)
			}
			if in.Outcome != event.InjFreedUnderTask && !tc.stopped && in.FreedInWindow {
				t.Error("a check after the hold kept freed_in_window")
			}
		})
	}
}
