package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every bad input a developer has typed gets exit 3 and a message naming
// it, in well under a second: before any kernel source is opened, let alone
// a build (--kernel-src points nowhere and --cache is empty, so an input
// that slipped through would fail differently, with exit 2).
func TestBadInputsFailFastWithUsage(t *testing.T) {
	none := filepath.Join(t.TempDir(), "no-such-tree")
	cache := t.TempDir()
	fthRun := func(args ...string) []string {
		return append([]string{"run", "--kernel-src", none, "--cache", cache}, args...)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"negative n", fthRun("--n", "-5"), `--n -5: want "all" or an integer >= 0`},
		{"n not a number", fthRun("--n", "abc"), "--n abc"},
		{"no vCPUs", fthRun("--cpus", "0"), "--cpus 0: want 1 to 64 vCPUs"},
		{"too little memory", fthRun("--mem", "16"), "--mem 16"},
		{"zero deadline", fthRun("--deadline", "0s"), "--deadline 0s: want a duration > 0"},
		{"zero silence is no fake hang", fthRun("--silence", "0s"), "--silence 0s: want a duration > 0"},
		{"silence past the deadline", fthRun("--silence", "10m", "--deadline", "5m"), "must be shorter than --deadline"},
		{"unknown preemption model", fthRun("--preempt", "bogus"), `--preempt "bogus": want none, voluntary, full, lazy`},
		{"preemption model typo", fthRun("--preempt", "ful"), "did you mean full?"},
		{"unknown scenario", fthRun("--agent-arg", "scenario=bogus"), `--agent-arg scenario=bogus: want "storm", "churn", "bench", "race", "campaign", "repro" or "standalone"`},
		{"unknown agent option", fthRun("--agent-arg", "bogus=1"), `the agent has no option "bogus"`},
		{"agent option typo", fthRun("--agent-arg", "hott=4"), "did you mean hot?"},
		{"hot set of zero", fthRun("--agent-arg", "hot=0"), "--agent-arg hot=0: want an integer from 1 to"},
		{"a mode is no agent option", fthRun("--agent-arg", "kmsgstream=true"), `the agent has no option "kmsgstream"`},
		{"bad crash mode", fthRun("--crash", "oops"), "--crash oops"},
		{"negative hold", fthRun("--hold", "-1s"), "--hold -1s"},
		{"bad accelerator", fthRun("--accel", "fast"), "--accel"},
		{"a word instead of --arch", fthRun("riscv64"), `unexpected argument "riscv64"; did you mean --arch riscv64?`},
		{"flags after a word are not dropped", fthRun("riscv64", "--n", "-5"), `unexpected argument "riscv64"`},
		{"kernel's ARCH name", fthRun("--arch", "riscv"), "did you mean --arch riscv64?"},
		{"uname's name", fthRun("--arch", "aarch64"), "did you mean --arch arm64?"},
		{"Debian's name", fthRun("--arch", "ppc64el"), "did you mean --arch ppc64le?"},
		{"misspelt flag", fthRun("--seeed", "4"), "did you mean --seed?"},
		{"misspelt command", []string{"rnu"}, `unknown command "rnu"; did you mean "run"?`},
		{"help for an unknown command", []string{"help", "nosuch"}, `unknown command "nosuch"`},
		{"help for a misspelt command", []string{"help", "mutat"}, `unknown command "mutat"; did you mean "mutate"?`},
		{"matrix --list checks agent options too", []string{"matrix", "--list", "--kernel-src", none, "--agent-arg", "hot=0"}, "hot=0: want an integer from 1"},
		{"mutate needs a cell at a time at least", []string{"mutate", "--parallel", "0"}, "--parallel 0: want 1 or more"},
		{"mutate refuses a guest too small to boot", []string{"mutate", "--mem", "10"}, "--mem 10: want 256 to 65536 MiB"},
		{"matrix refuses --arch with the reason", []string{"matrix", "--arch", "x86_64"}, "fth matrix takes --arches"},
		{"matrix checks boot bounds", []string{"matrix", "--list", "--kernel-src", none, "--cpus", "0"}, "--cpus 0"},
		{"soak scenario", []string{"soak", "--target", "ssh://root@127.0.0.1:1", "--scenario", "bogus"}, `unknown scenario "bogus"`},
		{"soak has no race", []string{"soak", "--target", "ssh://root@127.0.0.1:1", "--scenario", "race"}, "a board does not have"},
		{"soak has no race by agent-arg", []string{"soak", "--target", "ssh://root@127.0.0.1:1", "--agent-arg", "scenario=race"}, "a board does not have"},
		{"soak has no --arch", []string{"soak", "--target", "ssh://root@127.0.0.1:1", "--arch", "x86_64"}, "the board's uname -m picks the arch"},
		{"soak agent options", []string{"soak", "--target", "ssh://root@127.0.0.1:1", "--agent-arg", "hot=0"}, "hot=0: want an integer from 1"},
		{"repro has no --fragments", []string{"repro", "--fragments", "base", "x"}, "come from the recorded cell"},
		{"image has no --fragments", []string{"image", "--fragments", "base"}, "does not depend on the kernel's fragments"},
		{"bench needs a name", []string{"bench"}, "name a benchmark"},
		{"unknown toolchain", fthRun("--toolchain", "gcc-13"), `--toolchain: unknown toolchain "gcc-13": choose one of default, host, gcc-12, gcc-14, clang-19, clang-21`},
		{"unknown QEMU", fthRun("--qemu", "9.0"), `--qemu: unknown QEMU "9.0": choose one of default, host, 7.2, 11.1`},
		{"build checks its toolchain", []string{"build", "--kernel-src", none, "--toolchain", "clang"}, `unknown toolchain "clang"`},
		{"matrix checks its toolchains", []string{"matrix", "--list", "--kernel-src", none, "--toolchain", "host,gcc-13"}, `--toolchain: unknown toolchain "gcc-13"`},
		{"matrix checks its QEMUs", []string{"matrix", "--list", "--kernel-src", none, "--qemu", "host,12"}, `--qemu: unknown QEMU "12"`},
		{"repro has no --toolchain", []string{"repro", "--toolchain", "gcc-14", "x"}, "the toolchain comes from the recorded cell"},
		{"bench cell checks its flags", []string{"bench", "cell", "--nope"}, "flag provided but not defined"},
		{"bisect needs its ends", []string{"bisect", "--from", "x"}, "say what to bisect"},
		{"bisect needs both ends", []string{"bisect", "--good", "v7.3", "--kernel-src", none, "--from", "x"}, "give both --good and --bad"},
		{"bisect: commits or releases", []string{"bisect", "--good", "a", "--bad", "b", "--kernels", "6.12,7.3", "--from", "x"}, "give one or the other"},
		{"bisect needs a test", []string{"bisect", "--kernels", "6.12,7.3"}, "say what the test is"},
		{"bisect: one test", []string{"bisect", "--kernels", "6.12,7.3", "--from", "x", "--", "--arch", "x86_64"}, "give one"},
		{"bisect chooses the tree", []string{"bisect", "--kernels", "6.12,7.3", "--", "--kernel-src", none}, "the bisection chooses the tree"},
		{"bisect threshold", []string{"bisect", "--kernels", "6.12,7.3", "--from", "x", "--threshold", "1.5"}, "--threshold 1.5: want a probability"},
		{"bisect cap below the failures", []string{"bisect", "--kernels", "6.12,7.3", "--from", "x", "--max-runs", "1"}, "--max-runs 1"},
		{"bisect one release", []string{"bisect", "--kernels", "7.3", "--from", "x"}, "want at least two series"},
		{"bisect not a git tree", []string{"bisect", "--good", "a", "--bad", "b", "--kernel-src", none, "--from", "x"}, "not a git tree"},
		{"bisect from no cell", []string{"bisect", "--kernels", "6.12,7.3", "--from", none}, "is not a cell directory"},
		{"verify: a reproducer of another arch", []string{"verify", "--findings", "5", "--arches", "x86_64"}, "finding 5's reproducer is for ppc64le"},
		{"bisect run flags are checked", []string{"bisect", "--kernels", "6.12,7.3", "--", "--arch", "x86_64", "--agent-arg", "scenario=race", "--cpus", "0"}, "--cpus 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			start := time.Now()
			err := run(t.Context(), tt.args, &stdout, &stderr)
			code := exitCode(err, &stderr)
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("took %s: a bad input must fail before any work", d)
			}
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("fth %s: exit %d, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, stderr.String(), exitUsage, tt.want)
			}
			if lines := strings.Count(stderr.String(), "\n"); lines > 3 {
				t.Errorf("a usage error of %d lines: say what is wrong, not every flag:\n%s", lines, stderr.String())
			}
		})
	}
}

// Help is on stdout with exit 0, starts with how the command is called,
// and lists only flags the command honours.
func TestHelpOnStdout(t *testing.T) {
	tests := []struct {
		args    []string
		want    []string
		wantNot []string
	}{
		{[]string{"run", "-h"}, []string{"usage: fth run [flags]", "-agent-arg", "-arch", "-kernel-src"}, nil},
		{[]string{"run", "--help"}, []string{"usage: fth run"}, nil},
		{[]string{"help", "run"}, []string{"usage: fth run"}, nil},
		{[]string{"help"}, []string{"commands:", "matrix"}, nil},
		{[]string{"soak", "-h"}, []string{"usage: fth soak", "-target"}, []string{"  -arch", "  -fragments", "  -kernel-src", "  -j "}},
		{[]string{"image", "-h"}, []string{"usage: fth image", "-arch"}, []string{"  -fragments", "  -kernel-src", "  -j "}},
		{[]string{"repro", "-h"}, []string{"usage: fth repro", "-kernel-src"}, []string{"  -arch", "  -fragments"}},
		{[]string{"matrix", "-h"}, []string{"usage: fth matrix", "-arches", "variants:"}, []string{"  -arch ", "  -fragments"}},
		{[]string{"triage", "-h"}, []string{"usage: fth triage", "-json"}, nil},
		{[]string{"bench", "-h"}, []string{"usage: fth bench", "cell", "widening"}, nil},
		{[]string{"run", "--agent-arg", "help"}, []string{"agent options", "scenario", "hot"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != exitPass {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(stdout.String(), w) {
					t.Errorf("help lists %q, which the command does not honour:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// The general help lists every command run dispatches, however it is
// asked for: both come from commandTable.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), args, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != exitPass {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			names := commandNames()
			if !slices.Contains(names, "mutate") {
				t.Errorf("no mutate in the command table: %v", names)
			}
			for _, name := range names {
				if !strings.Contains(stdout.String(), "\n  "+name+" ") {
					t.Errorf("fth %s does not list %q:\n%s", strings.Join(args, " "), name, stdout.String())
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{arg}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(stdout.String(), "fth ") || !strings.Contains(stdout.String(), "go1.") {
			t.Errorf("fth %s printed %q", arg, stdout.String())
		}
	}
}

// `fth triage LOG --json` once read --json as a file name.
func TestTriageFlagsAfterLogs(t *testing.T) {
	log := filepath.Join(t.TempDir(), "console.log")
	if err := os.WriteFile(log, []byte("[    0.000000] Linux version 7.3.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"triage", log, "--json"}, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != exitPass {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if strings.TrimSpace(stdout.String()) != "[]" {
		t.Errorf("stdout = %q, want the JSON of no findings", stdout.String())
	}
}

func TestClosest(t *testing.T) {
	for _, tt := range []struct {
		in   string
		cand []string
		want string
		ok   bool
	}{
		{"riscv", []string{"x86_64", "arm64", "riscv64", "ppc64le"}, "riscv64", true},
		{"seeed", []string{"seed", "silence"}, "seed", true},
		{"rnu", []string{"run", "repro", "report"}, "run", true},
		{"zzz", []string{"run", "repro"}, "", false},
	} {
		got, ok := closest(tt.in, tt.cand)
		if got != tt.want || ok != tt.ok {
			t.Errorf("closest(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// A toolchain or QEMU from the toolchain root, with no root built, fails
// at once and says how to build it (an error, not a usage error).
func TestMissingRootSaysMakeDeps(t *testing.T) {
	t.Setenv("FTH_ROOTS", t.TempDir())
	for _, args := range [][]string{
		{"build", "--toolchain", "gcc-14"},
		{"run", "--qemu", "11.1", "--dry-run"},
		{"matrix", "--list", "--toolchain", "host,clang-21"},
	} {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		err := run(t.Context(), args, &stdout, &stderr)
		code := exitCode(err, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), "run make deps (or bash scripts/toolroot.sh)") {
			t.Errorf("fth %s: exit %d, stderr %q; want %d and how to build the root", strings.Join(args, " "), code, stderr.String(), exitError)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("fth %s took %s: the root is checked before any work", strings.Join(args, " "), d)
		}
	}
}
