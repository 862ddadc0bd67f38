package main

import (
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/options"
)

// TestDeadlineFor: a long churn, and a campaign with a long budget, get
// a deadline they fit in; a campaign is bounded by its budget, not by a
// churn= it does not run by.
func TestDeadlineFor(t *testing.T) {
	const def = 30 * time.Minute
	for _, tc := range []struct {
		agent map[string]string
		want  time.Duration
	}{
		{map[string]string{"scenario": "churn", "churn": "30m"}, 30*time.Minute + churnMargin},
		{map[string]string{"scenario": "churn", "churn": "2m"}, def},
		{map[string]string{"scenario": "campaign", "budget": "60m"}, 60*time.Minute + churnMargin},
		{map[string]string{"scenario": "campaign", "budget": "2m"}, def},
		{map[string]string{"scenario": "campaign", "churn": "60m"}, def},
		{map[string]string{"scenario": "storm", "churn": "60m"}, def},
	} {
		o, err := options.FromArgs(tc.agent, options.HostEnv)
		if err != nil {
			t.Fatal(err)
		}
		if got := deadlineFor(o, def); got != tc.want {
			t.Errorf("deadlineFor(%v) = %v, want %v", tc.agent, got, tc.want)
		}
	}
}
