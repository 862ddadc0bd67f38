package mutate

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/mutation"
)

// Job is one cell of a mutation run: a mutant's kernel, or the unmutated
// one when Mutant is nil.
type Job struct {
	Mutant *Mutant
	Cell   runner.Cell
}

// Execute runs the jobs' cells through matrix.Execute (parallel at a
// time, summary.json rewritten after each) and judges each cell as it
// ends: table, with a row per job in the jobs' order, is rewritten to
// runDir's mutation.json after every cell, so that an interrupted run
// keeps what it measured. A cell its runner never recorded (not started
// after ctx ended, or failed before its first write) gets the error
// result matrix.Execute writes for it, and its row counts as not judged.
// The error reports only files that could not be written or read.
func Execute(ctx context.Context, r matrix.CellRunner, jobs []Job, parallel int, runDir string, table mutation.Table) (mutation.Table, error) {
	j := &judging{CellRunner: r, runDir: runDir, table: table, jobs: jobs, rows: make([]*mutation.Row, len(jobs)), index: map[string]int{}}
	cells := make([]matrix.Cell, len(jobs))
	for i, job := range jobs {
		cells[i] = matrix.Cell{Name: job.Cell.Name, Arch: job.Cell.Arch, Run: job.Cell}
		j.index[job.Cell.Name] = i
	}
	_, err := matrix.Execute(ctx, j, cells, parallel, runDir, table.RunID)
	for i, c := range cells {
		if j.rows[i] != nil {
			continue
		}
		res, rerr := results.ReadResult(filepath.Join(runDir, c.Name, results.ResultFile))
		if rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		j.record(i, res)
	}
	return j.table, cmp.Or(err, j.err)
}

// judging is the matrix.CellRunner of a mutation run: the real runner,
// and the judgement of each cell it ran.
type judging struct {
	matrix.CellRunner
	runDir string
	jobs   []Job
	index  map[string]int // cell name → job

	mu    sync.Mutex
	table mutation.Table
	rows  []*mutation.Row
	err   error
}

func (j *judging) Run(ctx context.Context, runID, runDir string, c runner.Cell) (results.Result, error) {
	res, err := j.CellRunner.Run(ctx, runID, runDir, c)
	if res.Cell != "" {
		j.record(j.index[c.Name], res)
	}
	return res, err
}

func (j *judging) record(i int, res results.Result) {
	row := Judge(res)
	row.BuildSeconds = res.Timings.KernelSeconds
	if res.Kernel.Cached {
		row.BuildSeconds = 0
	}
	if m := j.jobs[i].Mutant; m != nil {
		row.Mutant, row.Class = m.Name, m.Class
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.rows[i] = &row
	j.table.Rows = nil
	for _, r := range j.rows {
		if r != nil {
			j.table.Rows = append(j.table.Rows, *r)
		}
	}
	j.err = cmp.Or(j.err, mutation.Write(j.runDir, j.table))
}
