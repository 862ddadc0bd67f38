package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
)

// Wakeup measurement settings, cyclictest's usual ones: a 1 ms period at
// SCHED_FIFO 90, above the hammer's RT threads (1-10) and below the
// kernel's own high-priority threads.
const (
	WakeupPeriod   = time.Millisecond
	WakeupPriority = 90
)

// stormFuncs is how many functions the storm attaches and detaches in a
// loop: enough that the storm is always in the middle of a patch, few
// enough that one cycle takes seconds, not minutes, under TCG.
const stormFuncs = 64

// histMax is the largest latency the histogram tracks; a wakeup later than
// this is recorded as this.
const histMax = int64(10 * time.Second)

// NewHistogram returns the histogram wakeup latencies (in ns) go into: 1 ns
// to histMax at 3 significant digits, so every percentile is within 0.1%.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, histMax, 3)
}

// Summarize returns h's percentiles in microseconds, with overruns.
func Summarize(h *hdrhistogram.Histogram, overruns int64) event.WakeupSummary {
	us := func(ns int64) float64 { return round(float64(ns)/1e3, 3) }
	return event.WakeupSummary{
		Samples:  h.TotalCount(),
		Overruns: overruns,
		WakeupPercentiles: event.WakeupPercentiles{
			Min:  us(h.Min()),
			P50:  us(h.ValueAtQuantile(50)),
			P90:  us(h.ValueAtQuantile(90)),
			P99:  us(h.ValueAtQuantile(99)),
			P999: us(h.ValueAtQuantile(99.9)),
			Max:  us(h.Max()),
		},
	}
}

// PercentileRatio is x over base, percentile by percentile.
func PercentileRatio(x, base event.WakeupPercentiles) event.WakeupPercentiles {
	return event.WakeupPercentiles{
		Min:  Ratio(x.Min, base.Min),
		P50:  Ratio(x.P50, base.P50),
		P90:  Ratio(x.P90, base.P90),
		P99:  Ratio(x.P99, base.P99),
		P999: Ratio(x.P999, base.P999),
		Max:  Ratio(x.Max, base.Max),
	}
}

// wakeup measures wakeup latency quiet, then under the storm.
func (r *runner) wakeup(ctx context.Context) (*event.BenchWakeup, error) {
	d := r.cfg.WakeupFor
	out := &event.BenchWakeup{Period: event.Duration(WakeupPeriod), For: event.Duration(d), Priority: WakeupPriority}
	settle(ctx)
	q, err := measureWakeup(ctx, r.cpu, d)
	if err != nil {
		out.Skipped = "quiet run: " + err.Error()
		return out, ctx.Err()
	}
	out.Supported = true
	out.Quiet = &q
	emit.Logf(r.cfg.Emit, "bench: wakeup quiet: %s", formatSummary(q))

	st, err := r.startStorm(ctx)
	if err != nil {
		out.Skipped = "storm run: " + err.Error()
		return out, ctx.Err()
	}
	a0, d0, e0 := st.counts()
	s, merr := measureWakeup(ctx, r.cpu, d)
	a1, d1, e1 := st.counts()
	st.stop()
	out.StormAttaches, out.StormDetaches, out.StormErrors = int(a1-a0), int(d1-d0), int(e1-e0)
	if merr != nil {
		out.Skipped = "storm run: " + merr.Error()
		return out, ctx.Err()
	}
	out.Storm = &s
	ratio := PercentileRatio(s.WakeupPercentiles, q.WakeupPercentiles)
	out.Ratio = &ratio
	emit.Logf(r.cfg.Emit, "bench: wakeup storm: %s; %d attaches, %d detaches, %d errors; p99 x%.2f", formatSummary(s), out.StormAttaches, out.StormDetaches, out.StormErrors, ratio.P99)
	return out, nil
}

func formatSummary(s event.WakeupSummary) string {
	return fmt.Sprintf("%d samples, %d overruns, min %.1f p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f µs",
		s.Samples, s.Overruns, s.Min, s.P50, s.P90, s.P99, s.P999, s.Max)
}

// measureWakeup runs the cyclictest loop for d on a SCHED_FIFO thread
// pinned to cpu: sleep to an absolute deadline on CLOCK_MONOTONIC, read the
// clock, record how late the wakeup was, advance the deadline by one
// period. Both calls are raw syscalls: through the Go runtime's syscall
// path the thread would have to get a scheduler P back after each sleep,
// and under the storm that wait would be measured as kernel latency.
func measureWakeup(ctx context.Context, cpu int, d time.Duration) (event.WakeupSummary, error) {
	h := NewHistogram()
	var overruns int64
	// A garbage collection stops the world, this thread included, and
	// its pause would be measured as kernel latency: cyclictest has no
	// collector, so the run has none either. The loop does not allocate.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// The thread holds its scheduler P through every raw sleep; one more
	// P leaves the storm, the hammer and the event writer as many as they
	// have in other scenarios. (A first run without it saw two hammer
	// threads make no progress for 20 s around a 5 s storm run.)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	err := onPinnedThread(cpu, func() error {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: WakeupPriority}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return fmt.Errorf("SCHED_FIFO %d refused: %w", WakeupPriority, err)
		}
		now, err := monoNow()
		if err != nil {
			return err
		}
		period := WakeupPeriod.Nanoseconds()
		next, end := now+period, now+d.Nanoseconds()
		for next <= end && ctx.Err() == nil {
			if err := sleepUntil(next); err != nil {
				return err
			}
			if now, err = monoNow(); err != nil {
				return err
			}
			_ = h.RecordValue(min(max(now-next, 0), histMax))
			next += period
			for next <= now {
				// The whole period passed while we slept: cyclictest
				// counts it and keeps the grid.
				next += period
				overruns++
			}
		}
		return nil
	})
	if err != nil {
		return event.WakeupSummary{}, err
	}
	if err := ctx.Err(); err != nil {
		return event.WakeupSummary{}, err
	}
	return Summarize(h, overruns), nil
}

// monoNow reads CLOCK_MONOTONIC in ns with a raw syscall.
func monoNow() (int64, error) {
	var ts unix.Timespec
	if _, _, e := unix.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, fmt.Errorf("clock_gettime: %w", e)
	}
	return ts.Nano(), nil
}

// sleepUntil sleeps to the absolute CLOCK_MONOTONIC time t (ns) with a raw
// clock_nanosleep, resuming after signals: an absolute deadline makes a
// restart exact.
func sleepUntil(t int64) error {
	ts := unix.NsecToTimespec(t)
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return fmt.Errorf("clock_nanosleep: %w", e)
		}
	}
}

// storm is the attach storm of the second wakeup run: stormFuncs fentry
// programs attached and detached in a loop, with the hammer running.
type storm struct {
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	progs      []*ebpf.Program
	stopHammer func()

	attaches, detaches, errs atomic.Int64
}

// startStorm loads the storm's programs, starts the hammer and the loop.
func (r *runner) startStorm(ctx context.Context) (*storm, error) {
	fns := r.order[:min(stormFuncs, len(r.order))]
	s := &storm{}
	for _, fn := range fns {
		p, err := load(r.cfg.Cache, tracingSpec(fn, ebpf.AttachTraceFEntry))
		if err != nil {
			// Functions the verifier refuses are data of the scaling
			// part; the storm just does without them.
			continue
		}
		s.progs = append(s.progs, p)
	}
	if len(s.progs) == 0 {
		return nil, fmt.Errorf("no fentry program loaded for the storm (of %d functions)", len(fns))
	}
	if err := attach.PrepareLimits(len(s.progs)); err != nil {
		emit.Logf(r.cfg.Emit, "bench: limits: %v", err)
	}
	if r.cfg.StartHammer != nil {
		stop, err := r.cfg.StartHammer(ctx)
		if err != nil {
			s.closeProgs()
			return nil, fmt.Errorf("hammer: %w", err)
		}
		s.stopHammer = stop
	}
	sctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.loop(sctx)
	}()
	emit.Logf(r.cfg.Emit, "bench: storm: %d fentry programs attaching and detaching in a loop, hammer %v", len(s.progs), r.cfg.StartHammer != nil)
	return s, nil
}

// loop attaches every program, then detaches every link, until ctx ends.
// A cycle always completes its detaches, so no link outlives the loop.
func (s *storm) loop(ctx context.Context) {
	fds := make([]int, 0, len(s.progs))
	for ctx.Err() == nil {
		for _, p := range s.progs {
			if ctx.Err() != nil {
				break
			}
			fd, errno := attach.LinkCreate(p.FD(), unix.BPF_TRACE_FENTRY)
			if errno != 0 {
				s.errs.Add(1)
				continue
			}
			s.attaches.Add(1)
			fds = append(fds, fd)
		}
		for _, fd := range fds {
			if err := unix.Close(fd); err != nil {
				s.errs.Add(1)
				continue
			}
			s.detaches.Add(1)
		}
		fds = fds[:0]
	}
}

// counts returns the operations so far.
func (s *storm) counts() (attaches, detaches, errs int64) {
	return s.attaches.Load(), s.detaches.Load(), s.errs.Load()
}

// stop ends the loop and the hammer and releases the programs.
func (s *storm) stop() {
	s.cancel()
	s.wg.Wait()
	if s.stopHammer != nil {
		s.stopHammer()
	}
	s.closeProgs()
}

func (s *storm) closeProgs() {
	for _, p := range s.progs {
		p.Close()
	}
	s.progs = nil
}
