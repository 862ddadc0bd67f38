package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ftrace-harness/fth/results/compare"
	"github.com/ftrace-harness/fth/results/report"
)

// regressionsError makes `fth compare` exit 1, like a failing kernel: a
// regression is a kernel getting worse.
type regressionsError struct{ n int }

func (e regressionsError) Error() string {
	return fmt.Sprintf("%d regressions against the baseline", e.n)
}

func (e regressionsError) Unwrap() error { return errCellsFailed }

func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rule := compare.DefaultRule()
	fs.Float64Var(&rule.MinRatio, "min-ratio", rule.MinRatio, "smallest relative slowdown of a median that counts")
	fs.Float64Var(&rule.SpreadFactor, "spread-factor", rule.SpreadFactor, "multiple of the baseline's p50→p90 spread a median may grow by")
	fs.DurationVar(&rule.Floor, "floor", rule.Floor, "smallest absolute slowdown of a median that counts")
	fs.IntVar(&rule.MinSamples, "min-samples", rule.MinSamples, "operations each run needs before a phase is compared")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fth compare [flags] <baseline-run-dir> <candidate-run-dir>\n\nMatches cells by name and flags regressions: a verdict that became fail, a\nfinding title the baseline cell did not have, an attach or detach median slower\nthan the rule allows. Exit 1 if any.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: compare takes two run directories: baseline, then candidate", errUsage)
	}
	if rule.MinRatio < 0 || rule.SpreadFactor < 0 || rule.Floor < 0 || rule.MinSamples < 1 {
		return fmt.Errorf("%w: --min-ratio, --spread-factor and --floor must not be negative, --min-samples at least 1", errUsage)
	}
	a, err := report.Load(ctx, fs.Arg(0))
	if err != nil {
		return fmt.Errorf("compare baseline: %w", err)
	}
	b, err := report.Load(ctx, fs.Arg(1))
	if err != nil {
		return fmt.Errorf("compare candidate: %w", err)
	}
	fmt.Fprintf(stdout, "baseline %s (%s), candidate %s (%s)\n\n", a.ID, a.Dir, b.ID, b.Dir)
	rep := compare.Compare(a.Results(), b.Results(), rule)
	rep.WriteTable(stdout)
	if n := rep.Regressions(); n > 0 {
		return regressionsError{n}
	}
	return nil
}
