// Package hammer runs the preemption hammer: OS threads that loop over
// syscalls reaching kernel functions likely to carry trampolines (process
// info, time, procfs, timers, the scheduler) and migrate between CPUs, while a
// monitor checks that every thread keeps making progress.
package hammer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

// DefaultInterval is how often the monitor reports Liveness.
const DefaultInterval = 2 * time.Second

// affinityEvery is how many iterations a thread runs between migrations.
const affinityEvery = 1000

// maxStack bounds a reported kernel stack.
const maxStack = 4096

// Config configures the hammer.
type Config struct {
	// Threads is the number of hammer threads.
	Threads int
	// Stall is the liveness bound: a thread without progress for longer
	// is reported stalled.
	Stall time.Duration
	// Seed makes each thread's choices reproducible.
	Seed int64
	// Interval is the Liveness report period (DefaultInterval if zero).
	Interval time.Duration
	// Emit receives Liveness events.
	Emit emit.Emitter
	// TaskDir holds per-thread directories with a "stack" file
	// ("/proc/self/task" if empty).
	TaskDir string
	// Exclude lists syscalls the threads must not make, so that another
	// component can be the only caller of one (the exact-count oracle
	// counts every call of getppid). Only SysGetppid and SysGetrusage can
	// be left out: the others are the loop's preemption and migration
	// points. Empty keeps the full loop.
	Exclude []Syscall
	// RT is how many of the threads run real-time (SCHED_RR at
	// RTPriority), so that their wakeups preempt the SCHED_OTHER ones (and
	// the patching CPU) at any instruction.
	// Threads the kernel refuses RT to stay SCHED_OTHER and are counted
	// in RTRefused.
	RT int
	// TimerPeriod, when non-zero, makes every thread also arm a timerfd
	// with this period and read it when it fires: an hrtimer interrupt
	// stream independent of the thread's own sleeps.
	TimerPeriod time.Duration
	// FairShare is the share of every CPU reserved for SCHED_OTHER tasks
	// while RT threads run (see DefaultFairShare, used when zero; negative
	// leaves the kernel's setting). FairServerDir overrides FairServerDir
	// for tests.
	FairShare     float64
	FairServerDir string
}

// Bounds of an RT hammer thread's sleep after each iteration.
const (
	rtMinSleep = 100 * time.Microsecond
	rtMaxSleep = 5 * time.Millisecond
)

// RTPriority is the SCHED_RR priority of every RT thread: low enough that
// kernel threads (watchdogs, RCU) at higher RT priorities still run. The
// host reads it to recognise these threads in the guest's runqueue dump
// (kernel prio = 99 - priority).
const RTPriority = 5

// Syscall names a syscall the hammer makes, as the kernel's SYSCALL_DEFINE
// does (without the architecture's wrapper prefix).
type Syscall string

// The syscalls of the hammer loop.
const (
	SysGetpid           Syscall = "getpid"
	SysGetppid          Syscall = "getppid"
	SysNewuname         Syscall = "newuname"
	SysClockGettime     Syscall = "clock_gettime"
	SysGetrusage        Syscall = "getrusage"
	SysOpenat           Syscall = "openat"
	SysRead             Syscall = "read"
	SysClose            Syscall = "close"
	SysNanosleep        Syscall = "nanosleep"
	SysSchedYield       Syscall = "sched_yield"
	SysSchedSetaffinity Syscall = "sched_setaffinity"
)

// Syscalls lists every syscall the loop makes, for callers that look for
// the kernel functions the hammer keeps hot.
var Syscalls = []Syscall{
	SysGetpid, SysGetppid, SysNewuname, SysClockGettime, SysGetrusage,
	SysOpenat, SysRead, SysClose, SysNanosleep, SysSchedYield, SysSchedSetaffinity,
}

// thread is one hammer thread's shared state.
type thread struct {
	iters  atomic.Uint64
	tid    atomic.Int64
	exited atomic.Bool

	// Monitor-only state, guarded by Hammer.mu.
	seen    uint64
	movedAt time.Time
}

// Hammer is a running hammer.
type Hammer struct {
	cfg     Config
	threads []*thread
	stop    atomic.Bool
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	monDone chan struct{}
	now     func() time.Time

	rtRunning atomic.Int64
	rtRefused atomic.Int64
	// restoreFair puts the fair servers back as they were.
	restoreFair func()

	mu        sync.Mutex
	reported  uint64 // total iterations at the last report
	stalled   map[int64]time.Duration
	stopped   bool
	finalLive event.Liveness
}

// Start starts cfg.Threads threads and the monitor. The hammer runs until
// Stop, or until ctx is canceled (Stop must still be called to collect the
// final report).
func Start(ctx context.Context, cfg Config) (*Hammer, error) {
	if cfg.Threads < 1 {
		return nil, fmt.Errorf("hammer.Start: threads = %d, want >= 1", cfg.Threads)
	}
	if cfg.Stall <= 0 {
		return nil, fmt.Errorf("hammer.Start: stall = %v, want > 0", cfg.Stall)
	}
	if cfg.Emit == nil {
		return nil, errors.New("hammer.Start: Emit is required")
	}
	for _, s := range cfg.Exclude {
		if s != SysGetppid && s != SysGetrusage {
			return nil, fmt.Errorf("hammer.Start: cannot exclude %q (only %s and %s)", s, SysGetppid, SysGetrusage)
		}
	}
	h := newHammer(cfg, time.Now)
	h.restoreFair = func() {}
	if share := cfg.FairShare; cfg.RT > 0 && share >= 0 {
		if share == 0 {
			share = DefaultFairShare
		}
		dir := cfg.FairServerDir
		if dir == "" {
			dir = FairServerDir
		}
		restore, err := fairReserve(dir, share)
		f := event.Feature{Name: "rt_fair_reserve", Supported: err == nil, Msg: fmt.Sprintf("%.0f%% of every CPU reserved for SCHED_OTHER tasks while %d RT threads run", share*100, cfg.RT)}
		if err != nil {
			f.Msg = err.Error()
		}
		_ = cfg.Emit.Emit(event.Event{Kind: event.KindFeature, Feature: &f})
		h.restoreFair = restore
	}
	ctx, h.cancel = context.WithCancel(ctx)
	for i, th := range h.threads {
		h.wg.Add(1)
		go h.loop(i, th)
	}
	go func() {
		defer close(h.monDone)
		h.monitor(ctx)
	}()
	return h, nil
}

func newHammer(cfg Config, now func() time.Time) *Hammer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.TaskDir == "" {
		cfg.TaskDir = "/proc/self/task"
	}
	h := &Hammer{cfg: cfg, now: now, monDone: make(chan struct{}), stalled: map[int64]time.Duration{}}
	t0 := now()
	for range cfg.Threads {
		h.threads = append(h.threads, &thread{movedAt: t0})
	}
	return h
}

func (h *Hammer) monitor(ctx context.Context) {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Threads stop when Stop is called, not here: a canceled
			// run still gets a final report from Stop.
			h.stop.Store(true)
			return
		case <-t.C:
			l := h.check(h.now(), false)
			_ = h.cfg.Emit.Emit(event.Event{Kind: event.KindLiveness, Liveness: &l})
		}
	}
}

// check compares every thread's counter with the previous check. A thread
// counts as stalled only if its counter has not moved since the last check
// and it last moved more than Stall ago: if the whole guest (monitor
// included) froze and then resumed, the threads moved again before this
// check and are not blamed. With final set, a thread that has not exited is
// stalled if it did not move since the last check, whatever the bound: it
// also failed to stop.
func (h *Hammer) check(now time.Time, final bool) event.Liveness {
	h.mu.Lock()
	defer h.mu.Unlock()
	var total uint64
	l := event.Liveness{Threads: len(h.threads)}
	for _, th := range h.threads {
		n := th.iters.Load()
		total += n
		if n != th.seen {
			th.seen, th.movedAt = n, now
			continue
		}
		if th.exited.Load() {
			continue
		}
		idle := now.Sub(th.movedAt)
		if idle <= h.cfg.Stall && !final {
			continue
		}
		tid := th.tid.Load()
		h.stalled[tid] = max(h.stalled[tid], idle)
		l.Stalled = append(l.Stalled, event.StalledThread{
			TID:   int(tid),
			For:   event.Duration(idle),
			Stack: h.stack(tid),
		})
	}
	l.Iterations = total - h.reported
	h.reported = total
	return l
}

// stack reads a thread's kernel stack. Errors give "": the file needs root
// and CONFIG_STACKTRACE, and a missing stack must not hide the stall.
func (h *Hammer) stack(tid int64) string {
	if tid == 0 {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(h.cfg.TaskDir, strconv.FormatInt(tid, 10), "stack"))
	if err != nil {
		return ""
	}
	if len(b) > maxStack {
		b = b[:maxStack]
	}
	return string(b)
}

// Stop stops the threads, waits for them up to the stall bound, and returns
// the final Liveness (iterations since the last report; threads that did not
// stop in time are listed as stalled). It does not emit the event; the caller
// does. Calling Stop again returns the same report.
func (h *Hammer) Stop() event.Liveness {
	h.mu.Lock()
	if h.stopped {
		defer h.mu.Unlock()
		return h.finalLive
	}
	h.mu.Unlock()

	h.stop.Store(true)
	h.cancel()
	<-h.monDone
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(h.cfg.Stall):
		// A thread stuck in the kernel cannot be interrupted from
		// here; it is reported and left behind.
	}
	l := h.check(h.now(), true)
	if h.restoreFair != nil {
		h.restoreFair()
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.finalLive = l
	return l
}

// Stalls returns every thread that was ever reported stalled, by TID, with
// the longest time it went without progress.
func (h *Hammer) Stalls() map[int64]time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[int64]time.Duration, len(h.stalled))
	for k, v := range h.stalled {
		out[k] = v
	}
	return out
}

// loop is one hammer thread.
func (h *Hammer) loop(i int, th *thread) {
	defer h.wg.Done()
	defer th.exited.Store(true)
	// The thread's CPU affinity is changed below. Never unlocking makes the
	// runtime end the OS thread when this goroutine returns, so the
	// affinity does not leak to unrelated goroutines.
	runtime.LockOSThread()
	th.tid.Store(int64(unix.Gettid()))

	rng := rand.New(rand.NewPCG(uint64(h.cfg.Seed), uint64(i)+1))
	cpus := allowedCPUs()
	if i < h.cfg.RT {
		// Every RT thread is SCHED_RR at one priority. With FIFO and RR
		// at priorities 1-10, a higher-priority thread spinning in the Go
		// runtime (exitsyscall waiting out a stack scan) kept a
		// lower-priority one off its CPU for minutes; that one had been
		// preempted inside a trampoline, so it held an RCU-tasks grace
		// period and every ftrace update behind it (the runqueue dumps of
		// the stall show it). Equal priorities round-robin every time
		// slice, and a wakeup still preempts every SCHED_OTHER task.
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR, Priority: RTPriority}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			h.rtRefused.Add(1)
		} else {
			h.rtRunning.Add(1)
		}
	}
	tfd := -1
	if h.cfg.TimerPeriod > 0 {
		if fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err == nil {
			ts := unix.NsecToTimespec(h.cfg.TimerPeriod.Nanoseconds())
			if unix.TimerfdSettime(fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil) == nil {
				tfd = fd
			} else {
				unix.Close(fd)
			}
		}
		if tfd >= 0 {
			defer unix.Close(tfd)
		}
	}
	var tbuf [8]byte
	skip := make(map[Syscall]bool, len(h.cfg.Exclude))
	for _, s := range h.cfg.Exclude {
		skip[s] = true
	}
	noGetppid, noRusage := skip[SysGetppid], skip[SysGetrusage]
	var (
		uts unix.Utsname
		ru  unix.Rusage
		ts  unix.Timespec
		buf = make([]byte, 4096)
	)
	rt := i < h.cfg.RT
	for it := uint64(1); !h.stop.Load(); it++ {
		var t0 time.Time
		if rt {
			t0 = time.Now()
		}
		_ = unix.Getpid()
		if !noGetppid {
			_ = unix.Getppid()
		}
		_ = unix.Uname(&uts)
		// A direct syscall: unix.ClockGettime may be served by the vDSO
		// without entering the kernel.
		_, _, _ = unix.Syscall(unix.SYS_CLOCK_GETTIME, uintptr(unix.CLOCK_MONOTONIC), uintptr(unsafe.Pointer(&ts)), 0)
		if !noRusage {
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
		}
		switch rng.IntN(3) {
		case 0:
			readProcStat(buf)
		case 1:
			// 50-200µs: long enough to arm an hrtimer and sleep, short
			// enough to wake up thousands of times a second.
			d := time.Duration(50+rng.IntN(151)) * time.Microsecond
			req := unix.NsecToTimespec(d.Nanoseconds())
			_ = unix.Nanosleep(&req, nil)
		case 2:
			_, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if tfd >= 0 {
			// Non-blocking: EAGAIN when the timer has not fired since.
			_, _ = unix.Read(tfd, tbuf[:])
		}
		if it%affinityEvery == 0 && len(cpus) > 1 {
			var set unix.CPUSet
			set.Set(cpus[rng.IntN(len(cpus))])
			// EINVAL if that CPU went offline: nothing to report.
			_ = unix.SchedSetaffinity(0, &set)
		}
		if rt {
			// A real-time thread sleeps twice as long as it ran: it still
			// preempts everything when it wakes, but leaves two thirds of
			// its CPU to the rest. Spinning RT threads starved the agent's
			// loader (and RCU) under riscv64 TCG into a false hang.
			d := min(max(2*time.Since(t0), rtMinSleep), rtMaxSleep)
			req := unix.NsecToTimespec(d.Nanoseconds())
			_ = unix.Nanosleep(&req, nil)
		}
		th.iters.Add(1)
	}
}

// readProcStat reads /proc/self/stat, which walks the thread group under
// locks, with raw syscalls so that the Go runtime's poller stays out of it.
func readProcStat(buf []byte) {
	fd, err := unix.Open("/proc/self/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	_, _ = unix.Read(fd, buf)
	_ = unix.Close(fd)
}

// allowedCPUs lists the CPUs the calling thread may run on.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var out []int
	for c := 0; c < int(unsafe.Sizeof(set))*8 && len(out) < set.Count(); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// RT reports how many threads run real-time and how many the kernel
// refused it (e.g. without CONFIG_RT_GROUP_SCHED budget); valid once the
// threads have started.
func (h *Hammer) RT() (running, refused int) {
	return int(h.rtRunning.Load()), int(h.rtRefused.Load())
}
