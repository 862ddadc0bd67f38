package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/mutation"
)

// fakeCells stands in for *runner.Env: each cell ends with its verdict
// after its delay, written the way Env.Run writes it, or, when bare,
// fails before writing anything.
type fakeCells struct {
	verdict map[string]results.Verdict
	delay   map[string]time.Duration
	bare    map[string]bool
	cancel  context.CancelFunc // called when the first cell ends

	once sync.Once
}

func (f *fakeCells) Run(ctx context.Context, runID, runDir string, c runner.Cell) (results.Result, error) {
	time.Sleep(f.delay[c.Name])
	if f.cancel != nil {
		defer f.once.Do(f.cancel)
	}
	if f.bare[c.Name] {
		return results.Result{}, errors.New("cannot create the cell's directory")
	}
	w, err := results.NewCellWriter(filepath.Join(runDir, c.Name), results.Result{RunID: runID, Cell: c.Name, Arch: string(c.Arch.Name)})
	if err != nil {
		return results.Result{}, err
	}
	_ = w.Update(func(r *results.Result) { r.Verdict, r.Reason = f.verdict[c.Name], "fake" })
	return w.Result(), nil
}

func TestExecute(t *testing.T) {
	a, _ := arch.Lookup("x86_64")
	m1 := &Mutant{Name: "m1", Class: TrampolineFreedEarly}
	m2 := &Mutant{Name: "m2", Class: TrampolineFreedEarly}
	jobs := []Job{
		{Cell: runner.Cell{Name: "x86_64-unmutated", Arch: a}},
		{Mutant: m1, Cell: runner.Cell{Name: "x86_64-m1", Arch: a}},
		{Mutant: m2, Cell: runner.Cell{Name: "x86_64-m2", Arch: a}},
	}
	for _, tc := range []struct {
		name     string
		f        *fakeCells
		parallel int
		cancel   bool
		verdicts []results.Verdict // per job, in the jobs' order
		reason   map[int]string    // a row's reason, where it matters
		err      error             // what the table's Err wraps
	}{
		{
			name: "rows in the jobs' order whatever order the cells end in",
			f: &fakeCells{
				verdict: map[string]results.Verdict{"x86_64-unmutated": results.Pass, "x86_64-m1": results.Fail, "x86_64-m2": results.Pass},
				delay:   map[string]time.Duration{"x86_64-unmutated": 60 * time.Millisecond},
			},
			parallel: 3,
			verdicts: []results.Verdict{results.Pass, results.Fail, results.Pass},
		},
		{
			name: "a cell that failed before its first write is a row, not judged",
			f: &fakeCells{
				verdict: map[string]results.Verdict{"x86_64-unmutated": results.Pass, "x86_64-m2": results.Pass},
				bare:    map[string]bool{"x86_64-m1": true},
			},
			parallel: 1,
			verdicts: []results.Verdict{results.Pass, results.Error, results.Pass},
			reason:   map[int]string{1: "cannot create the cell's directory"},
			err:      mutation.ErrNotJudged,
		},
		{
			name: "cells not started after an interrupt are rows, not judged",
			f: &fakeCells{
				verdict: map[string]results.Verdict{"x86_64-unmutated": results.Pass},
			},
			parallel: 1,
			cancel:   true,
			verdicts: []results.Verdict{results.Pass, results.Error, results.Error},
			reason:   map[int]string{1: "not started: context canceled", 2: "not started: context canceled"},
			err:      mutation.ErrNotJudged,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				tc.f.cancel = cancel
			}
			dir := t.TempDir()
			table, err := Execute(ctx, tc.f, jobs, tc.parallel, dir, mutation.Table{RunID: "r", Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			var onDisk mutation.Table
			b, err := os.ReadFile(filepath.Join(dir, results.MutationFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &onDisk); err != nil {
				t.Fatal(err)
			}
			for _, tb := range []mutation.Table{table, onDisk} {
				if tb.Seed != 7 || len(tb.Rows) != len(jobs) {
					t.Fatalf("table %+v: want seed 7 and %d rows", tb, len(jobs))
				}
				for i, row := range tb.Rows {
					want := ""
					if jobs[i].Mutant != nil {
						want = jobs[i].Mutant.Name
					}
					if row.Cell != jobs[i].Cell.Name || row.Mutant != want || row.Verdict != tc.verdicts[i] {
						t.Errorf("row %d = %+v, want cell %s, mutant %q, verdict %s", i, row, jobs[i].Cell.Name, want, tc.verdicts[i])
					}
					if r, ok := tc.reason[i]; ok && row.Reason != r {
						t.Errorf("row %d reason %q, want %q", i, row.Reason, r)
					}
				}
			}
			if got := table.Err(false); !errors.Is(got, tc.err) {
				t.Errorf("table.Err = %v, want %v", got, tc.err)
			}
			if s, err := os.ReadFile(filepath.Join(dir, results.SummaryFile)); err != nil || len(s) == 0 {
				t.Errorf("summary.json: %v", err)
			}
		})
	}
}
