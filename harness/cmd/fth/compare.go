package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

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
	kernels := fs.String("kernels", "", "`base,cand`: compare the cells of kernel series base with those of series cand (6.12,7.3), matched by name without their -linux-X.Y suffix; one run directory (a matrix with --kernel base,cand) or two")
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth compare [flags] <baseline-run-dir> <candidate-run-dir>\n       fth compare --kernels 6.12,7.3 <run-dir> [<run-dir>]",
		Positional: true,
		About:      "Matches cells by name and flags regressions: a verdict that became fail, a\nfinding title the baseline cell did not have, an attach or detach median slower\nthan the rule allows, a churn oracle that passed and now fails, and bench\nfigures that got worse (ratios to the baseline, scaling seconds per N, storm\nwakeup p99). Measurements are never compared across accelerators. Exit 1 if any.",
	}); err != nil {
		return err
	}
	var series []string
	if *kernels != "" {
		var err error
		if series, err = parseSeriesList(*kernels); err != nil || len(series) != 2 {
			return fmt.Errorf("%w: --kernels %q: want two Debian kernel series, baseline then candidate, such as 6.12,7.3", errUsage, *kernels)
		}
	}
	dirs := fs.Args()
	if len(series) == 2 && len(dirs) == 1 {
		dirs = []string{dirs[0], dirs[0]}
	}
	if len(dirs) != 2 {
		return fmt.Errorf("%w: compare takes two run directories: baseline, then candidate (or one, with --kernels)", errUsage)
	}
	if rule.MinRatio < 0 || rule.SpreadFactor < 0 || rule.Floor < 0 || rule.MinSamples < 1 {
		return fmt.Errorf("%w: --min-ratio, --spread-factor and --floor must not be negative, --min-samples at least 1", errUsage)
	}
	if err := checkBenchRule(rule.Bench); err != nil {
		return err
	}
	a, err := results.LoadRun(ctx, dirs[0])
	if err != nil {
		return fmt.Errorf("compare baseline: %w", err)
	}
	b, err := results.LoadRun(ctx, dirs[1])
	if err != nil {
		return fmt.Errorf("compare candidate: %w", err)
	}
	ra, rb := a.Results(), b.Results()
	if len(series) == 2 {
		ra, rb = ofSeries(ra, series[0]), ofSeries(rb, series[1])
		if len(ra) == 0 || len(rb) == 0 {
			return fmt.Errorf("--kernels %s: %d baseline cells ran Linux %s and %d candidate cells Linux %s: nothing to compare", *kernels, len(ra), series[0], len(rb), series[1])
		}
		fmt.Fprintf(stdout, "baseline %s (%s) on Linux %s, candidate %s (%s) on Linux %s\n\n", a.ID, a.Dir, series[0], b.ID, b.Dir, series[1])
	} else {
		fmt.Fprintf(stdout, "baseline %s (%s)%s, candidate %s (%s)%s\n\n", a.ID, a.Dir, versionsOf(ra), b.ID, b.Dir, versionsOf(rb))
	}
	rep := compare.Compare(ra, rb, rule)
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

// ofSeries keeps the results of cells that ran kernel series s, named as
// they would be in a one-version run: without the matrix's -linux-<s>.
func ofSeries(rs []results.Result, s string) []results.Result {
	var out []results.Result
	for _, r := range rs {
		v := r.Kernel.SourceVersion
		if v != s && !strings.HasPrefix(v, s+".") {
			continue
		}
		r.Cell = strings.TrimSuffix(r.Cell, "-linux-"+s)
		out = append(out, r)
	}
	return out
}

// versionsOf says which kernel versions a run's cells ran, " on Linux
// 7.3.4" or " on Linux 6.12.117, 7.3.4", or "" when none built.
func versionsOf(rs []results.Result) string {
	var vs []string
	for _, r := range rs {
		if v := r.Kernel.SourceVersion; v != "" && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return ""
	}
	slices.Sort(vs)
	return " on Linux " + strings.Join(vs, ", ")
}
