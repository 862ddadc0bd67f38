package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/options"
)

// cmdRepro runs a recorded cell again: same arch, fragments, boot
// parameters, agent options (with the seed the agent reported, if it chose
// one), accelerator and widening. The kernel comes from the same fragments;
// a different final .config is reported, since the tree may have moved.
func cmdRepro(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("repro")
	var b buildFlags
	b.register(fs, withKernel)
	var (
		out      = fs.String("out", "out/runs", "directory for run results")
		runID    = fs.String("run-id", "", "run id (default: repro- plus a time stamp)")
		duration = fs.String("churn", "", "override the churn duration (e.g. 8h for a soak of the same cell)")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth repro [flags] <cell-dir>",
		Positional: true,
		About:      "Runs the cell recorded in <cell-dir>/result.json again, into a new run: same\narch, fragments, boot parameters, agent options (with the seed the agent\nreported), accelerator and widening; then says whether the verdict and title\nmatch. The arch and fragments come from the record, so there are no flags\nfor them.",
		Refused: map[string]string{
			"arch":      "the arch comes from the recorded cell's result.json",
			"fragments": "the fragments come from the recorded cell's result.json",
			"toolchain": "the toolchain comes from the recorded cell's result.json",
			"qemu":      "the QEMU comes from the recorded cell's result.json",
		},
	}); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: fth repro: want exactly one cell directory, got %d arguments (run 'fth repro -h')", errUsage, fs.NArg())
	}
	dir := fs.Arg(0)
	orig, err := results.ReadResult(filepath.Join(dir, results.ResultFile))
	if err != nil {
		return fmt.Errorf("%w: %s is not a cell directory: %v", errUsage, dir, err)
	}
	c, err := reproCell(orig)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUsage, dir, err)
	}
	if *duration != "" {
		if _, err := time.ParseDuration(*duration); err != nil {
			return fmt.Errorf("%w: --churn %q: %v", errUsage, *duration, err)
		}
		if c.Agent, err = c.Agent.With("churn", *duration); err != nil {
			return fmt.Errorf("%w: --churn %q: %v", errUsage, *duration, err)
		}
	}
	_, repo, _, err := b.resolve()
	if err != nil {
		return err
	}
	if err := b.needRoot(c.Toolchain.InRoot() || c.QEMU.InRoot(), "the recorded cell's toolchain "+string(c.Toolchain)+" and QEMU "+string(c.QEMU)); err != nil {
		return err
	}
	if orig.Request.KernelSrc != "" && orig.Request.KernelSrc != b.kernelSrc && !flagSet(fs, "kernel-src") {
		b.kernelSrc = orig.Request.KernelSrc
	}
	if _, err := os.Stat(b.kernelSrc); err != nil {
		return fmt.Errorf("kernel tree of the recorded cell: %w (pass --kernel-src)", err)
	}
	log := newLogger(stderr, b.verbose)
	if *runID == "" {
		*runID = "repro-" + newRunID()
	}
	fmt.Fprintf(stdout, "repro of %s (%s: %s)\n", dir, orig.Verdict, orig.Title())
	err = runOne(ctx, log, b.env(log, repo), *out, *runID, c, stdout)
	if r, rerr := results.ReadResult(filepath.Join(*out, *runID, c.Name, results.ResultFile)); rerr == nil {
		if orig.Kernel.ConfigSHA256 != "" && r.Kernel.ConfigSHA256 != orig.Kernel.ConfigSHA256 {
			fmt.Fprintf(stdout, "note: the kernel .config differs from the recorded one (%.12s, was %.12s): the tree or fragments changed\n",
				r.Kernel.ConfigSHA256, orig.Kernel.ConfigSHA256)
		}
		same := "differs from"
		if r.Verdict == orig.Verdict && r.Title() == orig.Title() {
			same = "matches"
		}
		fmt.Fprintf(stdout, "repro: %s: %s — %s the original (%s: %s)\n", r.Verdict, r.Title(), same, orig.Verdict, orig.Title())
	}
	return err
}

// reproCell rebuilds the runner cell a result records.
func reproCell(r results.Result) (runner.Cell, error) {
	q := r.Request
	if q == nil {
		return runner.Cell{}, errors.New("result.json has no request section (written by an fth older than repro)")
	}
	a, err := arch.Lookup(q.Arch)
	if err != nil {
		return runner.Cell{}, err
	}
	accel, err := qemu.ParseAccel(q.Accel)
	if err != nil {
		return runner.Cell{}, err
	}
	// Results from before --toolchain and --qemu have neither: the host's.
	tc, err := kbuild.ParseCompiler(q.Toolchain)
	if err != nil {
		return runner.Cell{}, fmt.Errorf("request.toolchain: %w", err)
	}
	emu, err := qemu.ParseEmulator(q.QEMU)
	if err != nil {
		return runner.Cell{}, fmt.Errorf("request.qemu: %w", err)
	}
	agent := make(map[string]string, len(q.AgentArgs)+1)
	for k, v := range q.AgentArgs {
		agent[k] = v
	}
	if _, ok := agent["seed"]; !ok && r.Seed != "" && r.Seed != "0" {
		agent["seed"] = r.Seed
	}
	// The scenario the cell ran: in its arguments since fth run writes
	// it there; a result from before, or a storm cell, has only the label.
	if _, ok := agent["scenario"]; !ok && q.Scenario != "" {
		agent["scenario"] = string(q.Scenario)
	}
	args, err := options.NewArgs(agent)
	if err != nil {
		return runner.Cell{}, fmt.Errorf("request.agent_args: %w", err)
	}
	return runner.Cell{
		Name: r.Cell, Arch: a, Fragments: q.Fragments, Preempt: q.Preempt,
		Agent: args, Accel: accel, CPUs: q.CPUs, MemoryMB: q.MemoryMB,
		Deadline: time.Duration(q.Deadline * float64(time.Second)), Silence: time.Duration(q.Silence * float64(time.Second)),
		Widen:     qemu.Widening{Singlestep: q.Singlestep, Icount: q.Icount},
		Patches:   cellPatches(q.Patches),
		Toolchain: tc, QEMU: emu,
		KernelArgs: q.KernelArgs,
	}, nil
}

func cellPatches(ps []results.RequestPatch) []kbuild.Patch {
	var out []kbuild.Patch
	for _, p := range ps {
		out = append(out, kbuild.Patch{Name: p.Name, Text: []byte(p.Text)})
	}
	return out
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
