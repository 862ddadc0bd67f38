package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/churn"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
)

// benchSyscall is the syscall timed. Nothing in a u-root guest calls
// getppid but the hammer, which is not running during this part, and the Go
// runtime never does; unix.Getppid is a raw syscall, so no runtime
// bookkeeping is timed with it.
const benchSyscall = "getppid"

// syscallRuns is how many timed runs each state gets; the median is the
// figure, the fastest run is kept beside it.
const syscallRuns = 5

// warmupCalls fault in and cache-warm the path before timing.
const warmupCalls = 1000

// KprobeGroup is the kprobe event group of the bench's probes, apart from
// the churn's, so cleanup removes only the bench's own.
const KprobeGroup = "fth_bench"

// Syscall state names, in the order they are measured.
const (
	StateBaseline    = "baseline"
	StateFEntry      = "fentry"
	StateFEntry2     = "fentry2"
	StateFEntryFExit = "fentry_fexit"
	StateFtrace      = "function_tracer"
	StateKprobe      = "kprobe"
	StateBPFKprobe   = "bpf_kprobe"
	StateBaselineEnd = "baseline_end"
)

// syscallState is one state: setup puts it in place and returns what
// takes it away again.
type syscallState struct {
	name  string
	setup func() (teardown func() error, err error)
}

// syscall times getppid with its entry function in each state.
func (r *runner) syscall(ctx context.Context) (*event.BenchSyscall, error) {
	fn := churn.EntryFunc(r.cfg.Candidates, benchSyscall)
	out := &event.BenchSyscall{Syscall: benchSyscall, Function: fn, Calls: r.cfg.SyscallCalls, Runs: syscallRuns}
	if fn == "" {
		out.Skipped = "no traceable entry function of " + benchSyscall + " among the candidates"
		return out, nil
	}
	out.Supported = true
	top := tracefs.New(r.tracefsRoot())
	states := []syscallState{
		{name: StateBaseline},
		{StateFEntry, r.trampolines(fn, ebpf.AttachTraceFEntry)},
		{StateFEntry2, r.trampolines(fn, ebpf.AttachTraceFEntry, ebpf.AttachTraceFEntry)},
		{StateFEntryFExit, r.trampolines(fn, ebpf.AttachTraceFEntry, ebpf.AttachTraceFExit)},
		{StateFtrace, functionTracer(top, fn)},
		{StateKprobe, kprobeEvent(top, fn)},
		{StateBPFKprobe, bpfKprobe(fn)},
		{name: StateBaselineEnd},
	}
	settle(ctx)
	var base, bestBase float64
	for _, s := range states {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		st := event.BenchSyscallState{Name: s.name}
		teardown := func() error { return nil }
		if s.setup != nil {
			td, err := s.setup()
			if err != nil {
				st.Skipped = err.Error()
				out.States = append(out.States, st)
				emit.Logf(r.cfg.Emit, "bench: syscall %s: skipped: %v", s.name, err)
				continue
			}
			teardown = td
		}
		runs, terr := timeSyscall(r.cpu, r.cfg.SyscallCalls, syscallRuns)
		if err := teardown(); err != nil {
			// A tracer or probe that stays would weigh on every later
			// state and part: stop here.
			out.States = append(out.States, st)
			return out, fmt.Errorf("%s: take the state away: %w", s.name, err)
		}
		if terr != nil {
			st.Skipped = terr.Error()
			out.States = append(out.States, st)
			continue
		}
		st.NsPerCall = round(median(runs), 1)
		st.BestNs = round(slices.Min(runs), 1)
		if s.name == StateBaseline {
			base, bestBase = st.NsPerCall, st.BestNs
		}
		st.Ratio, st.BestRatio = Ratio(st.NsPerCall, base), Ratio(st.BestNs, bestBase)
		out.States = append(out.States, st)
		emit.Logf(r.cfg.Emit, "bench: syscall %s on %s: median %.1f ns/call (x%.2f), best %.1f (x%.2f)", s.name, fn, st.NsPerCall, st.Ratio, st.BestNs, st.BestRatio)
	}
	return out, nil
}

func (r *runner) tracefsRoot() string {
	if r.cfg.TracefsRoot != "" {
		return r.cfg.TracefsRoot
	}
	return tracefs.DefaultRoot
}

// timeSyscall makes runs timed runs of n getppid calls on a thread pinned
// to cpu and returns each run's ns per call.
func timeSyscall(cpu, n, runs int) ([]float64, error) {
	var out []float64
	err := onPinnedThread(cpu, func() error {
		for range warmupCalls {
			_ = unix.Getppid()
		}
		for range runs {
			t0 := time.Now()
			for range n {
				_ = unix.Getppid()
			}
			out = append(out, float64(time.Since(t0).Nanoseconds())/float64(n))
		}
		return nil
	})
	return out, err
}

// trampolines returns a setup that attaches one do-nothing program of each
// kind to fn: two fentry make the trampoline call two programs, fentry plus
// fexit make it call the function and return through itself.
func (r *runner) trampolines(fn string, kinds ...ebpf.AttachType) func() (func() error, error) {
	return func() (func() error, error) {
		var progs []*ebpf.Program
		var fds []int
		teardown := func() error {
			var errs []error
			for _, fd := range fds {
				if err := unix.Close(fd); err != nil {
					errs = append(errs, fmt.Errorf("close link: %w", err))
				}
			}
			for _, p := range progs {
				p.Close()
			}
			return errors.Join(errs...)
		}
		for _, k := range kinds {
			p, err := load(r.cfg.Cache, tracingSpec(fn, k))
			if err != nil {
				return nil, errors.Join(err, teardown())
			}
			progs = append(progs, p)
			lt := uint32(unix.BPF_TRACE_FENTRY)
			if k == ebpf.AttachTraceFExit {
				lt = unix.BPF_TRACE_FEXIT
			}
			fd, errno := attach.LinkCreate(p.FD(), lt)
			if errno != 0 {
				return nil, errors.Join(fmt.Errorf("BPF_LINK_CREATE %v %s: %s (%w)", k, fn, attach.ErrnoName(errno), errno), teardown())
			}
			fds = append(fds, fd)
		}
		return teardown, nil
	}
}

// functionTracer returns a setup that turns the function tracer on with fn
// alone in its filter. The filter is set before the tracer and cleared
// after it, so that no moment traces every function.
func functionTracer(top tracefs.FS, fn string) func() (func() error, error) {
	return func() (func() error, error) {
		if !top.Exists() {
			return nil, fmt.Errorf("no function tracer: %s/current_tracer missing", top.Root)
		}
		if cur, err := top.Tracer(); err != nil || cur != tracefs.Nop {
			return nil, fmt.Errorf("current_tracer is %q (%v), not nop: someone else is tracing", cur, err)
		}
		if err := top.SetFilter(fn); err != nil {
			return nil, errors.Join(err, top.Reset())
		}
		if err := top.SetTracer(tracefs.Function); err != nil {
			return nil, errors.Join(err, top.Reset())
		}
		return top.Reset, nil
	}
}

// kprobeEvent returns a setup that defines and enables a kprobe event at
// fn's entry. On a function ftrace can patch the kprobe goes through ftrace
// (KPROBES_ON_FTRACE), which is what it measures there.
func kprobeEvent(top tracefs.FS, fn string) func() (func() error, error) {
	return func() (func() error, error) {
		if err := top.ClearProbes(KprobeGroup); err != nil {
			return nil, err
		}
		p := tracefs.Probe{Group: KprobeGroup, Event: tracefs.EventName("bench_", fn), Target: fn}
		if err := top.AddProbe(p); err != nil {
			return nil, err
		}
		if err := top.EnableEvent(p.Group, p.Event, true); err != nil {
			return nil, errors.Join(err, top.ClearProbes(KprobeGroup))
		}
		return func() error { return top.ClearProbes(KprobeGroup) }, nil
	}
}

// bpfKprobe returns a setup that attaches a do-nothing BPF program to a
// kprobe at fn's entry through a perf event (cilium/ebpf's link.Kprobe).
func bpfKprobe(fn string) func() (func() error, error) {
	return func() (func() error, error) {
		p, err := ebpf.NewProgram(kprobeSpec(ebpf.AttachNone))
		if err != nil {
			return nil, fmt.Errorf("load kprobe program: %w", err)
		}
		l, err := link.Kprobe(fn, p, nil)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("BPF kprobe on %s: %w", fn, err)
		}
		return func() error {
			err := l.Close()
			p.Close()
			if err != nil {
				return fmt.Errorf("close BPF kprobe link: %w", err)
			}
			return nil
		}, nil
	}
}
