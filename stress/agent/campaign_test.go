package main

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/options"
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

// The race stage keeps the reserve the churn was cut to leave it, however
// far the churn ran past its budget to finish the delivery opening, and
// takes what a short churn left.
func TestRaceStageBudget(t *testing.T) {
	reserve := options.CampaignRaceReserve
	for _, tc := range []struct {
		name          string
		churn, budget time.Duration
		ran           time.Duration
		want          time.Duration
	}{
		{"no budget, no bound", time.Minute, 0, 3 * time.Minute, 0},
		{"the churn on time leaves the reserve", 0, 2 * time.Minute, 2*time.Minute - reserve, reserve},
		{"an overrun keeps the reserve", 0, 2 * time.Minute, 2*time.Minute - reserve + 54*time.Second, reserve},
		{"a churn ended early leaves more", 30 * time.Second, 2 * time.Minute, 29 * time.Second, 91 * time.Second},
		{"a short churn's overrun keeps its share", 30 * time.Second, 2 * time.Minute, 3 * time.Minute, 90 * time.Second},
		{"a budget below the reserve is all the race's", 0, 30 * time.Second, 2 * time.Second, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options.Options{Churn: tc.churn, Budget: tc.budget}
			got := raceStageBudget(o, tc.ran)
			if got != tc.want {
				t.Errorf("raceStageBudget(churn=%v, budget=%v, ran %v) = %v, want %v", tc.churn, tc.budget, tc.ran, got, tc.want)
			}
			if tc.budget > 0 && got <= 0 {
				t.Errorf("a bounded campaign's race got %v: the race scenario reads 0 as no bound", got)
			}
		})
	}
}

func TestMultiFuncs(t *testing.T) {
	mod := func(s string) string { return options.ScaleModuleName + "_" + s }
	rest := []string{"a", "b", "c", "d", mod("x"), mod("y"), mod("z")}
	bg := []string{"b", mod("y")}
	for _, n := range []int{1, 3, 4, 5, 100} {
		got := multiFuncs(rest, bg, n, 7)
		if want := min(n, len(rest)-len(bg)); len(got) != want {
			t.Fatalf("n=%d: %v, want %d functions", n, got, want)
		}
		seen := map[string]bool{}
		modSeen := false
		for _, fn := range got {
			if fn == "b" || fn == mod("y") {
				t.Errorf("n=%d: %v holds the storm's %s", n, got, fn)
			}
			if seen[fn] {
				t.Errorf("n=%d: %v holds %s twice", n, got, fn)
			}
			seen[fn] = true
			if options.ScaleModuleFunc(fn) {
				modSeen = true
			} else if modSeen {
				t.Errorf("n=%d: %v puts a vmlinux function after the module's", n, got)
			}
		}
		if again := multiFuncs(rest, bg, n, 7); !slices.Equal(got, again) {
			t.Errorf("n=%d: not fixed by the seed: %v then %v", n, got, again)
		}
	}
}

// TestRaceStageOptionsValid: the race stage's options pass the agent's own
// checks for any campaign's, the campaign-only ones included (multihold
// once failed every campaign that held a population: "scenario=race has
// neither").
func TestRaceStageOptionsValid(t *testing.T) {
	for _, args := range []map[string]string{
		{"scenario": "campaign"},
		{"scenario": "campaign", "multihold": "38000", "scalemod": "true", "budget": "16m"},
	} {
		o, err := options.FromArgs(args, options.HostEnv)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		st := raceStageOptions(o, time.Minute)
		if err := st.Validate(); err != nil {
			t.Errorf("%v: the race stage's options are refused: %v", args, err)
		}
		if st.Scenario != options.ScenarioRace || st.Poweroff || st.Budget != time.Minute {
			t.Errorf("%v: stage options %+v", args, st)
		}
		// What the child parses back from the flags it is given.
		var argv []string
		for k, v := range st.Args() {
			argv = append(argv, "-"+k+"="+v)
		}
		if _, err := options.Parse(argv, "", options.HostEnv, io.Discard); err != nil {
			t.Errorf("%v: the stage's flags do not parse: %v", args, err)
		}
	}
}
