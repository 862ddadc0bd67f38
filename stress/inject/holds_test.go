package inject

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/wire/event"
)

// A host's error answer stops the run unjudged: the cell is an error, not
// a kernel failure.
func TestRecvHostErrorUnjudged(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	r := Holds{Port: raceport.New(pr)}
	if _, err := pw.WriteString(`{"op":"` + event.RaceError + `","msg":"the host released the held vCPU after 10s without a release"}` + "\n" + `{"op":"` + event.RaceArmed + `"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	_, err = r.Recv(time.Second)
	var u *emit.UnjudgedError
	if err == nil || !errors.As(fmt.Errorf("repro: %w", err), &u) {
		t.Errorf("recv of a host error = %v, want an unjudged error", err)
	}
	if m, err := r.Recv(time.Second); err != nil || m.Op != event.RaceArmed {
		t.Errorf("recv = %+v, %v; want armed", m, err)
	}
}

// The campaign's race always makes the first injection at each target,
// however far the churn overran the budget, and none after the budget is
// spent.
func TestRaceBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started int
		until   time.Time
		want    bool
	}{
		{"no budget", 5, time.Time{}, true},
		{"the first injection, budget spent", 0, time.Now().Add(-time.Minute), true},
		{"a later injection, budget spent", 1, time.Now().Add(-time.Minute), false},
		{"a later injection, budget left", 3, time.Now().Add(time.Minute), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Injector{env: Env{W: emit.NewWriter(io.Discard)}, started: tc.started, until: tc.until}
			if got := r.more(); got != tc.want {
				t.Errorf("more() = %v, want %v", got, tc.want)
			}
		})
	}
}
