// Command fth is the ftrace-harness CLI: it builds kernels and initramfs images,
// boots them under QEMU, stresses ftrace and BPF trampolines in the guest, and
// records a verdict per cell.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ftrace-harness/fth/results"
)

// Exit codes. A failing kernel (1) is told apart from a harness or
// infrastructure error (2) and from bad usage (3).
const (
	exitPass  = 0
	exitFail  = 1
	exitError = 2
	exitUsage = 3
)

// errUsage marks errors caused by the command line.
var errUsage = errors.New("usage")

// errCellsFailed is returned when at least one cell's verdict is fail.
var errCellsFailed = errors.New("kernel failures found")

// cellVerdict is a cell's verdict and what it says, for verdictsErr.
type cellVerdict struct {
	cell    string
	verdict results.Verdict
	// reason is the cell's reason or title; empty for none.
	reason string
}

// verdictsErr is fth's one rule from cell verdicts to its exit code, for
// every command that runs cells (run, matrix, soak): a failed cell is a
// kernel failure (exit 1) and outranks everything; a cell that reached
// no verdict (error, or still running) is the harness's or the
// machine's (exit 2); pass and skip are neither (exit 0).
func verdictsErr(cells []cellVerdict) error {
	var failed, unjudged []string
	for _, c := range cells {
		say := c.cell
		if c.reason != "" {
			say += ": " + c.reason
		}
		switch c.verdict {
		case results.Pass, results.Skip:
		case results.Fail:
			failed = append(failed, say)
		default:
			unjudged = append(unjudged, fmt.Sprintf("%s (%s)", say, c.verdict))
		}
	}
	switch {
	case len(failed) > 0 && len(cells) == 1:
		return fmt.Errorf("%w: %s", errCellsFailed, failed[0])
	case len(failed) > 0:
		return fmt.Errorf("%w: %d of %d cells failed: %s", errCellsFailed, len(failed), len(cells), strings.Join(failed, "; "))
	case len(unjudged) > 0 && len(cells) == 1:
		return errors.New(unjudged[0])
	case len(unjudged) > 0:
		return fmt.Errorf("%d of %d cells could not reach a verdict (no kernel failures): %s", len(unjudged), len(cells), strings.Join(unjudged, "; "))
	}
	return nil
}

// usageHead and usageTail frame the command list, which usage builds from
// commandTable.
const usageHead = `fth: find bugs in Linux live code patching (ftrace, BPF trampolines)

usage: fth <command> [flags]

commands:
`

const usageTail = `
Run 'fth <command> -h' (or 'fth help <command>') for a command's flags, and
'fth --version' for the version. Exit codes: 0 pass, 1 a kernel failure (or
a regression, or a report found by triage), 2 an error, 3 bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitPass
	case errors.Is(err, flag.ErrHelp):
		return exitPass
	case errors.Is(err, errCellsFailed):
		fmt.Fprintln(stderr, "fth:", err)
		return exitFail
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "fth:", err)
		return exitUsage
	default:
		fmt.Fprintln(stderr, "fth:", err)
		return exitError
	}
}

// cmdFunc is one subcommand.
type cmdFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// command is one row of commandTable.
type command struct {
	name string
	// about is the help line; "\n" continues it on an indented line.
	about string
	fn    cmdFunc
}

// commandTable is every subcommand, in help order. run dispatches from it
// and usage lists it, so help cannot miss a command. (A function, not a
// var: the commands reach run, and run reads the table.)
func commandTable() []command {
	return []command{
		{"build", "build (or fetch from cache) a kernel for --arch from kconfig fragments", cmdBuild},
		{"image", "build (or fetch from cache) the guest initramfs for --arch", cmdImage},
		{"run", "build, boot under QEMU, run a scenario (the campaign by default), record a verdict", cmdRun},
		{"matrix", "run every arch × variant cell (skips what an arch cannot build), one summary", cmdMatrix},
		{"mutate", "the harness's bug-finding power: mutant kernels and the unmutated one,\ndetected / time to detect / title", cmdMutate},
		{"soak", "run a scenario for hours on a board over SSH (deploy, stream dmesg, survive reboots)", cmdSoak},
		{"boardvm", "boot a VM that stands in for an SSH board (sshd on 127.0.0.1:--port)", cmdBoardVM},
		{"bench", "side-by-side benchmarks: 'fth bench cell' (the default cell against a\nbaseline), 'fth bench widening' (cost of each race-widening mode)", cmdBench},
		{"race", "list the race scenario's windows as the running kernel has them (--list-windows)", cmdRace},
		{"bisect", "find the commit (or release) that made a finding appear, with a stated\nconfidence, in your git tree: fth bisect --good A --bad B --from <cell>", cmdBisect},
		{"repro", "run a recorded cell again (same kernel fragments, seed, boot flags, QEMU flags)", cmdRepro},
		{"verify", "run each finding's standalone reproducer without and with its fix, and its\ncontrol: one line per finding (unfixed k/n fixed k/n control k/n)", cmdVerify},
		{"triage", "find, title and symbolize every kernel report in one or more console logs", cmdTriage},
		{"report", "write report.html, junit.xml and summary.json for a run directory", cmdReport},
		{"compare", "compare two runs cell by cell; exit 1 on any regression", cmdCompare},
	}
}

// commands maps each subcommand to its function.
func commands() map[string]cmdFunc {
	m := map[string]cmdFunc{}
	for _, c := range commandTable() {
		m[c.name] = c.fn
	}
	return m
}

// usage is the general help: usageHead, a line per command, usageTail.
func usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, c := range commandTable() {
		for i, line := range strings.Split(c.about, "\n") {
			name := ""
			if i == 0 {
				name = c.name
			}
			fmt.Fprintf(&b, "  %-8s %s\n", name, line)
		}
	}
	b.WriteString(usageTail)
	return b.String()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("%w: no command given", errUsage)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "help", "-h", "--help", "-help":
		if len(rest) > 0 {
			if _, ok := commands()[rest[0]]; ok {
				return run(ctx, []string{rest[0], "-h"}, stdout, stderr)
			}
			if rest[0] != "help" {
				return unknownCommand(rest[0])
			}
		}
		fmt.Fprint(stdout, usage())
		return nil
	case "version", "--version", "-version", "-V":
		fmt.Fprintln(stdout, version())
		return nil
	}
	if f, ok := commands()[cmd]; ok {
		return f(ctx, rest, stdout, stderr)
	}
	return unknownCommand(cmd)
}

// unknownCommand is the usage error for a command fth does not have, with
// the closest one it does.
func unknownCommand(cmd string) error {
	hint := ""
	if s, ok := closest(strings.TrimLeft(cmd, "-"), commandNames()); ok {
		hint = fmt.Sprintf("; did you mean %q?", s)
	}
	return fmt.Errorf("%w: unknown command %q%s (run 'fth help' for the list)", errUsage, cmd, hint)
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
