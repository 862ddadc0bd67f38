package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/kbuild"

	"github.com/ftrace-harness/fth/results"
)

func TestMatrixVerdictExitCodes(t *testing.T) {
	row := func(v results.Verdict) results.CellSummary {
		return results.CellSummary{Cell: "c-" + string(v), Verdict: v}
	}
	tests := []struct {
		name  string
		cells []results.CellSummary
		want  int
	}{
		{"all pass", []results.CellSummary{row(results.Pass), row(results.Pass)}, exitPass},
		{"skips are not errors", []results.CellSummary{row(results.Pass), row(results.Skip)}, exitPass},
		{"a failure", []results.CellSummary{row(results.Pass), row(results.Fail)}, exitFail},
		{"a failure outranks errors", []results.CellSummary{row(results.Error), row(results.Fail)}, exitFail},
		{"an error and no failure", []results.CellSummary{row(results.Pass), row(results.Error)}, exitError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := exitCode(matrixVerdict(results.Summary{Cells: tt.cells}, nil), &stderr); got != tt.want {
				t.Errorf("exit %d, want %d (%s)", got, tt.want, stderr.String())
			}
		})
	}
}

func TestMatrixUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--arch", "x86_64"}, "fth matrix takes --arches"},
		{[]string{"--fragments", "base"}, "define your own variant in a --file"},
		{[]string{"--arches", "x86_64,vax"}, `unknown architecture "vax"`},
		{[]string{"--variants", "lazy,fast"}, `unknown variant "fast": choose default, all, or one of direct-calls-full`},
		{[]string{"--file", "/nonexistent/m.yaml"}, "--file"},
		{[]string{"--parallel", "0"}, "--parallel 0"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--kernel", "7.3,latest"}, `--kernel "latest": want Debian kernel series`},
		{[]string{"--kernel", "7.3,7.3"}, "--kernel: 7.3 given twice"},
		{[]string{"--kernel", "7.3", "--kernel-src", "/tmp"}, "--kernel 7.3 and --kernel-src /tmp both name trees"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"matrix"}, tt.args...), &stdout, &stderr)
			if code := exitCode(err, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tt.want)
			}
		})
	}
}

// --list resolves every cell against the real tree and runs nothing.
func TestMatrixList(t *testing.T) {
	src := os.Getenv("KERNEL_SRC")
	if src == "" {
		src = defaultKernelSrc
	}
	if _, err := os.Stat(src + "/Kconfig"); err != nil {
		t.Skipf("no kernel tree at %s", src)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"matrix", "--list", "--kernel-src", src, "--arches", "x86_64,riscv64", "--variants", "default,none"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"matrix: 4 cells on Linux 7.3.4, 2 to run, 2 skipped",
		"x86_64-direct-calls-full run base + arch/x86_64 + ftrace/direct-calls + preempt/full (preempt: full)",
		// riscv64's default QEMU is 11.1 (the arch row), which its cells' names say.
		"riscv64-none-qemu-11.1 skip PREEMPT_NONE is not selectable on riscv64 in Linux 7.3.4",
	} {
		if !strings.Contains(spaced(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --kernel is an axis: every cell on each series, named after it, with
// what a version is not asked for (kconfigs/versions) in the plan.
func TestMatrixKernelAxisList(t *testing.T) {
	for _, s := range []string{"7.3", "6.12"} {
		if _, err := os.Stat("/var/cache/fth/src/linux-source-" + s + "/.fth-unpacked"); err != nil {
			t.Skipf("linux-source-%s is not unpacked (make deps)", s)
		}
	}
	// Debian's 6.12 moves on (6.12.117, then 6.12.118): the tree's own.
	src612, err := kbuild.ReadSource("/var/cache/fth/src/linux-source-6.12")
	if err != nil {
		t.Fatal(err)
	}
	v612 := src612.Version
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"matrix", "--list", "--kernel", "7.3,6.12", "--arches", "x86_64,riscv64"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"matrix: 4 cells on Linux 7.3.4, " + v612 + ", 3 to run, 1 skipped",
		"x86_64-direct-calls-full-linux-7.3 run",
		"x86_64-direct-calls-full-linux-6.12 run",
		"not asked: CONFIG_FPROBE=y (ftrace/direct-calls:10) is asked only from Linux 6.14",
		"riscv64-call-ops-full-qemu-11.1-linux-6.12 skip DYNAMIC_FTRACE_WITH_CALL_OPS is not selectable on riscv64 in Linux " + v612,
	} {
		if !strings.Contains(spaced(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "not asked:"); n != 1 {
		t.Errorf("%d not-asked lines, want 1 (x86_64 on 6.12):\n%s", n, out)
	}
}

// spaced collapses the runs of spaces a table aligns its columns with.
func spaced(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

// TestVerdictsErr: the one rule every command that runs cells exits by
// (run, matrix, soak): skip is a pass, a failure outranks everything, an
// unjudged cell is exit 2, for one cell as for many.
func TestVerdictsErr(t *testing.T) {
	one := func(v results.Verdict) []cellVerdict { return []cellVerdict{{cell: "c", verdict: v, reason: "why"}} }
	tests := []struct {
		name  string
		cells []cellVerdict
		want  int
		say   string
	}{
		{"pass", one(results.Pass), exitPass, ""},
		{"skip", one(results.Skip), exitPass, ""},
		{"fail", one(results.Fail), exitFail, "c: why"},
		{"error", one(results.Error), exitError, "c: why (error)"},
		{"running", one(results.Running), exitError, "(running)"},
		{"fail outranks error", append(one(results.Error), cellVerdict{cell: "d", verdict: results.Fail}), exitFail, "1 of 2 cells failed: d"},
		{"error among passes", append(one(results.Error), cellVerdict{cell: "d", verdict: results.Pass}), exitError, "1 of 2 cells could not reach a verdict"},
		{"none", nil, exitPass, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := verdictsErr(tt.cells)
			if got := exitCode(err, &stderr); got != tt.want || !strings.Contains(stderr.String(), tt.say) {
				t.Errorf("exit %d %q, want %d saying %q", got, stderr.String(), tt.want, tt.say)
			}
		})
	}
}
