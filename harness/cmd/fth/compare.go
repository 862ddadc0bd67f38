package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/compare"
)

// regressionsError makes `fth compare` exit 1, like a failing kernel: a
// regression is a kernel getting worse.
type regressionsError struct{ n int }

func (e regressionsError) Error() string {
	return fmt.Sprintf("%d regressions against the baseline", e.n)
}

func (e regressionsError) Unwrap() error { return errCellsFailed }

func cmdCompare(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compare")
	rule := compare.DefaultRule()
	fs.Float64Var(&rule.MinRatio, "min-ratio", rule.MinRatio, "smallest relative slowdown of a median that counts")
	fs.Float64Var(&rule.SpreadFactor, "spread-factor", rule.SpreadFactor, "multiple of the baseline's p50→p90 spread a median may grow by")
	fs.DurationVar(&rule.Floor, "floor", rule.Floor, "smallest absolute slowdown of a median that counts")
	fs.IntVar(&rule.MinSamples, "min-samples", rule.MinSamples, "operations each run needs before a phase is compared")
	benchFlags(fs, &rule.Bench)
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth compare [flags] <baseline-run-dir> <candidate-run-dir>",
		Positional: true,
		About:      "Matches cells by name and flags regressions: a verdict that became fail, a\nfinding title the baseline cell did not have, an attach or detach median slower\nthan the rule allows, a churn oracle that passed and now fails, and bench\nfigures that got worse (ratios to the baseline, scaling seconds per N, storm\nwakeup p99). Measurements are never compared across accelerators. Exit 1 if any.",
	}); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: compare takes two run directories: baseline, then candidate", errUsage)
	}
	if rule.MinRatio < 0 || rule.SpreadFactor < 0 || rule.Floor < 0 || rule.MinSamples < 1 {
		return fmt.Errorf("%w: --min-ratio, --spread-factor and --floor must not be negative, --min-samples at least 1", errUsage)
	}
	if err := checkBenchRule(rule.Bench); err != nil {
		return err
	}
	a, err := results.LoadRun(ctx, fs.Arg(0))
	if err != nil {
		return fmt.Errorf("compare baseline: %w", err)
	}
	b, err := results.LoadRun(ctx, fs.Arg(1))
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

// benchFlags exposes the bench rule's constants (see compare.BenchRule for
// where the defaults come from).
func benchFlags(fs *flag.FlagSet, r *compare.BenchRule) {
	fs.Float64Var(&r.RatioGrowth, "ratio-growth", r.RatioGrowth, "smallest relative growth of a bench ratio to the baseline that counts")
	fs.Float64Var(&r.RatioFloor, "ratio-floor", r.RatioFloor, "smallest absolute growth of a bench ratio that counts")
	fs.Float64Var(&r.ScalingGrowth, "scaling-growth", r.ScalingGrowth, "smallest relative growth of attach/detach seconds at one N that counts")
	fs.Float64Var(&r.ScalingFloor, "scaling-floor", r.ScalingFloor, "smallest absolute growth of attach/detach seconds at one N that counts, in seconds")
	fs.Float64Var(&r.WakeupFactor, "wakeup-factor", r.WakeupFactor, "how many times the baseline's storm wakeup p99 counts as a regression")
	fs.Int64Var(&r.WakeupMinSamples, "wakeup-min-samples", r.WakeupMinSamples, "wakeups each storm run needs before its p99 is compared")
}

func checkBenchRule(r compare.BenchRule) error {
	if r.RatioGrowth < 0 || r.RatioFloor < 0 || r.ScalingGrowth < 0 || r.ScalingFloor < 0 || r.WakeupFactor < 1 || r.WakeupMinSamples < 1 {
		return fmt.Errorf("%w: --ratio-growth, --ratio-floor, --scaling-growth and --scaling-floor must not be negative, --wakeup-factor and --wakeup-min-samples at least 1", errUsage)
	}
	return nil
}
