package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/bisect"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/options"
)

// Files a bisection writes into its run directory, beside its cells.
const (
	bisectJSON    = results.BisectFile
	bisectLog     = results.BisectLog
	bisectSummary = results.BisectSummary
)

// errNoCulprit is a bisection that ended without naming a culprit (exit 2:
// no answer, which is not a kernel failure).
var errNoCulprit = errors.New("no culprit")

func cmdBisect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bisect")
	var b buildFlags
	b.register(fs, 0)
	pol := bisect.DefaultPolicy()
	var (
		good      = fs.String("good", "", "a commit that does not fail (the test passes there)")
		bad       = fs.String("bad", "", "a commit that fails, descended from --good")
		kernelSrc = fs.String("kernel-src", os.Getenv("KERNEL_SRC"), "the git kernel tree to bisect (env KERNEL_SRC); never written: revisions are checked out in worktrees of their own under the cache")
		kernels   = fs.String("kernels", "", "Debian kernel `series`, oldest first, e.g. 6.1,6.12,7.2,7.3: the first is good, the last bad, and the answer is the first bad release (no git)")
		from      = fs.String("from", "", "a recorded cell `directory` (out/runs/<id>/<cell>): every step runs its reproduction, as fth repro does")
		out       = fs.String("out", "out/bisect", "directory for bisections")
		runID     = fs.String("run-id", "", "run id (default: bisect- plus a time stamp)")
		jobs      = fs.Int("j", 0, "make -j (default: number of CPUs)")
	)
	fs.IntVar(&pol.MinRuns, "min-runs", pol.MinRuns, "fewest passing runs that make a revision good")
	fs.IntVar(&pol.MaxRuns, "max-runs", pol.MaxRuns, "most runs of one step (the parent's verification takes more if --min-rate needs them)")
	fs.IntVar(&pol.BadFailures, "bad-failures", pol.BadFailures, "failures of the kind bisected that make a revision bad")
	fs.IntVar(&pol.RateFailures, "rate-failures", pol.RateFailures, "failures a bad revision runs on to, to measure its rate for the revisions below it")
	fs.IntVar(&pol.MaxBroken, "max-broken", pol.MaxBroken, "runs that do not build, boot or reach a verdict before a revision is skipped")
	fs.Float64Var(&pol.Threshold, "threshold", pol.Threshold, "least confidence a culprit is named with; below it the answer is inconclusive")
	fs.Float64Var(&pol.Credible, "credible", pol.Credible, "probability that a bad revision's rate is below the bound the revisions under it are judged against")
	fs.Float64Var(&pol.MinRate, "min-rate", pol.MinRate, "least failure rate of a bad revision the answer guards against (its parent may fail less often than the culprit)")
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth bisect (--good REV --bad REV [--kernel-src TREE] | --kernels A,B,...) [flags] (--from CELL | -- <fth run flags>)",
		Positional: true,
		About: `Finds the first revision at which a test fails, when it fails only some of
the time. Each revision runs the test adaptively: a failure of the kind the
bad end shows (its title and location) makes it bad, and it runs on to
measure its rate; good takes enough passes that a bad revision would likely
have failed one, judged against the rate of its nearest bad revision. The
candidate is verified: it fails again, its parent passes again and the bad
end with it reverted passes, both judged against the lower of the
candidate's rate and --min-rate; a parent that fails sends the search on
below it. Every step states its confidence; the answer's rests on the
candidate's and those two, and below --threshold it is inconclusive, never
a culprit. The test is a recorded cell (--from) or fth run's flags after --.
Exit codes: 0 a culprit named, 2 none (inconclusive, or the ends do not
behave as claimed: both are said), 3 bad usage. See docs/bisect.md.`,
	}); err != nil {
		return err
	}
	if err := pol.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	gitMode := *good != "" || *bad != ""
	switch {
	case gitMode && *kernels != "":
		return fmt.Errorf("%w: fth bisect: --kernels bisects releases, --good/--bad commits: give one or the other", errUsage)
	case gitMode && (*good == "" || *bad == ""):
		return fmt.Errorf("%w: fth bisect: give both --good and --bad", errUsage)
	case !gitMode && *kernels == "":
		return fmt.Errorf("%w: fth bisect: say what to bisect: --good REV --bad REV in a git tree (--kernel-src), or --kernels 6.12,7.3", errUsage)
	case gitMode && *kernelSrc == "":
		return fmt.Errorf("%w: fth bisect: --good/--bad need the git kernel tree: --kernel-src or KERNEL_SRC", errUsage)
	}
	runArgs := fs.Args()
	switch {
	case *from == "" && len(runArgs) == 0:
		return fmt.Errorf("%w: fth bisect: say what the test is: --from out/runs/<id>/<cell>, or fth run's flags after -- (e.g. -- --arch x86_64 --agent-arg scenario=race)", errUsage)
	case *from != "" && len(runArgs) > 0:
		return fmt.Errorf("%w: fth bisect: --from and run flags (%s) both say what the test is: give one", errUsage, strings.Join(runArgs, " "))
	}
	for _, a := range runArgs {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if strings.HasPrefix(a, "-") && slices.Contains([]string{"kernel-src", "kernel", "out", "run-id"}, name) {
			return fmt.Errorf("%w: fth bisect: run flag %s: the bisection chooses the tree and the output (use fth bisect's own --kernel-src, --kernels, --out, --run-id)", errUsage, a)
		}
	}

	// The revisions, before anything is built.
	var revs []bisect.Revision
	var repo bisect.Repo
	series := map[string]string{}
	if gitMode {
		repo = bisect.Repo{Dir: *kernelSrc}
		var err error
		if revs, err = repo.Range(ctx, *good, *bad); err != nil {
			return fmt.Errorf("%w: fth bisect: %v", errUsage, err)
		}
	} else {
		list, err := parseSeriesList(*kernels)
		if err != nil {
			return err
		}
		if len(list) < 2 {
			return fmt.Errorf("%w: --kernels %q: want at least two series, the good one first", errUsage, *kernels)
		}
		for _, s := range list {
			revs = append(revs, bisect.Revision{ID: s, Subject: "Debian linux-source-" + s})
		}
	}

	// The test: one cell, as a recorded one or as fth run would run it.
	var cell runner.Cell
	if *from != "" {
		orig, err := results.ReadResult(filepath.Join(*from, results.ResultFile))
		if err != nil {
			return fmt.Errorf("%w: --from %s is not a cell directory: %v", errUsage, *from, err)
		}
		if cell, err = reproCell(orig); err != nil {
			return fmt.Errorf("%w: --from %s: %v", errUsage, *from, err)
		}
		if _, _, _, err := b.resolve(); err != nil {
			return err
		}
		if err := b.needRoot(cell.Toolchain.InRoot() || cell.QEMU.InRoot(), "the recorded cell's toolchain "+string(cell.Toolchain)+" and QEMU "+string(cell.QEMU)); err != nil {
			return err
		}
	} else {
		tree := *kernelSrc
		if !gitMode {
			tree = defaultKernelSrc
		}
		p, err := parseRun(append([]string{"--kernel-src", tree, "--repo", b.repo, "--cache", b.cache}, runArgs...), stdout)
		if err != nil || p == nil {
			return err
		}
		if p.dryRun {
			fmt.Fprintf(stdout, "would bisect %d revisions from %s (good) to %s (bad), %s\n", len(revs), revs[0], revs[len(revs)-1], policyText(pol))
			printDryRun(stdout, p.cell, tree)
			return nil
		}
		verbose := b.verbose || p.b.verbose
		cell, b = p.cell, p.b
		b.verbose = verbose
	}
	if *jobs != 0 || *from != "" {
		b.jobs = *jobs // else what the run flags said
	}
	if !gitMode {
		for _, r := range revs {
			dir, err := fetchSeries(b.repo, r.ID)
			if err != nil {
				return err
			}
			series[r.ID] = dir
		}
	}

	if *runID == "" {
		*runID = "bisect-" + newRunID()
	}
	runDir := filepath.Join(*out, *runID)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	log := newLogger(stderr, b.verbose)
	env := b.env(log, b.repo)
	t := &cellTester{env: env, cell: cell, runID: *runID, runDir: runDir, series: series, stdout: stdout,
		tree: *kernelSrc, from: *from, runArgs: runArgs}
	if gitMode {
		// Keyed by the good end's files, not by the repository: the
		// same release in another clone builds in the same place, which
		// is what ccache's hits depend on.
		tree, err := repo.TreeID(ctx, revs[0].ID)
		if err != nil {
			return err
		}
		// One bisection at a time in a place: two would move each
		// other's worktrees under their builds.
		place := filepath.Join(b.cache, "bisect", tree[:12])
		unlock, err := bisect.Lock(ctx, place, fmt.Sprintf("fth bisect pid %d, run %s", os.Getpid(), runDir), func(path, by string) {
			fmt.Fprintf(stderr, "waiting for %s: another bisection of this tree holds it (%s); Ctrl-C to stop\n", path, orUnknown(by))
		})
		if err != nil {
			return err
		}
		defer unlock()
		if t.base, err = repo.AddWorktree(ctx, filepath.Join(place, "base"), revs[0].ID); err != nil {
			return fmt.Errorf("worktree of the good end: %w", err)
		}
		defer t.base.Remove(context.WithoutCancel(ctx))
		// Stamped, the good end's build is keyed by its content: the next
		// bisection from it, in a worktree made anew, reuses its kernels.
		if err := t.base.Stamp(ctx); err != nil {
			return err
		}
		if t.work, err = repo.AddWorktree(ctx, filepath.Join(place, "work"), revs[len(revs)-1].ID); err != nil {
			return fmt.Errorf("worktree: %w", err)
		}
		defer t.work.Remove(context.WithoutCancel(ctx))
		t.repo, t.good = repo, revs[0]
	}

	logf, err := os.OpenFile(filepath.Join(runDir, bisectLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	both := io.MultiWriter(stdout, logf)
	fmt.Fprintf(both, "bisect %s: %d revisions from %s (good) to %s (bad); test: cell %s (%s, %s), seed %s; %s\n",
		*runID, len(revs), revs[0], revs[len(revs)-1], cell.Name, cell.Arch.Name, cell.Agent.Options().Scenario, seedText(cell.Agent), policyText(pol))
	res, err := bisect.Search(ctx, t, revs, pol, func(sofar bisect.Result) {
		fmt.Fprintln(both, formatStep(sofar.Steps[len(sofar.Steps)-1]))
		_ = atomicfile.WriteJSON(filepath.Join(runDir, bisectJSON), sofar)
	})
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(both, "interrupted: the %d steps so far are in %s\n", len(res.Steps), filepath.Join(runDir, bisectJSON))
		}
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(runDir, bisectJSON), res); err != nil {
		return err
	}
	sum := bisectSummaryText(res, t.reproduce(res))
	if err := atomicfile.Write(filepath.Join(runDir, bisectSummary), []byte(sum+"\n")); err != nil {
		return err
	}
	fmt.Fprintf(both, "\n%s\n\nlog:     %s\n", sum, filepath.Join(runDir, bisectLog))
	writeRunReport(ctx, log, runDir, stdout)
	if res.Verdict != bisect.Found {
		return fmt.Errorf("%w: %s: %s", errNoCulprit, res.Verdict, res.Reason)
	}
	return nil
}

func policyText(p bisect.Policy) string {
	return fmt.Sprintf("bad at %d failures (measured to %d), good after at least %d passes, at most %d runs a step, a culprit at confidence %.2f guarding against rates down to %.2f", p.BadFailures, p.RateFailures, p.MinRuns, p.MaxRuns, p.Threshold, p.MinRate)
}

func orUnknown(s string) string {
	if s == "" {
		return "its holder is not recorded"
	}
	return s
}

// seedText is the seed a bisection's runs use, as its log says it.
func seedText(a options.Args) string {
	if s := a.Options().Seed; s != 0 {
		return fmt.Sprint(s)
	}
	return "chosen per run"
}

// formatStep is a step's line in the log.
func formatStep(st bisect.Step) string {
	t := st.Tally()
	var build, guest float64
	built := 0
	var titles []string
	for _, r := range st.Runs {
		build += r.BuildSeconds
		guest += r.GuestSeconds
		if r.Built {
			built++
		}
		if r.Title != "" && !slices.Contains(titles, r.Title) {
			titles = append(titles, r.Title)
		}
	}
	target := st.Target.Rev.String()
	if st.Target.Revert != nil {
		target += " with " + st.Target.Revert.Short() + " reverted"
	}
	line := fmt.Sprintf("step %-14s %s: %s (confidence %.3f): %d runs, %d failed, %d passed", st.Role, target, st.Verdict, st.Confidence, t.Runs(), t.Fail, t.Pass)
	if t.Other > 0 {
		line += fmt.Sprintf(", %d failed otherwise", t.Other)
	}
	if t.Broken > 0 {
		line += fmt.Sprintf(", %d broken", t.Broken)
	}
	line += fmt.Sprintf("; %d kernels built, build %.0f s, guest %.0f s", built, build, guest)
	if len(titles) > 0 {
		line += "; " + strings.Join(titles, " | ")
	}
	return line
}

// bisectSummaryText is the paragraph to paste into a mail.
func bisectSummaryText(r bisect.Result, reproduce string) string {
	builds, runs, bs, gs := r.Cost()
	cost := fmt.Sprintf("%d revisions, %d steps, %d runs, %d kernels built (%.0f min of builds), %.0f guest min", r.Revisions, len(r.Steps), runs, builds, bs/60, gs/60)
	switch r.Verdict {
	case bisect.Found:
		revert := "the revert was not tried: " + r.RevertWhy
		if r.Revert {
			revert = "the bad revision with it reverted passes"
		}
		return fmt.Sprintf("fth bisect: %q (%s) first appears at %s %q, confidence %.3f: it failed again, its parent passed again, %s. The culprit fails %.0f%% of runs (%d of %d); its parent passed %d, judged against a failure rate of %.2f. %s.\nReproduce: %s",
			r.FirstTitle, r.Kind, r.Culprit.Short(), r.Culprit.Subject, r.Confidence, revert, 100*r.Rate, r.Evidence.Fail, r.Evidence.Runs(), r.Parent.Pass, r.Reference, cost, reproduce)
	default:
		if r.Candidate != nil {
			return fmt.Sprintf("fth bisect: %s for %q: %s. The search ended at %s %q, which is not named the culprit. %s.", r.Verdict, r.FirstTitle, r.Reason, r.Candidate.Short(), r.Candidate.Subject, cost)
		}
		return fmt.Sprintf("fth bisect: %s for %q: %s. %s.", r.Verdict, r.FirstTitle, r.Reason, cost)
	}
}

// cellTester runs the bisection's test: the cell, built from a revision.
type cellTester struct {
	env    *runner.Env
	cell   runner.Cell
	runID  string
	runDir string
	stdout io.Writer
	seq    int

	// git: the good end's worktree (every revision whose change from it
	// only edits files is built as that change, on the good end's
	// build), and one that moves (revisions that add or remove files,
	// and reverts).
	repo       bisect.Repo
	good       bisect.Revision
	base, work *bisect.Worktree
	// series: the tree of each Debian series.
	series map[string]string
	// What the test was given as, for the reproduction command.
	tree, from string
	runArgs    []string
}

// source is the tree and patches a target's kernel is built from.
func (t *cellTester) source(ctx context.Context, target bisect.Target) (string, []kbuild.Patch, error) {
	if dir, ok := t.series[target.Rev.ID]; ok {
		return dir, nil, nil
	}
	var diff []byte
	var err error
	switch {
	case target.Revert != nil:
		if err := t.work.Checkout(ctx, target.Rev.ID); err != nil {
			return "", nil, err
		}
		ok, why, rerr := t.work.Revert(ctx, target.Revert.ID)
		if rerr != nil {
			return "", nil, rerr
		}
		if !ok {
			return "", nil, fmt.Errorf("revert of %s on %s: %s", target.Revert.Short(), target.Rev.Short(), why)
		}
		diff, err = bisect.Repo{Dir: t.work.Dir}.Diff(ctx, t.good.ID, "")
	case target.Rev.ID == t.good.ID:
		return t.base.Dir, nil, nil
	default:
		diff, err = t.repo.Diff(ctx, t.good.ID, target.Rev.ID)
	}
	if err != nil {
		return "", nil, err
	}
	if len(diff) == 0 {
		return t.base.Dir, nil, nil
	}
	if _, err := kbuild.PatchedFiles(diff); err == nil {
		name := "bisect-" + target.Rev.Short()
		if target.Revert != nil {
			name += "-revert-" + target.Revert.Short()
		}
		return t.base.Dir, []kbuild.Patch{{Name: name, Text: diff}}, nil
	}
	// Files added or removed: an overlay cannot carry that, so the
	// moving worktree is built as it is (ccache still serves the
	// unchanged files), stamped so that its kernel is keyed by content.
	if target.Revert == nil {
		if err := t.work.Checkout(ctx, target.Rev.ID); err != nil {
			return "", nil, err
		}
	}
	if err := t.work.Stamp(ctx); err != nil {
		return "", nil, err
	}
	return t.work.Dir, nil, nil
}

// Test runs the cell once on target.
func (t *cellTester) Test(ctx context.Context, target bisect.Target, n int) (bisect.Run, error) {
	dir, patches, err := t.source(ctx, target)
	if err != nil {
		if ctx.Err() != nil {
			return bisect.Run{}, ctx.Err()
		}
		return bisect.Run{Outcome: bisect.Broken, Reason: err.Error()}, nil
	}
	t.seq++
	c := t.cell
	c.Name = fmt.Sprintf("%03d-%s-run%d", t.seq, strings.ReplaceAll(target.Rev.Short(), ".", "_"), n)
	c.KernelSrc = dir
	c.Patches = append(slices.Clone(patches), t.cell.Patches...)
	fmt.Fprintf(t.stdout, "  run %d at %s: cell %s\n", n, target.Rev.Short(), c.Name)
	start := time.Now()
	r, err := t.env.Run(ctx, t.runID, t.runDir, c)
	if ctx.Err() != nil {
		return bisect.Run{}, ctx.Err()
	}
	if errors.Is(err, kbuild.ErrPatchNoop) && t.base != nil && len(patches) > 0 {
		// The revision's change leaves the image as the good end's: the
		// good end's kernel is this revision's.
		c.Patches = t.cell.Patches
		c.KernelSrc = t.base.Dir
		c.Name += "-same-image"
		r, err = t.env.Run(ctx, t.runID, t.runDir, c)
		if ctx.Err() != nil {
			return bisect.Run{}, ctx.Err()
		}
	}
	if err != nil && !revisionsFault(err) {
		// The machine's failure, not the revision's: a "skip" would
		// only move the search on to the next victim.
		return bisect.Run{}, fmt.Errorf("run %d at %s: %w", n, target.Rev.Short(), err)
	}
	run := judgeRun(r)
	run.Cell = filepath.Join(t.runDir, c.Name)
	if err != nil && run.Reason == "" {
		run.Reason = err.Error()
	}
	if run.GuestSeconds == 0 && run.BuildSeconds == 0 {
		run.BuildSeconds = time.Since(start).Seconds()
	}
	fmt.Fprintf(t.stdout, "  run %d at %s: %s %s\n", n, target.Rev.Short(), run.Outcome, run.Title+run.Reason)
	return run, nil
}

// revisionsFault says whether a failed run failed because of the revision:
// its kernel did not compile (but not for want of disk space) or cannot be
// configured as asked. Anything else (a copy, the disk, QEMU) is the
// machine's, and ends the bisection instead of marking revisions broken.
func revisionsFault(err error) bool {
	var be *kbuild.BuildError
	switch {
	case errors.As(err, &be):
		return !strings.Contains(strings.Join(be.Tail, "\n"), "No space left on device")
	case errors.Is(err, kbuild.ErrConfigMismatch), errors.Is(err, kbuild.ErrUnusableBTF):
		return true
	}
	return false
}

// judgeRun turns a cell's result into a run: the cell's headline decides
// (results.Result.Headline), as it decides a mutant's detection.
func judgeRun(r results.Result) bisect.Run {
	run := bisect.Run{
		Built:        r.Kernel.Release != "" && !r.Kernel.Cached,
		BuildSeconds: r.Timings.KernelSeconds + r.Timings.ImageSeconds,
		GuestSeconds: r.Timings.GuestSeconds,
	}
	h := r.Headline(false)
	switch {
	case r.Verdict == results.Pass:
		run.Outcome = bisect.Pass
	case r.Verdict == results.Fail && h.Counted:
		run.Outcome, run.Title = bisect.Fail, h.Title
	default:
		run.Outcome, run.Reason = bisect.Broken, fmt.Sprintf("%s: %s", r.Verdict, r.Reason)
	}
	return run
}

// CanRevert tries the culprit's revert on bad in the moving worktree.
func (t *cellTester) CanRevert(ctx context.Context, bad, culprit bisect.Revision) (bool, string, error) {
	if t.work == nil {
		return false, "releases are not commits: there is nothing to revert", nil
	}
	if err := t.work.Checkout(ctx, bad.ID); err != nil {
		return false, "", err
	}
	ok, why, err := t.work.Revert(ctx, culprit.ID)
	if err != nil || !ok {
		return false, why, err
	}
	return true, "", t.work.Checkout(ctx, bad.ID)
}

// reproduce is the command that runs the test on the culprit, in the
// developer's own tree.
func (t *cellTester) reproduce(r bisect.Result) string {
	if r.Culprit == nil {
		return ""
	}
	verb, test := "run", strings.Join(t.runArgs, " ")
	if t.from != "" {
		verb, test = "repro", t.from
	}
	if t.work == nil {
		return fmt.Sprintf("fth %s --kernel %s %s", verb, r.Culprit.ID, test)
	}
	return fmt.Sprintf("git -C %s checkout %s && fth %s --kernel-src %s %s", t.tree, r.Culprit.Short(), verb, t.tree, test)
}
