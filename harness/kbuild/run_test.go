package kbuild

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
	err := b.run(t.Context(), "make bzImage", "sh", []string{"-c", script}, nil)
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
	if err := b.run(t.Context(), "make", "sh", []string{"-c", script}, func(p Progress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
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
	err := b.run(ctx, "make", "sh", []string{"-c", "sleep 60 & wait"}, nil)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("err = %v, want an interruption", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("cancel took %s", d)
	}
}
