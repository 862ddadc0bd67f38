package main

import (
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/options"
)

func TestChurnBudget(t *testing.T) {
	for _, tc := range []struct {
		name          string
		churn, budget time.Duration
		want          time.Duration
	}{
		{"no budget keeps the churn", time.Minute, 0, time.Minute},
		{"the budget leaves the race its reserve", 5 * time.Minute, 2 * time.Minute, 2*time.Minute - options.CampaignRaceReserve},
		{"a short churn fits", 30 * time.Second, 2 * time.Minute, 30 * time.Second},
		{"an unbounded churn gets what is left", 0, 2 * time.Minute, 2*time.Minute - options.CampaignRaceReserve},
		{"a budget below the reserve leaves no churn", time.Minute, 30 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options.Options{Churn: tc.churn, Budget: tc.budget}
			if got := churnBudget(o); got != tc.want {
				t.Errorf("churnBudget(churn=%v, budget=%v) = %v, want %v", tc.churn, tc.budget, got, tc.want)
			}
		})
	}
}
