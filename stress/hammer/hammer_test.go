package hammer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestCheckDetectsStalls(t *testing.T) {
	taskDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(taskDir, "102"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(taskDir, "102", "stack"), []byte("[<0>] schedule+0x1/0x2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	h := newHammer(Config{Threads: 3, Stall: 5 * time.Second, Emit: &emit.Memory{}, TaskDir: taskDir}, func() time.Time { return t0 })
	for i, th := range h.threads {
		th.tid.Store(int64(101 + i))
	}
	advance := func(th int, n uint64) { h.threads[th].iters.Add(n) }

	// t0+2s: everybody moved.
	advance(0, 10)
	advance(1, 20)
	advance(2, 30)
	l := h.check(t0.Add(2*time.Second), false)
	if l.Iterations != 60 || l.Threads != 3 || len(l.Stalled) != 0 {
		t.Fatalf("first check = %+v", l)
	}
	// t0+6s: thread 1 idle for 4s, below the bound.
	advance(0, 5)
	advance(2, 5)
	l = h.check(t0.Add(6*time.Second), false)
	if l.Iterations != 10 || len(l.Stalled) != 0 {
		t.Fatalf("second check = %+v", l)
	}
	// t0+8s: thread 1 idle 6s > 5s: stalled, with its stack.
	advance(0, 1)
	advance(2, 1)
	l = h.check(t0.Add(8*time.Second), false)
	if len(l.Stalled) != 1 {
		t.Fatalf("third check = %+v", l)
	}
	s := l.Stalled[0]
	if s.TID != 102 || s.For.Std() != 6*time.Second || !strings.Contains(s.Stack, "schedule") {
		t.Errorf("stalled = %+v", s)
	}
	// Thread 1 resumes: no longer stalled, but remembered.
	advance(1, 1)
	advance(0, 1)
	advance(2, 1)
	l = h.check(t0.Add(10*time.Second), false)
	if len(l.Stalled) != 0 || l.Iterations != 3 {
		t.Errorf("fourth check = %+v", l)
	}
	if st := h.Stalls(); st[102] != 6*time.Second || len(st) != 1 {
		t.Errorf("Stalls = %v", st)
	}
	// A thread that exited is never stalled; a final check blames a
	// live thread that did not move, whatever the bound.
	h.threads[0].exited.Store(true)
	l = h.check(t0.Add(11*time.Second), true)
	if len(l.Stalled) != 2 || l.Stalled[0].TID != 102 || l.Stalled[1].TID != 103 {
		t.Errorf("final check = %+v", l)
	}
	if l.Stalled[1].Stack != "" {
		t.Errorf("unreadable stack = %q, want empty", l.Stalled[1].Stack)
	}
}

func TestStartValidates(t *testing.T) {
	ctx := context.Background()
	m := &emit.Memory{}
	for _, cfg := range []Config{
		{Threads: 0, Stall: time.Second, Emit: m},
		{Threads: 1, Stall: 0, Emit: m},
		{Threads: 1, Stall: time.Second},
	} {
		if h, err := Start(ctx, cfg); err == nil {
			h.Stop()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

// TestRunAndStop runs real threads briefly. Everything it does (getpid,
// uname, reading its own /proc/self/stat, short sleeps, yielding, pinning
// its own threads) is harmless on any host.
func TestRunAndStop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs threads for half a second")
	}
	m := &emit.Memory{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := Start(ctx, Config{Threads: 2, Stall: 10 * time.Second, Seed: 7, Interval: 100 * time.Millisecond, Emit: m})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	final := h.Stop()
	if again := h.Stop(); again.Iterations != final.Iterations {
		t.Errorf("second Stop = %+v, want %+v", again, final)
	}
	if len(final.Stalled) != 0 || len(h.Stalls()) != 0 {
		t.Errorf("stalls on an idle host: %+v", final)
	}
	live := m.OfKind(event.KindLiveness)
	if len(live) < 2 {
		t.Fatalf("got %d Liveness events in 0.5s at 100ms", len(live))
	}
	var total uint64
	for _, e := range live {
		total += e.Liveness.Iterations
		if e.Liveness.Threads != 2 {
			t.Errorf("Threads = %d", e.Liveness.Threads)
		}
	}
	total += final.Iterations
	if total == 0 {
		t.Error("no iterations")
	}
	for _, th := range h.threads {
		if !th.exited.Load() || th.tid.Load() == 0 {
			t.Errorf("thread not started or not exited: tid %d", th.tid.Load())
		}
	}
}

func TestCancelStopsThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs threads")
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := Start(ctx, Config{Threads: 1, Stall: 10 * time.Second, Interval: time.Hour, Emit: &emit.Memory{}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for !h.threads[0].exited.Load() {
		if time.Now().After(deadline) {
			t.Fatal("thread still running 5s after cancel")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := h.Stop(); len(l.Stalled) != 0 {
		t.Errorf("Stop after cancel = %+v", l)
	}
}

func TestAllowedCPUs(t *testing.T) {
	cpus := allowedCPUs()
	if len(cpus) == 0 {
		t.Fatal("no CPUs allowed")
	}
	for i := 1; i < len(cpus); i++ {
		if cpus[i] <= cpus[i-1] {
			t.Errorf("not ascending: %v", cpus)
		}
	}
}

func TestStartExclude(t *testing.T) {
	cfg := Config{Threads: 1, Stall: time.Second, Emit: &emit.Memory{}, Exclude: []Syscall{SysSchedYield}}
	if _, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "sched_yield") {
		t.Errorf("Start excluding sched_yield = %v, want an error", err)
	}
	cfg.Exclude = []Syscall{SysGetppid, SysGetrusage}
	h, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if l := h.Stop(); l.Iterations == 0 || len(l.Stalled) != 0 {
		t.Errorf("hammer without getppid/getrusage: %+v", l)
	}
	for _, s := range []Syscall{SysGetppid, SysGetrusage, SysGetpid} {
		if !slices.Contains(Syscalls, s) {
			t.Errorf("Syscalls lacks %s", s)
		}
	}
}

func TestFairReserveSetsAndRestores(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []string{"cpu0", "cpu1"} {
		if err := os.MkdirAll(filepath.Join(dir, c), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, c, "period"), []byte("1000000000\n"), 0o644)
		os.WriteFile(filepath.Join(dir, c, "runtime"), []byte("50000000\n"), 0o644)
	}
	restore, err := fairReserve(dir, 0.4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"cpu0", "cpu1"} {
		if b, _ := os.ReadFile(filepath.Join(dir, c, "runtime")); string(b) != "400000000" {
			t.Errorf("%s runtime = %q, want 400000000", c, b)
		}
	}
	restore()
	for _, c := range []string{"cpu0", "cpu1"} {
		if b, _ := os.ReadFile(filepath.Join(dir, c, "runtime")); string(b) != "50000000" {
			t.Errorf("%s runtime after restore = %q, want the old 50000000", c, b)
		}
	}
	if _, err := fairReserve(filepath.Join(dir, "none"), 0.4); err == nil || !strings.Contains(err.Error(), "before 6.12") {
		t.Errorf("no fair servers: err = %v", err)
	}
}
