package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/options"
)

// cmdRace is `fth race --list-windows`: one boot of the race scenario
// that decodes every target's window from the running kernel and injects
// nothing, then the windows as a list. The injections themselves run as
// fth run --agent-arg scenario=race, or in the default campaign.
func cmdRace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("race")
	var (
		list      = fs.Bool("list-windows", false, "boot the kernel, decode every race target's window (the instructions a held task is preempted at, one injection each) and list them; nothing is injected")
		archName  = fs.String("arch", "x86_64", "target architecture: x86_64, arm64, riscv64, ppc64le")
		target    = fs.String("target", "auto", "race targets to list (the racetarget agent option): auto is every target the arch has")
		out       = fs.String("out", "out/runs", "directory for run results")
		runID     = fs.String("run-id", "", "run id (default: windows- plus a time stamp)")
		fragments = fs.String("fragments", "", "comma-separated fragments (see fth run)")
		kernel    = fs.String("kernel", "", "Debian kernel series instead of the default tree (see fth run)")
		qemuFlag  = fs.String("qemu", "", "QEMU that boots the cell (see fth run)")
	)
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth race --list-windows [--arch A]",
		About: "Lists the race scenario's windows as the running kernel has them: for each\ntarget (a BPF trampoline, x86's ftrace_ops trampoline, a callsite), every\ninstruction a task passes through, read through QEMU's gdbstub and decoded.\nThe injections run as fth run --agent-arg scenario=race, and in the default\ncampaign.",
	}); err != nil {
		return err
	}
	if !*list {
		return fmt.Errorf("%w: fth race: --list-windows is its only mode; injections run as fth run --agent-arg scenario=race", errUsage)
	}
	if *runID == "" {
		*runID = "windows-" + time.Now().Format("20060102-150405")
	}
	runArgs := []string{"--arch", *archName, "--out", *out, "--run-id", *runID,
		"--agent-arg", "scenario=race", "--agent-arg", "racelist=true", "--agent-arg", "racetarget=" + *target}
	for flag, v := range map[string]string{"--fragments": *fragments, "--kernel": *kernel, "--qemu": *qemuFlag} {
		if v != "" {
			runArgs = append(runArgs, flag, v)
		}
	}
	// fth run's own table says nothing of windows: the list replaces it.
	if err := cmdRun(ctx, runArgs, io.Discard, stderr); err != nil {
		return err
	}
	cells, err := filepath.Glob(filepath.Join(*out, *runID, "*", results.ResultFile))
	if err != nil || len(cells) != 1 {
		return fmt.Errorf("fth race: want one cell's %s under %s, found %d (%v)", results.ResultFile, filepath.Join(*out, *runID), len(cells), err)
	}
	r, err := results.ReadResult(cells[0])
	if err != nil {
		return err
	}
	if len(r.Windows) == 0 {
		return errors.New("fth race: the agent reported no window")
	}
	printWindows(stdout, r)
	fmt.Fprintf(stdout, "\nresults: %s\n", filepath.Dir(cells[0]))
	return nil
}

// printWindows lists each window: a line per target, then its
// instructions.
func printWindows(w io.Writer, r results.Result) {
	for i, win := range r.Windows {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if win.Unreachable != "" {
			fmt.Fprintf(w, "%s (%s): unreachable: %s\n", win.Target, win.Symbol, win.Unreachable)
			continue
		}
		fmt.Fprintf(w, "%s (%s at %s, %s, kernel %s): %d instructions × %d action(s) (%s)\n",
			win.Target, win.Symbol, win.Addr, win.Arch, r.Kernel.Release, len(win.Insns), len(win.Actions), strings.Join(win.Actions, ", "))
		if slices.Contains(win.Actions, options.RaceReplace) {
			// The catalogue's direct-modify window has no target of its
			// own: it is this one raced by replace.
			fmt.Fprintf(w, "  (%s is the direct-modify window: the direct call moves to a new image while the task is held in this one)\n", options.RaceReplace)
		}
		for _, in := range win.Insns {
			fmt.Fprintf(w, "  +%#-5x %s\n", in.Off, in.Asm)
		}
	}
	if len(r.Windows) == 0 {
		return
	}
	// The window kinds this arch has none of, and why: the catalogue
	// says what it cannot reach, not only what it can.
	goarch := r.Windows[0].Arch
	first := true
	for _, t := range options.AllRaceTargets {
		err := options.CheckRaceTargets(t, goarch)
		if err == nil {
			continue
		}
		if first {
			fmt.Fprintf(w, "\nnot on %s:\n", goarch)
			first = false
		}
		fmt.Fprintf(w, "  %s: %v\n", t, err)
	}
}
