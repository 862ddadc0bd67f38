// Package tally times and counts operations by name — churn transitions,
// tracer toggles, preemption switches — and summarises each name in the
// Phase shape (counts, errnos, latency) that the host already knows how to
// read.
package tally

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/latency"
	"github.com/ftrace-harness/fth/wire/event"
)

// DefaultMaxFailures caps Failure events per operation name: a transition
// that always fails must not drown the channel, and its errno counts stay
// exact in the summary anyway.
const DefaultMaxFailures = 20

// maxSamples bounds the latency samples kept per name, so that a churn left
// running for hours does not grow without bound. Counts stay exact.
const maxSamples = 1 << 20

// Recorder accumulates operations. It is safe for concurrent use.
type Recorder struct {
	emit        emit.Emitter
	maxFailures int
	now         func() time.Time

	mu  sync.Mutex
	ops map[string]*op

	// opLog, when set, makes Time announce every operation as an Op event
	// before running it: the operation log a crash is read against.
	opLog   bool
	opStart time.Time
	seq     atomic.Uint64
}

// LogOps makes Time emit an Op event (sequence number, milliseconds since
// start, CPU, name, function) before each operation. With concurrent
// workers several operations are in flight at once; the host keeps the
// last few, so a crash shows what was being changed when it hit.
func (r *Recorder) LogOps(start time.Time) {
	r.opLog, r.opStart = true, start
}

type op struct {
	phase   event.Phase
	samples []time.Duration
	total   time.Duration
	sent    int
}

// New returns a Recorder that reports failures to emit, at most
// maxFailures per name (DefaultMaxFailures if 0, none if negative).
func New(emit emit.Emitter, maxFailures int) *Recorder {
	if maxFailures == 0 {
		maxFailures = DefaultMaxFailures
	}
	return &Recorder{emit: emit, maxFailures: maxFailures, now: time.Now, ops: map[string]*op{}}
}

// Time runs f, records it under name for function fn, and returns f's
// error unchanged. A nil Recorder only runs f.
func (r *Recorder) Time(name, fn string, f func() error) error {
	if r == nil {
		return f()
	}
	if r.opLog {
		cpu := currentCPU()
		_ = r.emit.Emit(event.Event{Kind: event.KindOp, Op: &event.Op{
			Phase: name, Function: fn, Index: int(r.seq.Add(1)),
			AtMS: float64(r.now().Sub(r.opStart).Microseconds()) / 1000, CPU: &cpu,
		}})
	}
	t0 := r.now()
	err := f()
	r.Record(name, fn, r.now().Sub(t0), err)
	return err
}

// Record adds one operation that took d and ended with err (nil for
// success). A failure is keyed by the kernel errno err wraps, or
// attach.OtherErrno. A nil Recorder records nothing.
func (r *Recorder) Record(name, fn string, d time.Duration, err error) {
	if r == nil {
		return
	}
	r.mu.Lock()
	o := r.ops[name]
	if o == nil {
		o = &op{phase: event.Phase{Name: name}}
		r.ops[name] = o
	}
	o.phase.Attempted++
	o.total += d
	if len(o.samples) < maxSamples {
		o.samples = append(o.samples, d)
	}
	var f *event.Failure
	if err == nil {
		o.phase.Succeeded++
	} else {
		o.phase.Failed++
		errno, _ := attach.ErrnoOf(err)
		key := errno
		if key == "" {
			key = attach.OtherErrno
		}
		if o.phase.Errnos == nil {
			o.phase.Errnos = map[string]int{}
		}
		o.phase.Errnos[key]++
		if r.maxFailures > 0 && o.sent < r.maxFailures {
			o.sent++
			f = &event.Failure{Phase: name, Function: fn, Errno: errno, Msg: attach.Message(err)}
		}
	}
	r.mu.Unlock()
	// Emit outside the lock: the channel may block, and other recorders'
	// callers must not wait on it.
	if f != nil && r.emit != nil {
		_ = r.emit.Emit(event.Event{Kind: event.KindFailure, Failure: f})
	}
}

// Summaries returns one Phase per name, sorted by name. Wall is the total
// time spent in that operation, not the span it was spread over.
func (r *Recorder) Summaries() []event.Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]event.Phase, 0, len(r.ops))
	for _, name := range slices.Sorted(maps.Keys(r.ops)) {
		o := r.ops[name]
		p := o.phase
		p.Errnos = maps.Clone(o.phase.Errnos)
		p.Latency = latency.Summarize(o.samples)
		p.Wall = event.Duration(o.total)
		out = append(out, p)
	}
	return out
}

// Get returns the summary of one name; ok is false if nothing was recorded.
func (r *Recorder) Get(name string) (event.Phase, bool) {
	for _, p := range r.Summaries() {
		if p.Name == name {
			return p, true
		}
	}
	return event.Phase{}, false
}

// EmitSummaries emits a KindTransition event per name.
func (r *Recorder) EmitSummaries() error {
	if r.emit == nil {
		return errors.New("tally.EmitSummaries: no emitter")
	}
	var errs []error
	for _, p := range r.Summaries() {
		errs = append(errs, r.emit.Emit(event.Event{Kind: event.KindTransition, Transition: &p}))
	}
	return errors.Join(errs...)
}

// currentCPU is the CPU the calling thread runs on (getcpu(2)); -1 if the
// call fails. A goroutine may move right after: it says where the
// operation started.
func currentCPU() int {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1
	}
	return int(cpu)
}
