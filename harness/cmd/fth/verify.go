package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/results/mail"
)

// verifyFile is a verification run's record, in its run directory.
const verifyFile = "verify.json"

// verifyCase is one of the three ways a standalone reproducer is run.
type verifyCase struct {
	Name string `json:"name"`
	// Fixed applies the finding's first fix on top of the debug patch.
	Fixed bool `json:"fixed,omitempty"`
	// Control runs the reproducer's control ("run.sh control").
	Control bool `json:"control,omitempty"`
	// WantFail: the run must fail with the finding's title; else pass.
	WantFail bool `json:"want_fail,omitempty"`
}

// verifyCases are the three runs of every reproducer: the kernel
// without the fix fails with the finding's title, the kernel with it
// passes, and the control passes.
func verifyCases() []verifyCase {
	return []verifyCase{
		{Name: "unfixed", WantFail: true},
		{Name: "fixed", Fixed: true},
		{Name: "control", Control: true},
	}
}

// verifyCount is one case's tally.
type verifyCount struct {
	Case verifyCase `json:"case"`
	// AsExpected counts the runs that failed with the finding's title
	// (unfixed) or passed (fixed, control), of Runs; Errors the runs
	// that reached no verdict.
	AsExpected int      `json:"as_expected"`
	Runs       int      `json:"runs"`
	Errors     int      `json:"errors"`
	Titles     []string `json:"titles"`
	Cells      []string `json:"cells"`
}

// verifyRecord is one finding's verification on one arch.
type verifyRecord struct {
	Finding    string `json:"finding"`
	Reproducer string `json:"reproducer"`
	// Args are the reproducer's first arguments: the path of a finding
	// folded into another's report (known.Path).
	Args []string `json:"args,omitempty"`
	Arch string   `json:"arch"`
	// Natural: without the reproducer's debug patch and parameters.
	Natural bool `json:"natural,omitempty"`
	// Fix is the fix the fixed case was built with.
	Fix string `json:"fix"`
	// Patches are on every case's kernel: the debug patches, then the
	// fixes of other findings the reproducer needs (known.Report.Needs).
	Patches []string `json:"patches"`
	// Fragments are added to every case's kernel (known.Report.Fragments).
	Fragments  []string       `json:"fragments,omitempty"`
	KernelArgs []string       `json:"kernel_args"`
	Counts     []*verifyCount `json:"counts"`
	// Report is the mail report of the first run that failed as it
	// should.
	Report string `json:"report,omitempty"`
}

// Line is the record's one-line summary.
func (v *verifyRecord) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", v.Finding, v.Arch)
	if v.Natural {
		b.WriteString(" natural")
	}
	for _, c := range v.Counts {
		fmt.Fprintf(&b, " %s %d/%d", c.Case.Name, c.AsExpected, c.Runs)
		if c.Errors > 0 {
			fmt.Fprintf(&b, " (%d errors)", c.Errors)
		}
	}
	if v.Report != "" {
		fmt.Fprintf(&b, " %s", v.Report)
	}
	return b.String()
}

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify")
	var (
		findings = fs.String("findings", "all", "comma-separated finding numbers of docs/findings.md (e.g. 14), or all: every finding with a standalone reproducer")
		arches   = fs.String("arches", "x86_64", "comma-separated arches to verify on")
		runs     = fs.Int("runs", 5, "runs of each case (unfixed, fixed, control)")
		out      = fs.String("out", "out/runs", "directory for run results")
		runID    = fs.String("run-id", "", "run id (default: verify- plus a time stamp)")
		fix      = fs.String("fix", "", "the fix to verify, a file of "+known.FixesDir+" (default: the finding's first, the preferred one); one finding only")
		natural  = fs.Bool("natural", false, "without the reproducer's debug patch and kernel parameters: how often a plain kernel meets the bug")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth verify [flags] [-- <fth run flags>]",
		Positional: true,
		About:      "Runs each finding's standalone reproducer (results/known/repro/<name>: run.sh and\nits module, nothing of the harness's workload and no debugger) on a kernel\nbuilt with its debug patch, --runs times in each of three cases: without the\nfix (must fail with the finding's title), with the fix (must pass), and its\ncontrol (must pass). Prints one line per finding and arch:\n  <finding> <arch> unfixed k/n fixed k/n control k/n <report>\nwhere <report> is the mail report (fth report --mail) of the first failing\nrun. Flags after -- go to every fth run (--cache, --kernel, -v, ...).",
	}); err != nil {
		return err
	}
	if *runs < 1 {
		return fmt.Errorf("%w: --runs %d: want 1 or more", errUsage, *runs)
	}
	repo, err := findRepo()
	if err != nil {
		return err
	}
	var todo []known.Report
	for _, r := range known.Reports() {
		if r.Standalone == "" {
			continue
		}
		for _, v := range r.Verifications() {
			if *findings == "all" || slices.Contains(strings.Split(*findings, ","), v.Number) {
				todo = append(todo, v)
			}
		}
	}
	if *fix != "" {
		if len(todo) != 1 || *findings == "all" {
			return fmt.Errorf("%w: --fix %s: name one finding with --findings", errUsage, *fix)
		}
		if !slices.Contains(todo[0].Fixes, *fix) {
			return fmt.Errorf("%w: --fix %s: finding %s's fixes are %s", errUsage, *fix, todo[0].Number, strings.Join(todo[0].Fixes, ", "))
		}
		todo[0].Fixes = []string{*fix}
	}
	if *findings != "all" {
		for _, n := range strings.Split(*findings, ",") {
			if !slices.ContainsFunc(todo, func(r known.Report) bool { return r.Number == n }) {
				return fmt.Errorf("%w: --findings %s: finding %s has no standalone reproducer (%s)", errUsage, *findings, n, reproducerList())
			}
		}
	}
	if *runID == "" {
		*runID = "verify-" + newRunID()
	}
	runDir := filepath.Join(*out, *runID)
	var records []*verifyRecord
	save := func() error { return atomicfile.WriteJSON(filepath.Join(runDir, verifyFile), records) }
	// Every plan is checked before anything is built.
	type job struct {
		rec   *verifyRecord
		count *verifyCount
		plan  *runPlan
		f     known.Report
	}
	var jobs []job
	for _, a := range strings.Split(*arches, ",") {
		for _, f := range todo {
			if f.Arches != nil && !slices.Contains(f.Arches, a) {
				if *findings != "all" {
					return fmt.Errorf("%w: --findings %s --arches %s: finding %s's reproducer is for %s", errUsage, *findings, *arches, f.Number, strings.Join(f.Arches, ", "))
				}
				fmt.Fprintf(stdout, "finding %s: its reproducer is for %s, not run on %s\n", f.Number, strings.Join(f.Arches, ", "), a)
				continue
			}
			rec, plans, err := verifyPlans(repo, f, a, *natural, *out, *runID, fs.Args(), stdout)
			if err != nil {
				return err
			}
			records = append(records, rec)
			for i, p := range plans {
				jobs = append(jobs, job{rec: rec, count: rec.Counts[i], plan: p, f: f})
			}
		}
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%w: no finding has a standalone reproducer to verify", errUsage)
	}
	if jobs[0].plan.dryRun {
		for _, j := range jobs {
			fmt.Fprintf(stdout, "finding %s on %s, %s, %d runs:\n", j.rec.Finding, j.rec.Arch, j.count.Case.Name, *runs)
			printDryRun(stdout, j.plan.cell, j.plan.b.kernelSrc)
		}
		return nil
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return err
	}
	if err := save(); err != nil {
		return err
	}
	log := newLogger(stderr, jobs[0].plan.b.verbose)
	env := jobs[0].plan.b.env(log, repo)
	for n := 0; n < *runs; n++ {
		for _, j := range jobs {
			c := j.plan.cell
			c.Name = fmt.Sprintf("%s-%s-%s-%d", strings.Join(append([]string{j.f.Standalone}, j.f.Args...), "-"), c.Arch.Name, j.count.Case.Name, n+1)
			r, err := env.Run(ctx, *runID, runDir, c)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			j.count.Runs++
			j.count.Cells = append(j.count.Cells, c.Name)
			title := r.Title()
			j.count.Titles = append(j.count.Titles, string(r.Verdict)+": "+title)
			switch {
			case err != nil || r.Verdict == results.Error:
				j.count.Errors++
			case j.count.Case.WantFail && r.Verdict == results.Fail && sameFinding(j.f, title):
				j.count.AsExpected++
				if j.rec.Report == "" {
					j.rec.Report = mailReport(ctx, repo, filepath.Join(runDir, c.Name))
				}
			case !j.count.Case.WantFail && r.Verdict == results.Pass:
				j.count.AsExpected++
			}
			fmt.Fprintf(stdout, "%s: %s %s\n", c.Name, r.Verdict, title)
			if err := save(); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(stdout)
	bad := 0
	for _, rec := range records {
		fmt.Fprintln(stdout, rec.Line())
		for _, c := range rec.Counts {
			// The unfixed kernel must fail in at least 4 of 5 runs, the
			// others pass every time.
			if (c.Case.WantFail && 5*c.AsExpected < 4*c.Runs) || (!c.Case.WantFail && c.AsExpected < c.Runs) {
				bad++
			}
		}
	}
	fmt.Fprintf(stdout, "\nrecord: %s\n", filepath.Join(runDir, verifyFile))
	if bad > 0 {
		return fmt.Errorf("%w: %d case(s) of the reproducers did not behave as their findings say", errCellsFailed, bad)
	}
	return nil
}

// verifyPlans checks the three cases of f's reproducer on arch a and
// returns their record and run plans.
func verifyPlans(repo string, f known.Report, a string, natural bool, out, runID string, runArgs []string, stdout io.Writer) (*verifyRecord, []*runPlan, error) {
	dir := filepath.Join(repo, known.ReproDir, f.Standalone)
	rec := &verifyRecord{Finding: f.Number, Reproducer: f.Standalone, Args: f.Args, Arch: a, Natural: natural, Fragments: f.Fragments}
	var debug []string
	if !natural {
		debug, _ = filepath.Glob(filepath.Join(dir, "*.patch"))
		if b, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
			rec.KernelArgs = strings.Fields(string(b))
		}
	}
	for _, d := range debug {
		rec.Patches = append(rec.Patches, relTo(repo, d))
	}
	for _, n := range f.Needs {
		rec.Patches = append(rec.Patches, filepath.Join(known.FixesDir, n))
	}
	if len(f.Fixes) == 0 {
		return nil, nil, fmt.Errorf("finding %s: no fix to verify", f.Number)
	}
	rec.Fix = f.Fixes[0]
	var plans []*runPlan
	for _, vc := range verifyCases() {
		args := []string{"--arch", a, "--out", out, "--run-id", runID,
			"--agent-arg", "scenario=standalone", "--agent-arg", "reproducer=" + f.Standalone}
		for _, p := range debug {
			args = append(args, "--patch", p)
		}
		for _, n := range f.Needs {
			args = append(args, "--patch", filepath.Join(repo, known.FixesDir, n))
		}
		if vc.Fixed {
			args = append(args, "--patch", filepath.Join(repo, known.FixesDir, f.Fixes[0]))
		}
		if words := reproducerWords(f.Args, vc.Control); len(words) > 0 {
			args = append(args, "--agent-arg", "reproducerargs="+strings.Join(words, ","))
		}
		for _, k := range rec.KernelArgs {
			args = append(args, "--kernel-arg", k)
		}
		p, err := parseRun(append(args, runArgs...), stdout)
		if err != nil {
			return nil, nil, fmt.Errorf("finding %s on %s, %s: %w", f.Number, a, vc.Name, err)
		}
		// What the reproducer's config needs beyond the cell's own
		// fragments, as a mutant's detection aids are added.
		p.cell.Fragments = append(slices.Clone(p.cell.Fragments), f.Fragments...)
		plans = append(plans, p)
		rec.Counts = append(rec.Counts, &verifyCount{Case: vc})
	}
	return rec, plans, nil
}

// reproducerWords are run.sh's arguments for a path's arguments and
// its control or not.
func reproducerWords(args []string, control bool) []string {
	words := slices.Clone(args)
	if control {
		words = append(words, "control")
	}
	return words
}

// sameFinding says a title is that of a failing run of f's reproducer.
func sameFinding(f known.Report, title string) bool {
	ok, err := regexp.MatchString(f.Fails, title)
	return err == nil && ok
}

// mailReport writes the mail report of a failed cell and returns its
// path, or why it could not be written.
func mailReport(ctx context.Context, repo, cellDir string) string {
	_, path, err := mail.WriteCell(ctx, cellDir, mail.Options{Repo: repo})
	if err != nil {
		return "(no report: " + err.Error() + ")"
	}
	return path
}

func reproducerList() string {
	var have []string
	for _, r := range known.Reports() {
		if r.Standalone == "" {
			continue
		}
		for _, v := range r.Verifications() {
			have = append(have, v.Number)
		}
	}
	return "findings with one: " + strings.Join(have, ", ")
}

func relTo(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}
