package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/event"
)

// The churn's transitions and the delivery oracle's checks are rates over
// the churn stage, so that a baseline without the oracle shows its cost.
func TestPrintCellBenchChurnRates(t *testing.T) {
	mk := func(transitions int, checked uint64, delivery bool) results.Result {
		r := results.Result{
			Stages:      []results.StageRecord{{Name: event.StageStorm, Seconds: 50}, {Name: event.StageChurn, Seconds: 60}},
			Transitions: map[string]*event.Phase{"ftrace_on": {Succeeded: transitions / 2}, "fentry_first": {Succeeded: transitions / 2}},
		}
		if delivery {
			r.Delivery = &event.Delivery{Checked: checked}
		}
		return r
	}
	var b bytes.Buffer
	printCellBench(&b, []cellVariant{{name: "baseline"}, {name: "default"}}, []results.Result{mk(600, 0, false), mk(480, 6_000_000, true)})
	out := b.String()
	for _, want := range []string{"churn transitions", "10.0", "8.0", "0.80×", "delivery calls checked", "100000.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
