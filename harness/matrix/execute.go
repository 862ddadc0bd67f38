package matrix

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
)

// CellRunner runs one cell to a verdict and writes its result files under
// runDir/<c.Name>. *runner.Env is the real one; tests use fakes that do not
// boot. The error is non-nil only when no verdict could be reached; the
// returned result then carries verdict error when the runner got that far.
type CellRunner interface {
	Run(ctx context.Context, runID, runDir string, c runner.Cell) (results.Result, error)
}

var _ CellRunner = (*runner.Env)(nil)

// Execute runs cells with at most parallel in flight (1 when parallel < 1) and
// returns the run's summary, rows in cell order.
//
// A cell's failure or error never stops the others; only ctx does, and cells
// not started by then are recorded as errors saying so. Skipped cells get a
// result.json with verdict skip and the reason. summary.json is rewritten
// atomically after every cell, so an interrupted matrix still leaves a
// readable summary of what finished. The error reports only result files
// that could not be written; every cell has run (or been recorded) anyway.
func Execute(ctx context.Context, r CellRunner, cells []Cell, parallel int, runDir, runID string) (results.Summary, error) {
	if parallel < 1 {
		parallel = 1
	}
	rec := &recorder{runDir: runDir, runID: runID, rows: make([]*results.CellSummary, len(cells))}
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, c := range cells {
		if c.Skip != "" {
			rec.finish(i, c, results.Result{Verdict: results.Skip, Reason: c.Skip}, nil)
			continue
		}
		if ctx.Err() != nil {
			rec.notStarted(i, c, ctx)
			continue
		}
		// Go blocks while parallel cells are in flight.
		g.Go(func() error {
			if ctx.Err() != nil {
				rec.notStarted(i, c, ctx)
				return nil
			}
			res, err := r.Run(ctx, runID, runDir, c.Run)
			rec.finish(i, c, res, err)
			return nil
		})
	}
	_ = g.Wait() // goroutines never fail: each records its own outcome
	return rec.summary(), rec.err()
}

// recorder keeps the summary rows and rewrites summary.json as they come in.
type recorder struct {
	runDir, runID string

	mu   sync.Mutex
	rows []*results.CellSummary
	errs []error
}

// finish records cell i's outcome. A runner that failed before writing any
// result (res.Cell empty) gets one written here, so every cell has a
// result.json.
func (rec *recorder) finish(i int, c Cell, res results.Result, err error) {
	dir := filepath.Join(rec.runDir, c.Name)
	if res.Cell == "" {
		res = rec.synthesize(c, res, err)
	}
	row := results.Summarize(res, dir)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.rows[i] = &row
	if werr := results.WriteSummary(rec.runDir, rec.summaryLocked()); werr != nil {
		rec.errs = append(rec.errs, fmt.Errorf("write %s: %w", filepath.Join(rec.runDir, results.SummaryFile), werr))
	}
}

// synthesize writes result.json for a cell the runner never recorded: a skip,
// one not started, or one whose runner failed before its first write.
func (rec *recorder) synthesize(c Cell, res results.Result, err error) results.Result {
	now := time.Now().UTC()
	out := results.Result{
		RunID: rec.runID, Cell: c.Name, Arch: string(c.Arch.Name), Scenario: c.Run.Agent.Options().Scenario,
		Verdict: res.Verdict, Reason: res.Reason, StartedAt: now, EndedAt: now,
		Kernel: results.Kernel{Fragments: c.Run.Fragments},
	}
	if out.Verdict == "" || out.Verdict == results.Running {
		out.Verdict = results.Error
	}
	if err != nil && out.Reason == "" {
		out.Reason = err.Error()
	}
	w, werr := results.NewCellWriter(filepath.Join(rec.runDir, c.Name), out)
	if werr != nil {
		rec.mu.Lock()
		rec.errs = append(rec.errs, fmt.Errorf("cell %s: write result.json: %w", c.Name, werr))
		rec.mu.Unlock()
		return out
	}
	return w.Result()
}

func (rec *recorder) notStarted(i int, c Cell, ctx context.Context) {
	rec.finish(i, c, results.Result{Verdict: results.Error, Reason: "not started: " + context.Cause(ctx).Error()}, nil)
}

func (rec *recorder) summary() results.Summary {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.summaryLocked()
}

func (rec *recorder) summaryLocked() results.Summary {
	s := results.Summary{Schema: results.SchemaVersion, RunID: rec.runID, At: time.Now().UTC(), Cells: []results.CellSummary{}}
	for _, r := range rec.rows {
		if r != nil {
			s.Cells = append(s.Cells, *r)
		}
	}
	return s
}

func (rec *recorder) err() error {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return errors.Join(rec.errs...)
}
