package repro

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/wire/options"
)

// Every sequence the options accept has a run, and every run a name the
// options accept.
func TestReproSequencesCoverTheOptions(t *testing.T) {
	names := options.Repros()
	for _, n := range names {
		if sequences[n] == nil {
			t.Errorf("repro=%s is an option with no sequence", n)
		}
	}
	for n := range sequences {
		if !slices.Contains(names, n) {
			t.Errorf("sequence %s is not in options.Repros", n)
		}
	}
}

// A name with no sequence is an error that lists the names.
func TestRunUnknownSequence(t *testing.T) {
	err := Run(context.Background(), Env{Opts: options.Options{Repro: "no-such"}})
	if err == nil || !strings.Contains(err.Error(), `unknown sequence "no-such"`) {
		t.Fatalf("Run(no-such) = %v, want the unknown sequence's error", err)
	}
}
