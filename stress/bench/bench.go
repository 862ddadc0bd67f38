// Package bench is the agent's bench scenario: inside one boot it measures
// the numbers a kernel developer argues with — ftrace_ops per-call overhead
// (the kernel's own ftrace-ops sample), the cost of a syscall whose entry
// function carries fentry, fexit, the function tracer or a kprobe, how
// attach and detach scale with the number of trampolines, multi-function
// links against single ones, and wakeup latency quiet and under an attach
// storm — and reports them as one event.Bench.
//
// Under TCG absolute nanoseconds are not hardware numbers, so every figure is
// given beside its ratio to the untraced baseline measured in the same boot.
// A part that cannot run is reported Skipped with the reason, never filled
// with guesses.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/profile"
	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
)

// Default locations of what the bench reads and loads.
const (
	// DefaultOpsModule is where the harness puts the kernel's
	// samples/ftrace/ftrace-ops.ko (built with CONFIG_SAMPLE_FTRACE_OPS=m).
	DefaultOpsModule = "/lib/modules/fth/ftrace-ops.ko"
	// DefaultKmsg is the kernel log device the module's result is read from.
	DefaultKmsg = "/dev/kmsg"
)

// NotRequested is the Skipped reason of a part left out of the parts list.
const NotRequested = "not requested (benchparts)"

// Config is what Run needs. Zero paths take the defaults above and
// tracefs.DefaultRoot.
type Config struct {
	// Parts are the parts to run (benchopts.Parts() names); Run keeps
	// benchopts.Parts() order.
	Parts []string
	// Emit receives Log lines, and the attach package's Op, Progress and
	// Failure events during the scaling part.
	Emit emit.Emitter
	// Cache holds the parsed vmlinux BTF every program load shares.
	Cache *btf.Cache
	// Candidates are the traceable functions from the inventory, sorted.
	Candidates []string
	// Seed orders the candidates: scaling, multi and the storm take
	// prefixes of one seeded shuffle, so N=1000 contains N=500.
	Seed int64

	OpsModule    string
	Kmsg         string
	TracefsRoot  string
	OpsSweep     []benchopts.OpsPoint
	OpsCalls     int
	SyscallCalls int
	ScalingN     []int
	MultiN       []int
	// MultiLiveN are the population sizes of the multilive part.
	MultiLiveN []int
	WakeupFor  time.Duration
	// FExitEvery makes every FExitEvery-th trampoline of the curve an
	// fexit (0: fentry only).
	FExitEvery int
	// Profile is where attach and detach are profiled
	// (benchopts.ProfileLargest, ProfileAll, ProfileOff; "" is off).
	Profile string

	// StartHammer starts the preemption hammer for the wakeup storm and
	// returns the function that stops it; nil runs the storm without it.
	StartHammer func(context.Context) (stop func(), err error)
}

// orderStream separates the bench's shuffle from the agent's other seeded
// streams.
const orderStream = 0x66746862656e6368

// Run runs the requested parts in order and returns the report, every part
// present. The error joins what stopped parts short or left the kernel in a
// state later parts cannot trust (a tracer or link that would not go away);
// a part the kernel cannot run is only Skipped.
func Run(ctx context.Context, cfg Config) (event.Bench, error) {
	if cfg.Emit == nil || cfg.Cache == nil {
		return event.Bench{}, errors.New("bench.Run: Emit and Cache are required")
	}
	b := event.Bench{
		CPU:       benchCPU(),
		Ops:       &event.BenchOps{Skipped: NotRequested},
		Syscall:   &event.BenchSyscall{Skipped: NotRequested},
		Scaling:   &event.BenchScaling{Skipped: NotRequested},
		Multi:     &event.BenchMulti{Skipped: NotRequested},
		MultiLive: &event.BenchMultiLive{Skipped: NotRequested},
		Wakeup:    &event.BenchWakeup{Skipped: NotRequested},
	}
	r := &runner{cfg: cfg, cpu: b.CPU, order: shuffled(cfg.Candidates, cfg.Seed)}
	r.prepareProfile()
	var errs []error
	for _, part := range benchopts.Parts() {
		if !slices.Contains(cfg.Parts, part) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("bench: %s: %w", part, err))
			break
		}
		emit.Logf(cfg.Emit, "bench: %s: start", part)
		t0 := time.Now()
		var err error
		switch part {
		case benchopts.Ops:
			b.Ops, err = r.ops(ctx)
		case benchopts.Syscall:
			b.Syscall, err = r.syscall(ctx)
		case benchopts.Scaling:
			b.Scaling, err = r.scaling(ctx)
			r.scaled = b.Scaling
		case benchopts.Multi:
			b.Multi, err = r.multi(ctx)
		case benchopts.MultiLive:
			b.MultiLive, err = r.multiLive(ctx)
		case benchopts.Wakeup:
			b.Wakeup, err = r.wakeup(ctx)
		}
		emit.Logf(cfg.Emit, "bench: %s: done in %v", part, time.Since(t0).Round(time.Millisecond))
		if err != nil {
			errs = append(errs, fmt.Errorf("bench: %s: %w", part, err))
		}
	}
	return b, errors.Join(errs...)
}

// runner is one Run's shared state.
type runner struct {
	cfg Config
	// cpu is where timed threads run, -1 for anywhere.
	cpu int
	// order is the seeded shuffle of the candidates.
	order []string
	// scaled is the scaling part's result, which the multi part compares
	// with.
	scaled *event.BenchScaling
	// rules and syms sort and name the profiles' stacks, both read once
	// before any attach (prepareProfile); profileErr says why there are
	// none.
	rules      *profile.Rules
	syms       *profile.Symbols
	profileErr string
}

// shuffled returns cands in an order fixed by seed.
func shuffled(cands []string, seed int64) []string {
	out := slices.Clone(cands)
	rng := rand.New(rand.NewPCG(uint64(seed), orderStream))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// Ratio is x over the baseline base, rounded to 3 decimals; 0 when either
// is not a measurement (base <= 0, x < 0), so that a missing baseline never
// shows as an infinite or negative ratio.
func Ratio(x, base float64) float64 {
	if base <= 0 || x < 0 || math.IsNaN(x) || math.IsNaN(base) {
		return 0
	}
	return round(x/base, 3)
}

// PerOpRatio is the cost per operation of (total, n) relative to that of
// (total0, n0): (total/n)/(total0/n0). Above 1 the cost per operation grew
// with the count. 0 when either has no operations.
func PerOpRatio(total float64, n int, total0 float64, n0 int) float64 {
	if n <= 0 || n0 <= 0 {
		return 0
	}
	return Ratio(total/float64(n), total0/float64(n0))
}

// median returns the median of xs (the mean of the middle two for an even
// count); 0 for none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// round rounds x to digits decimals.
func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}

// benchCPU picks the CPU timed threads are pinned to: the last one the agent
// may run on, away from CPU 0, which takes most device interrupts in a VM.
// -1 when the affinity cannot be read.
func benchCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return -1
	}
	last := -1
	for c := 0; c < int(unsafe.Sizeof(set))*8; c++ {
		if set.IsSet(c) {
			last = c
		}
	}
	return last
}

// onPinnedThread runs fn on a fresh OS thread bound to cpu (any CPU when cpu
// is -1) and returns its error. The thread is never unlocked, so the runtime
// ends it when fn returns: its affinity and scheduling policy cannot leak to
// other goroutines.
func onPinnedThread(cpu int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if cpu >= 0 {
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				done <- fmt.Errorf("pin to CPU %d: %w", cpu, err)
				return
			}
		}
		done <- fn()
	}()
	return <-done
}

// settleTime is how long a timed part waits before it starts.
const settleTime = time.Second

// settle waits settleTime (or until ctx ends) so that the deferred work of
// the previous part — RCU callbacks, module and trampoline frees — drains
// before timing starts: under TCG it runs on a vCPU that shares the host
// thread with the measured one.
func settle(ctx context.Context) {
	t := time.NewTimer(settleTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// seconds is d in seconds, rounded to the microsecond.
func seconds(d time.Duration) float64 { return round(d.Seconds(), 6) }
