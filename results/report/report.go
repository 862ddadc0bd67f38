package report

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/junit"
	"github.com/ftrace-harness/fth/results/symbolize"
)

// Options tunes a report. The zero value makes a report without
// symbolized stacks.
type Options struct {
	// Vmlinux symbolizes every cell's stacks against this file; a file
	// that cannot be opened is an error.
	Vmlinux string
	// AutoVmlinux symbolizes each cell against its own kernel.vmlinux from
	// result.json when that file exists (on the machine that built it);
	// where it does not, the page says so.
	AutoVmlinux bool
	// ExcerptLines bounds each log excerpt; 0 means 40.
	ExcerptLines int
}

// Written names the files Write produced.
type Written struct {
	// Report, JUnit and Summary are the paths of report.html, junit.xml
	// and summary.json.
	Report, JUnit, Summary string
}

// Write loads the run directory dir and writes report.html, junit.xml and a
// summary.json rebuilt from the cells into it. Each file is replaced
// atomically, so a CI step or a browser never reads half of one.
func Write(ctx context.Context, dir string, opts Options) (*results.Run, Written, error) {
	run, err := results.LoadRun(ctx, dir)
	if err != nil {
		return nil, Written{}, err
	}
	out := Written{
		Report:  filepath.Join(dir, results.ReportFile),
		JUnit:   filepath.Join(dir, results.JUnitFile),
		Summary: filepath.Join(dir, results.SummaryFile),
	}
	var b bytes.Buffer
	if err := Render(ctx, &b, run, opts); err != nil {
		return run, Written{}, err
	}
	if err := atomicfile.Write(out.Report, b.Bytes()); err != nil {
		return run, Written{}, fmt.Errorf("write %s: %w", out.Report, err)
	}
	if err := junit.WriteFile(out.JUnit, junit.FromResults(run.ID, run.Results())); err != nil {
		return run, Written{}, err
	}
	if err := results.WriteSummary(dir, run.Summary()); err != nil {
		return run, Written{}, fmt.Errorf("write %s: %w", out.Summary, err)
	}
	return run, out, nil
}

// Render writes the HTML page for run.
func Render(ctx context.Context, w io.Writer, run *results.Run, opts Options) error {
	syms := &symbolizers{opts: opts, open: map[string]*symbolize.Symbolizer{}, failed: map[string]error{}}
	defer syms.close()
	if opts.Vmlinux != "" {
		if _, err := syms.get(opts.Vmlinux); err != nil {
			return fmt.Errorf("report --vmlinux: %w", err)
		}
	}
	v, err := buildPage(ctx, run, opts, syms)
	if err != nil {
		return err
	}
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("render report for %s: %w", run.Dir, err)
	}
	return nil
}
