package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/wire/event"
)

func TestWatchStdinStopsOnEOF(t *testing.T) {
	r, w := io.Pipe()
	ctx, cancel, gone := watchStdin(t.Context(), r)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("stopped while stdin was still open")
	case <-gone:
		t.Fatal("gone while stdin was still open")
	case <-time.After(50 * time.Millisecond):
	}
	w.Close() // the SSH session dropped
	for _, c := range []<-chan struct{}{gone, ctx.Done()} {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatal("did not stop on stdin EOF")
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestSessionWriterDeliversEverythingBeforeClose(t *testing.T) {
	var out lockedBuffer
	w := newSessionWriter(&out, make(chan struct{}), nil)
	var want strings.Builder
	for i := range 100 {
		line := strings.Repeat("x", i) + "\n"
		want.WriteString(line)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if out.String() != want.String() {
		t.Errorf("got %d bytes, want %d in order", len(out.String()), want.Len())
	}
	if _, err := w.Write([]byte("late")); err == nil {
		t.Error("a write after Close succeeded")
	}
}

// The output pipe of a dropped session that nobody reads: writes block in
// the goroutine, but Write and Close return once the session is gone.
func TestSessionWriterNeverBlocksOnceGone(t *testing.T) {
	pr, pw := io.Pipe() // never read
	defer pr.Close()
	gone := make(chan struct{})
	w := newSessionWriter(pw, gone, nil)
	w.Write([]byte("taken by the goroutine, which now blocks\n"))
	returned := make(chan struct{})
	go func() {
		w.Write([]byte("blocks until the session is gone\n"))
		w.Write([]byte("dropped\n"))
		w.Close()
		close(returned)
	}()
	select {
	case <-returned:
		t.Fatal("Write returned while the session was up and the pipe full")
	case <-time.After(50 * time.Millisecond):
	}
	close(gone)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Write or Close still blocked after the session was gone")
	}
}

// The soak's kernel log stream on a board: records are copied as they come,
// and a dropped session ends the stream even though its output pipe is
// full and never read; the board's log says why, and the orphan guard is
// armed.
func TestKmsgStreamEndsWithTheSession(t *testing.T) {
	var f fakeSystem
	sys := f.system(t, 1234)
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sys.kmsgPath = fifo
	stdinR, stdinW := io.Pipe()
	sys.stdin = stdinR
	outR, outW := io.Pipe()
	sys.stdout = outW
	done := make(chan error, 1)
	go func() { done <- run(t.Context(), []string{"kmsgstream"}, sys) }()

	kw, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Close()
	rec := "6,1520,41301822,-;ftrace_ops: Attempted 100000 calls to tracee_relevant [ftrace_ops] in 1523411ns (15ns / call)\n"
	if _, err := kw.WriteString(rec); err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("%s%d\n", event.KmsgStreamPIDPrefix, sys.pid)
	got := make([]byte, len(first)+len(rec))
	if _, err := io.ReadFull(outR, got); err != nil || string(got) != first+rec {
		t.Fatalf("stream gave %q, %v; want the record %q", got, err, rec)
	}
	// From here nobody reads the output: the session is about to drop.
	for range 3 {
		kw.WriteString(rec)
	}
	select {
	case err := <-done:
		t.Fatalf("the stream ended while the session was up: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v, want nil when the session ends", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived its session")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		lines, exits := append([]string(nil), f.kmsgLines...), append([]int(nil), f.exits...)
		f.mu.Unlock()
		if len(exits) > 0 {
			if len(lines) != 1 || !strings.Contains(lines[0], "session is gone") || exits[0] != 3 {
				t.Errorf("kernel log %q, exits %v: want the reason logged, then exit 3", lines, exits)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan guard never fired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Asked to stop (SIGTERM) with the session half open and its pipe full:
// writes give up after stopPatience, so the clean-up is not held up.
func TestSessionWriterGivesUpOnceAskedToStop(t *testing.T) {
	pr, pw := io.Pipe() // never read
	defer pr.Close()
	stop := make(chan struct{})
	w := newSessionWriter(pw, make(chan struct{}), stop)
	w.Write([]byte("taken by the goroutine, which now blocks\n"))
	close(stop)
	t0 := time.Now()
	w.Write([]byte("waits stopPatience, then is dropped\n"))
	if d := time.Since(t0); d < stopPatience/2 || d > stopPatience+2*time.Second {
		t.Errorf("the write after stop took %s, want about %s", d, stopPatience)
	}
	t0 = time.Now()
	w.Write([]byte("dropped at once\n"))
	w.Close()
	if d := time.Since(t0); d > time.Second {
		t.Errorf("a write and Close after giving up took %s", d)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// A failed write must reach the callers as an error, with no deadlock
// between them and the writing goroutine.
func TestSessionWriterReportsWriteErrors(t *testing.T) {
	w := newSessionWriter(failingWriter{}, make(chan struct{}), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := w.Write([]byte("x\n")); err != nil {
					errs <- err
				}
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); w.Close(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
		t.Fatal("writers or Close deadlocked after a write error")
	}
	if len(errs) == 0 {
		t.Error("no writer saw the write error")
	}
}

// The agent's modes are subcommands, not scenario options.
func TestSplitMode(t *testing.T) {
	tests := []struct {
		args     []string
		mode     string
		restArgs int
	}{
		{[]string{"kmsgstream"}, modeKmsgStream, 0},
		{[]string{"session", "-scenario=churn"}, modeSession, 1},
		{[]string{"board"}, modeBoard, 0},
		{[]string{"-scenario=churn"}, modeRun, 1},
		{nil, modeRun, 0},
	}
	for _, tt := range tests {
		mode, rest := splitMode(tt.args)
		if mode != tt.mode || len(rest) != tt.restArgs {
			t.Errorf("splitMode(%q) = %q, %q; want %q with %d args", tt.args, mode, rest, tt.mode, tt.restArgs)
		}
	}
	for cmdline, want := range map[string]bool{"console=ttyS0 fth.board=1": true, "fth.board": true, "fth.board=0": false, "fth.n=5": false} {
		if got, _ := boardFromCmdline([]byte(cmdline)); got != want {
			t.Errorf("boardFromCmdline(%q) = %v, want %v", cmdline, got, want)
		}
	}
	if _, addr := boardFromCmdline([]byte("fth.board=1 fth.boardaddr=192.168.7.2/24")); addr != "192.168.7.2/24" {
		t.Errorf("boardaddr = %q", addr)
	}
}

// An option given to the kmsgstream mode is an error, never a stress run
// with the defaults.
func TestKmsgStreamBadOptionFails(t *testing.T) {
	var f fakeSystem
	sys := f.system(t, 1234)
	sys.stdin = strings.NewReader("")
	err := run(t.Context(), []string{"kmsgstream", "-nosuchoption=1"}, sys)
	if err == nil {
		t.Fatal("run accepted an option next to kmsgstream")
	}
	if strings.Contains(f.stdout.String(), `"kind":"hello"`) {
		t.Errorf("a stress run started: %s", f.stdout.String())
	}
}
