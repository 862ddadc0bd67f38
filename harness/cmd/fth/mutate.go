package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/harness/mutate"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results/mutation"
	"github.com/ftrace-harness/fth/wire/options"
)

func cmdMutate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("mutate")
	var b buildFlags
	b.register(fs, withKernel|withToolchain)
	var (
		arches   = fs.String("arches", "x86_64", "comma-separated arches to run the mutants of (or 'all')")
		names    = fs.String("mutants", "", "comma-separated mutant names, or 'all' (default: every mutant marked Default)")
		budget   = fs.Duration("budget", 2*time.Minute, "how long each kernel runs the scenario before a mutant counts as not detected (with --campaign, the campaign's churn and race stages; its storm and detach sample come on top)")
		campaign = fs.Bool("campaign", true, "run every mutant against the default campaign, what make test-arch runs (false: each mutant's own scenario from its header, on the churn)")
		seed     = fs.Int64("seed", 0, "seed shared by every cell of the run (0: one drawn now and recorded)")
		out      = fs.String("out", "out/runs", "directory for run results")
		runID    = fs.String("run-id", "", "run id (default: mutate- plus a time stamp)")
		list     = fs.Bool("list", false, "list the mutants and stop")
		require  = fs.Bool("require-detected", false, "exit non-zero when a mutant is not detected (the unmutated kernel failing always does)")
		accel    = fs.String("accel", string(matrix.DefaultParams().Accel), "QEMU accelerator (see fth run)")
		qemuFlag = fs.String("qemu", string(qemu.EmulatorDefault), "QEMU that boots every cell: "+emulatorList()+" (see fth run), so that a score can be compared across QEMUs and accelerators")
		mutDir   = fs.String("mutants-dir", "", "directory of *.patch mutants (default: <repo>/mutants)")
		dryRun   = fs.Bool("dry-run", false, "check every input and print the cells, then stop")
		parallel = fs.Int("parallel", 1, "cells booted at once; every kernel is built first, one at a time (on a 2-core machine, 2 boots at once overlap two tcg-single guests)")
		mem      = fs.Int("mem", matrix.DefaultParams().MemoryMB, "guest memory in MiB of every cell (a population held by multihold= needs 4096 at 38,000)")
		build    = fs.Bool("build-only", false, "build (or find in the cache) every kernel the run needs, mutants included, then stop: boots of several arches can then run side by side without two builds at once")
		agentArg multiFlag
	)
	fs.Var(&agentArg, "agent-arg", "agent option key=value added to every cell's scenario (repeatable)")
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth mutate [flags]",
		About: "Measures the harness's bug-finding power. For each arch, runs the mutation\nscenario (the default campaign, storm, churn and race for --budget; with\n--campaign=false each mutant's own scenario) on the unmutated kernel, which must pass, and\non each mutant: the same kernel with one patching bug put in on purpose\n(mutants/*.patch), built from the unmutated build directory so that only the\npatched files recompile. Prints and writes (mutation.json, report.html) a table:\nmutant, arch, detected, time to detect, title.",
	}); err != nil {
		return err
	}
	if err := checkPositive("budget", *budget, false); err != nil {
		return err
	}
	if *parallel < 1 {
		return fmt.Errorf("%w: --parallel %d: want 1 or more", errUsage, *parallel)
	}
	if *mem < minMemMB || *mem > maxMemMB {
		return fmt.Errorf("%w: --mem %d: want %d to %d MiB", errUsage, *mem, minMemMB, maxMemMB)
	}
	archRows, err := matrix.ParseArches(splitList(*arches))
	if err != nil {
		return fmt.Errorf("%w: --arches: %v", errUsage, err)
	}
	_, repo, _, err := b.resolve()
	if err != nil {
		return err
	}
	if *mutDir == "" {
		*mutDir = filepath.Join(repo, "mutants")
	}
	all, err := mutate.Load(*mutDir)
	if err != nil {
		return err
	}
	if *list {
		printMutants(stdout, all)
		return nil
	}
	if *seed == 0 {
		*seed = time.Now().UnixNano()&0x7fffffff | 1
	}
	extra := map[string]string{}
	if err := agentArg.into(extra); err != nil {
		return err
	}
	accelV, err := qemu.ParseAccel(*accel)
	if err != nil {
		return fmt.Errorf("%w: --accel: %v", errUsage, err)
	}
	emuFlag, err := qemu.ParseEmulator(*qemuFlag)
	if err != nil {
		return fmt.Errorf("%w: --qemu: %v", errUsage, err)
	}
	def := matrix.DefaultParams()
	var jobs []mutate.Job
	for _, a := range archRows {
		ms, err := mutate.Select(all, splitList(*names), a.Name)
		if err != nil {
			return fmt.Errorf("%w: --mutants: %v", errUsage, err)
		}
		if len(ms) == 0 {
			fmt.Fprintf(stdout, "%s: no mutant applies; skipped\n", a.Name)
			continue
		}
		for _, m := range ms {
			if m.Needs == mutate.NeedsKVM && accelV != qemu.AccelKVM {
				fmt.Fprintf(stdout, "%s needs kvm: its bug shows only on a real CPU, not under TCG (docs/mutation.md, The INT3 sync class); unless --accel auto finds KVM, its row says nothing of the harness\n", m.Name)
			}
		}
		b.arch = string(a.Name)
		_, _, frags, err := b.resolve()
		if err != nil {
			return err
		}
		emu := emuFlag.Resolve(a)
		if err := b.needRoot(emu.InRoot(), "--qemu "+string(emu)); err != nil {
			return err
		}
		mk := func(name string, m *mutate.Mutant) (runner.Cell, error) {
			agent := mutate.DefaultAgent(*budget)
			deadline := *budget + 10*time.Minute
			if *campaign {
				agent = mutate.CampaignAgent(*budget)
				// The storm's 2,000 attaches and the detach sample
				// come on top of the budget.
				deadline = *budget + 15*time.Minute
			}
			agent["seed"] = fmt.Sprint(*seed)
			cfrags := frags
			var patches []kbuild.Patch
			if m != nil {
				// The campaign is the product: a mutant's own scenario
				// and detection aids are not part of it.
				if !*campaign {
					maps.Copy(agent, m.Agent)
					cfrags = append(append([]string(nil), frags...), m.Fragments...)
				}
				patches = []kbuild.Patch{m.KernelPatch()}
			}
			maps.Copy(agent, extra)
			args, err := checkAgentArgs(agent, nil)
			if err != nil {
				return runner.Cell{}, fmt.Errorf("%s: %w", name, err)
			}
			if err := checkRaceTarget(args.Options(), a); err != nil {
				return runner.Cell{}, err
			}
			return runner.Cell{
				Name: name, Arch: a, Fragments: cfrags, Preempt: "full", Agent: args,
				Accel: accelV, QEMU: emu, CPUs: def.CPUs, MemoryMB: *mem, Silence: def.Silence,
				// The scenario's budget, plus boot, module loading and the
				// agent's own teardown, scaled per arch by the target.
				Deadline:  deadline,
				Patches:   patches,
				Toolchain: b.toolchain,
				// A mutant's first report is its detection; an oopsed
				// kernel may limp on until the deadline otherwise.
				StopAtFinding: true,
			}, nil
		}
		c, err := mk(fmt.Sprintf("%s-unmutated", a.Name), nil)
		if err != nil {
			return err
		}
		jobs = append(jobs, mutate.Job{Cell: c})
		for i := range ms {
			c, err := mk(fmt.Sprintf("%s-%s", a.Name, ms[i].Name), &ms[i])
			if err != nil {
				return err
			}
			jobs = append(jobs, mutate.Job{Mutant: &ms[i], Cell: c})
		}
	}
	if *dryRun {
		for _, j := range jobs {
			printDryRun(stdout, j.Cell, b.kernelSrc)
		}
		return nil
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%w: no mutant applies to --arches %s", errUsage, *arches)
	}
	log := newLogger(stderr, b.verbose)
	env := b.env(log, repo)
	// Built before any boot when boots overlap: builds are serialised,
	// and a boot waiting behind another cell's build would count that
	// wait against nothing but the wall clock.
	if *build || *parallel > 1 {
		for _, j := range jobs {
			start := time.Now()
			k, _, err := env.BuildKernel(ctx, j.Cell.Arch, j.Cell.Toolchain, j.Cell.Fragments, j.Cell.Patches...)
			if err != nil {
				return fmt.Errorf("%s: %w", j.Cell.Name, err)
			}
			how := fmt.Sprintf("built in %.0f s", time.Since(start).Seconds())
			if k.Cached {
				how = "cached"
			}
			fmt.Fprintf(stdout, "%s: %s (%s)\n", j.Cell.Name, how, k.Image)
		}
		if *build {
			return nil
		}
	}
	if *runID == "" {
		*runID = "mutate-" + newRunID()
	}
	runDir := filepath.Join(*out, *runID)
	table, err := mutate.Execute(ctx, env, jobs, *parallel, runDir, mutation.Table{RunID: *runID, Seed: *seed, Budget: budget.Seconds()})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	table.Print(stdout)
	fmt.Fprintf(stdout, "\nresults: %s\n", runDir)
	writeRunReport(ctx, log, runDir, stdout)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return table.Err(*require)
}

func printMutants(w io.Writer, ms []mutate.Mutant) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tCLASS\tARCHES\tDEFAULT\tNEEDS\tSCENARIO")
	for _, m := range ms {
		var arches []string
		for _, a := range m.Arches {
			arches = append(arches, string(a))
		}
		agent := "churn"
		if len(m.Agent) > 0 {
			agent += " " + options.Format(m.Agent)
		}
		if len(m.Fragments) > 0 {
			agent += " +" + strings.Join(m.Fragments, "+")
		}
		needs := m.Needs
		if needs == "" {
			needs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", m.Name, m.Class, strings.Join(arches, ","), m.Default, needs, agent)
	}
	tw.Flush()
}
