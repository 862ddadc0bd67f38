package kbuild

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testBuilder(t *testing.T) *builder {
	return &builder{req: Request{Source: Source{Dir: t.TempDir()}, CacheDir: t.TempDir()}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// A failed step comes back as a BuildError holding the tail of the output,
// which is what a developer needs to see the compiler's complaint.
func TestRunFailureCarriesTail(t *testing.T) {
	b := testBuilder(t)
	script := "for i in $(seq 1 100); do echo \"  CC      kernel/f$i.o\"; done; echo 'kernel/f100.c:3:1: error: expected ; before }' >&2; exit 2"
	_, err := b.run(t.Context(), "make bzImage", "sh", []string{"-c", script}, nil)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("err = %v, want a BuildError", err)
	}
	if len(be.Tail) != tailLines {
		t.Errorf("tail has %d lines, want %d", len(be.Tail), tailLines)
	}
	msg := be.Error()
	for _, want := range []string{"make bzImage failed", "error: expected ; before }", "CC      kernel/f100.o"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "kernel/f1.o\n") {
		t.Error("error holds the whole output, not its tail")
	}
}

func TestRunReportsProgress(t *testing.T) {
	b := testBuilder(t)
	var got []Progress
	// Progress is throttled to one call per 5 s, so the run must outlast that.
	script := "echo '  CC      kernel/a.o'; sleep 5.2; echo '  LD      vmlinux'; echo '  BTF     .btf.vmlinux.bin.o'"
	steps, err := b.run(t.Context(), "make", "sh", []string{"-c", script}, func(p Progress) { got = append(got, p) })
	if err != nil {
		t.Fatal(err)
	}
	if steps != 3 {
		t.Errorf("run counted %d steps, want 3", steps)
	}
	if len(got) == 0 {
		t.Fatal("no progress reported")
	}
	if p := got[len(got)-1]; p.Steps < 2 || p.Current != "LD vmlinux" || p.Elapsed < 5*time.Second {
		t.Errorf("last progress = %+v, want ≥2 steps at LD vmlinux after ≥5s", p)
	}
}

func TestRunCancelKillsGroup(t *testing.T) {
	b := testBuilder(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The child sleeps in a grandchild process: cancelling must reach it too,
	// or Wait would block for the full minute.
	_, err := b.run(ctx, "make", "sh", []string{"-c", "sleep 60 & wait"}, nil)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("err = %v, want an interruption", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("cancel took %s", d)
	}
}

// The step counts a build records are what the next build of the same arch
// shows its percentage against; other arches', unrecorded and patched
// builds (a few files recompiled) are not.
func TestPreviousStepsTakesNewestBuildOfArch(t *testing.T) {
	cache := t.TempDir()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range []Kernel{
		{Arch: "riscv64", Key: "old", BuiltAt: at, BuildSteps: map[string]int{"Image": 100}},
		{Arch: "riscv64", Key: "new", BuiltAt: at.Add(time.Hour), BuildSteps: map[string]int{"Image": 4321, "modules": 12}},
		{Arch: "riscv64", Key: "newer-but-unrecorded", BuiltAt: at.Add(2 * time.Hour)},
		// A patched build recompiles a few files of a copy of its base.
		{Arch: "riscv64", Key: "newer-but-patched", BuiltAt: at.Add(2 * time.Hour), Patches: []string{"fix.patch"}, BuildSteps: map[string]int{"Image": 7}},
		{Arch: "x86_64", Key: "other-arch", BuiltAt: at.Add(3 * time.Hour), BuildSteps: map[string]int{"Image": 9}},
	} {
		entry := filepath.Join(cache, "kernels", string(k.Arch)+"-"+k.Key)
		if err := os.MkdirAll(entry, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeManifest(entry, k); err != nil {
			t.Fatal(err)
		}
	}
	got := previousSteps(cache, "riscv64")
	if got["Image"] != 4321 || got["modules"] != 12 {
		t.Errorf("previousSteps = %v, want the 'new' entry's counts", got)
	}
	if got := previousSteps(t.TempDir(), "riscv64"); got != nil {
		t.Errorf("previousSteps of an empty cache = %v, want nil", got)
	}
}

// make() labels progress with its target and the previous build's count for
// it, and records its own count for the next build.
func TestMakeReportsTotalsAndRecordsSteps(t *testing.T) {
	b := testBuilder(t)
	bin := t.TempDir()
	// A stand-in for make that prints three kbuild lines.
	script := "#!/bin/sh\necho '  CC      a.o'; echo '  CC      b.o'; echo '  LD      vmlinux'\n"
	if err := os.WriteFile(filepath.Join(bin, "make"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	b.prevSteps, b.steps = map[string]int{"Image": 6}, map[string]int{}
	var got []Progress
	b.req.Progress = func(p Progress) { got = append(got, p) }
	if err := b.make(t.Context(), "Image"); err != nil {
		t.Fatal(err)
	}
	if b.steps["Image"] != 3 {
		t.Errorf("recorded steps = %v, want Image: 3", b.steps)
	}
	for _, p := range got {
		if p.Target != "Image" || p.Total != 6 {
			t.Errorf("progress = %+v, want target Image and total 6", p)
		}
	}
}
