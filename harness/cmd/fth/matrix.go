package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/results"
)

func cmdMatrix(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("matrix")
	var b buildFlags
	b.register(fs, withKernel)
	def := matrix.DefaultParams()
	var (
		arches    = fs.String("arches", matrix.AllArches, "comma-separated architectures, or all: "+archList())
		variants  = fs.String("variants", matrix.DefaultVariants, "default (each arch's own set), all, or comma-separated variant names (listed below)")
		file      = fs.String("file", "", "matrix file (YAML, see tests/matrix/nightly.yaml); flags given explicitly override its values")
		parallel  = fs.Int("parallel", 1, "cells in flight at once; kernel builds are serialised anyway, so 2 only overlaps boots")
		list      = fs.Bool("list", false, "print the cells, with every skip and its reason, and run nothing")
		out       = fs.String("out", "out/runs", "directory for run results")
		runID     = fs.String("run-id", "", "run id (default: time stamp plus random suffix)")
		accelFlag = fs.String("accel", string(def.Accel), "QEMU accelerator: auto (KVM if a probe boot works, else tcg-single, or tcg-multi on QEMU 11.1 and later), kvm, tcg-single, tcg-multi")
		cpus      = fs.Int("cpus", def.CPUs, "guest vCPUs")
		mem       = fs.Int("mem", def.MemoryMB, "guest memory in MiB")
		n         = fs.String("n", def.Agent["n"], "trampolines to attach, or 'all'")
		hold      = fs.Duration("hold", 5*time.Second, "how long to keep every trampoline attached with the hammer running")
		detach    = fs.String("detach", def.Agent["detach"], "how many trampolines to detach one by one with timing ('all', or a number)")
		seed      = fs.Int64("seed", 0, "random seed for function selection and the hammer (0: each agent picks and reports one)")
		deadline  = fs.Duration("deadline", def.Deadline, "overall deadline per boot (scaled per arch)")
		silence   = fs.Duration("silence", def.Silence, "no-output watchdog per boot (scaled per arch)")
		tcs       = fs.String("toolchain", string(kbuild.CompilerDefault), "comma-separated toolchains, an axis: every cell is built with each of "+compilerList()+" (default: each arch's measured best)")
		qemus     = fs.String("qemu", string(qemu.EmulatorDefault), "comma-separated QEMUs, an axis: every cell boots under each of "+emulatorList()+" (default: each arch's measured best)")
		agentArgs multiFlag
	)
	fs.Var(&agentArgs, "agent-arg", "extra agent option key=value for every cell (repeatable)")
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth matrix [flags]",
		About: "Builds and boots every arch × variant cell; a cell the arch or kernel cannot\nprovide is skipped with the reason. Exit 1 if any cell failed, 2 if any errored.\nA cell's fragments come from its variant (define your own in a --file).",
		Refused: map[string]string{
			"arch":      "it is for single-cell commands: fth matrix takes --arches",
			"fragments": "a matrix cell's fragments come from its variant; define your own variant in a --file",
		},
		More: func(w io.Writer) {
			fmt.Fprintf(w, "variants:\n")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, v := range matrix.Builtins() {
				fmt.Fprintf(tw, "  %s\t%s\n", v.Name, v.Doc)
			}
			tw.Flush()
		},
	}); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	spec := matrix.DefaultSpec()
	if *file != "" {
		var err error
		if spec, err = matrix.LoadFile(*file); err != nil {
			return fmt.Errorf("%w: --file: %w", errUsage, err)
		}
	}
	if *file == "" || set["arches"] {
		a, err := matrix.ParseArches(strings.Split(*arches, ","))
		if err != nil {
			return fmt.Errorf("%w: --arches: %w", errUsage, err)
		}
		spec.Arches = a
	}
	if *file == "" || set["variants"] {
		v, err := matrix.ParseVariants(strings.Split(*variants, ","), spec.Custom)
		if err != nil {
			return fmt.Errorf("%w: --variants: %w", errUsage, err)
		}
		spec.Variants = v
	}
	if *file == "" || set["toolchain"] {
		t, err := matrix.ParseToolchains(strings.Split(*tcs, ","))
		if err != nil {
			return fmt.Errorf("%w: --toolchain: %w", errUsage, err)
		}
		spec.Toolchains = t
	}
	if *file == "" || set["qemu"] {
		q, err := matrix.ParseQEMUs(strings.Split(*qemus, ","))
		if err != nil {
			return fmt.Errorf("%w: --qemu: %w", errUsage, err)
		}
		spec.QEMUs = q
	}
	if err := overrideParams(&spec, set, matrixFlags{
		parallel: *parallel, accel: *accelFlag, cpus: *cpus, mem: *mem, n: *n, hold: *hold,
		detach: *detach, seed: *seed, deadline: *deadline, silence: *silence, agentArgs: agentArgs,
	}); err != nil {
		return err
	}

	// --kernel is an axis here: every cell on each series given.
	series, err := parseSeriesList(b.kernel)
	if err != nil {
		return err
	}
	b.kernel = ""
	_, repo, _, err := b.resolve()
	if err != nil {
		return err
	}
	if err := b.needRoot(spec.NeedsRoot(), "a --toolchain or --qemu of the matrix"); err != nil {
		return err
	}
	log := newLogger(stderr, b.verbose)
	trees, err := matrixTrees(repo, b.kernelSrc, series, b.kconfigs)
	if err != nil {
		return err
	}
	var cells []matrix.Cell
	var versions []string
	for _, t := range trees {
		cs, err := matrix.Expand(spec, t.tree)
		if err != nil {
			return err
		}
		if len(trees) > 1 {
			for i := range cs {
				cs[i].Name += "-linux-" + t.series
				cs[i].Run.Name = cs[i].Name
				cs[i].Run.KernelSrc = t.tree.Dir
			}
		}
		cells = append(cells, cs...)
		versions = append(versions, t.tree.Version)
	}
	printPlan(stdout, cells, strings.Join(versions, ", "))
	if *list {
		return nil
	}

	if *runID == "" {
		*runID = newRunID()
	}
	runDir := filepath.Join(*out, *runID)
	sum, execErr := matrix.Execute(ctx, b.env(log, repo), cells, spec.Parallel, runDir, *runID)
	fmt.Fprintln(stdout)
	results.PrintTable(stdout, sum)
	fmt.Fprintf(stdout, "\nsummary: %s\n", filepath.Join(runDir, results.SummaryFile))
	writeRunReport(ctx, log, runDir, stdout)
	return matrixVerdict(sum, execErr)
}

// matrixFlags are the per-cell flags that override a matrix file's values
// when given explicitly.
type matrixFlags struct {
	parallel          int
	accel             string
	cpus, mem         int
	n, detach         string
	hold              time.Duration
	seed              int64
	deadline, silence time.Duration
	agentArgs         []string
}

func overrideParams(spec *matrix.Spec, set map[string]bool, f matrixFlags) error {
	p := &spec.Params
	if set["parallel"] {
		if f.parallel < 1 {
			return fmt.Errorf("%w: --parallel %d: want 1 or more", errUsage, f.parallel)
		}
		spec.Parallel = f.parallel
	}
	if set["accel"] {
		a, err := qemu.ParseAccel(f.accel)
		if err != nil {
			return fmt.Errorf("%w: --accel: %w", errUsage, err)
		}
		p.Accel = a
	}
	if set["cpus"] {
		p.CPUs = f.cpus
	}
	if set["mem"] {
		p.MemoryMB = f.mem
	}
	if set["deadline"] {
		p.Deadline = f.deadline
	}
	if set["silence"] {
		p.Silence = f.silence
	}
	if set["n"] {
		p.Agent["n"] = f.n
	}
	if set["hold"] {
		p.Agent["hold"] = f.hold.String()
	}
	if set["detach"] {
		p.Agent["detach"] = f.detach
	}
	if set["seed"] && f.seed != 0 {
		p.Agent["seed"] = fmt.Sprint(f.seed)
	}
	if err := multiFlag(f.agentArgs).into(p.Agent); err != nil {
		return err
	}
	// The final parameters, a matrix file's included, are checked like
	// fth run's, before any cell is built.
	if err := checkBoot(p.CPUs, p.MemoryMB, p.Deadline, p.Silence, ""); err != nil {
		return err
	}
	_, err := checkAgentArgs(p.Agent, agentFlags())
	return err
}

// printPlan shows every cell before anything runs, skips with their reasons,
// so a long matrix says up front what it will and will not cover.
func printPlan(w io.Writer, cells []matrix.Cell, version string) {
	run := 0
	for _, c := range cells {
		if c.Skip == "" {
			run++
		}
	}
	fmt.Fprintf(w, "matrix: %d cells on Linux %s, %d to run, %d skipped\n", len(cells), version, run, len(cells)-run)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cells {
		if c.Skip != "" {
			fmt.Fprintf(tw, "  %s\tskip\t%s\n", c.Name, c.Skip)
			continue
		}
		boot := c.Run.Preempt
		if boot == "" {
			boot = "build default"
		}
		fmt.Fprintf(tw, "  %s\trun\t%s (preempt: %s)\n", c.Name, strings.Join(c.Run.Fragments, " + "), boot)
		for _, n := range c.NotAsked {
			fmt.Fprintf(tw, "  \t\tnot asked: %s\n", n)
		}
	}
	tw.Flush()
	if run > 0 {
		fmt.Fprintln(w, "  (a cell listed as run still skips, with the reason, if configuring it shows the toolchain's compiler probes rule a symbol out, as gcc 12 does for ppc64le's CALL_OPS and riscv64's, or if the built kernel would refuse its own BTF, as riscv64's does with clang 21)")
	}
}

// matrixVerdict maps a summary to fth's exit codes (verdictsErr), then
// says when the results could not be written.
func matrixVerdict(sum results.Summary, execErr error) error {
	cells := make([]cellVerdict, 0, len(sum.Cells))
	for _, c := range sum.Cells {
		cells = append(cells, cellVerdict{cell: c.Cell, verdict: c.Verdict, reason: c.Title})
	}
	if err := verdictsErr(cells); err != nil {
		return err
	}
	if execErr != nil {
		return fmt.Errorf("matrix results: %w", execErr)
	}
	return nil
}

// seriesTree is one value of the matrix's kernel axis.
type seriesTree struct {
	series string // "6.12"; "" for the --kernel-src tree
	tree   *matrix.Tree
}

// parseSeriesList checks a comma-separated --kernel list: Debian series,
// each once.
func parseSeriesList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if !seriesRe.MatchString(v) {
			return nil, fmt.Errorf("%w: --kernel %q: want Debian kernel series such as 6.12,7.3 (linux-source-X.Y), comma-separated", errUsage, v)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%w: --kernel: %s given twice", errUsage, v)
		}
		out = append(out, v)
	}
	return out, nil
}

// matrixTrees opens the tree of each series (fetching Debian's
// linux-source-X.Y the first time), or src alone when none is given.
func matrixTrees(repo, src string, series []string, kconfigs string) ([]seriesTree, error) {
	if len(series) == 0 {
		t, err := matrix.OpenTree(src, kconfigs)
		if err != nil {
			return nil, fmt.Errorf("--kernel-src: %w", err)
		}
		return []seriesTree{{tree: t}}, nil
	}
	if err := oneTree(strings.Join(series, ","), src); err != nil {
		return nil, err
	}
	var out []seriesTree
	for _, s := range series {
		dir, err := fetchSeries(repo, s)
		if err != nil {
			return nil, err
		}
		t, err := matrix.OpenTree(dir, kconfigs)
		if err != nil {
			return nil, fmt.Errorf("--kernel %s: %w", s, err)
		}
		out = append(out, seriesTree{series: s, tree: t})
	}
	return out, nil
}
