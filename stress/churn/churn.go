package churn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
)

// PhaseChurn names the churn in Progress events.
const PhaseChurn = "churn"

// Transition names beyond Step.Name.
const (
	OpNameLoad    = "load"    // loading a func-ip program (not a transition, but it is timed)
	OpNameCleanup = "cleanup" // removing what a canceled cycle left
)

// Prog is a loaded program waiting to be attached.
type Prog struct {
	Func string
	Kind oracle.Kind
	// Impl belongs to the Kernel implementation.
	Impl any
}

// Link is an attached program.
type Link struct {
	Func string
	Kind oracle.Kind
	FD   int
}

// Kernel is what the churn does to the kernel. Real is the implementation;
// tests substitute a recorder. Every method is called for one function by
// one worker at a time, but different functions concurrently; with
// Config.Twins, Load, Link, Update, Unlink and Release also by the
// worker's twin, on the same function at once.
type Kernel interface {
	// Load loads a func-ip program of kind for fn.
	Load(fn string, kind oracle.Kind) (Prog, error)
	// Link attaches p; the link holds the program, so Release(p) follows
	// whatever the outcome.
	Link(p Prog) (Link, error)
	// Update replaces l's program by p (BPF_LINK_UPDATE).
	Update(l Link, p Prog) error
	// Unlink detaches l.
	Unlink(l Link) error
	// Release closes a program fd.
	Release(p Prog)
	// FtraceOn and FtraceOff add fn to and remove it from the function
	// tracer. A failed On leaves nothing to remove.
	FtraceOn(fn string) error
	FtraceOff(fn string) error
	// KprobeOn creates and arms a kprobe at fn's entry; KprobeOff disarms
	// and deletes it. A failed On leaves nothing to remove.
	KprobeOn(fn string) error
	KprobeOff(fn string) error
	// Check runs the func-ip oracle on fn: one result per slot of fn,
	// comparing with the previous Check.
	Check(fn string) ([]event.Oracle, error)
}

// Config configures Run.
type Config struct {
	// Funcs is the hot set.
	Funcs []string
	// Seed drives every plan (see CycleRNG).
	Seed int64
	// Duration bounds the run (0: no bound); Cycles bounds the cycles per
	// function (0: no bound). At least one must be set.
	Duration time.Duration
	Cycles   int
	// Workers run cycles concurrently; worker w owns functions i with
	// i % Workers == w.
	Workers int
	// Update enables OpUpdate steps (BPF_LINK_UPDATE works on tracing
	// links in this kernel).
	Update bool
	// Twins gives each worker a twin that runs the BPF steps of a plan of
	// its own on the same function during the same cycle: two links of one
	// trampoline attached, replaced and detached at once, which only the
	// trampoline's lock orders. Without it a function's trampoline is only
	// ever changed by one task at a time.
	Twins  bool
	Kernel Kernel
	Rec    *tally.Recorder
	// Emit receives Progress events and an Oracle event per failure.
	Emit emit.Emitter
	// ProgressInterval is the Progress period (2s if zero).
	ProgressInterval time.Duration
}

// Result is what Run saw.
type Result struct {
	// Cycles counts completed cycles over all functions.
	Cycles int
	// Checks counts func-ip checks; Failures lists the failed ones.
	Checks   int
	Failures []event.Oracle
}

// Run runs the churn until ctx is done, Duration elapses or every function
// has done Cycles cycles. It returns the oracle results; the error is for
// a run that could not start, or a cleanup that failed (the kernel may be
// left with links or tracers on).
func Run(ctx context.Context, cfg Config) (Result, error) {
	if len(cfg.Funcs) == 0 || cfg.Kernel == nil || cfg.Emit == nil {
		return Result{}, errors.New("churn.Run: Funcs, Kernel and Emit are required")
	}
	if cfg.Duration <= 0 && cfg.Cycles <= 0 {
		return Result{}, errors.New("churn.Run: neither Duration nor Cycles bounds the run")
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 2 * time.Second
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}

	r := &runner{cfg: cfg}
	var wg sync.WaitGroup
	for w := range min(cfg.Workers, len(cfg.Funcs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(ctx, w)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	total := 0
	if cfg.Cycles > 0 {
		total = cfg.Cycles * len(cfg.Funcs)
	}
	t := time.NewTicker(cfg.ProgressInterval)
	defer t.Stop()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-t.C:
			_ = cfg.Emit.Emit(event.Event{Kind: event.KindProgress, Progress: &event.Progress{
				Phase: PhaseChurn, Done: int(r.cycles.Load()), Total: total,
			}})
		}
	}
	// A cycle cut short by the end of the run was not checked; its hits
	// are in the slots all the same.
	for _, fn := range cfg.Funcs {
		r.check(fn)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Result{Cycles: int(r.cycles.Load()), Checks: r.checks, Failures: r.failures}
	return res, errors.Join(r.errs...)
}

type runner struct {
	cfg    Config
	cycles atomic.Int64

	mu       sync.Mutex
	checks   int
	failures []event.Oracle
	errs     []error
}

func (r *runner) worker(ctx context.Context, w int) {
	for cycle := 0; r.cfg.Cycles == 0 || cycle < r.cfg.Cycles; cycle++ {
		for i := w; i < len(r.cfg.Funcs); i += r.cfg.Workers {
			if ctx.Err() != nil {
				return
			}
			if !r.cfg.Twins {
				r.cycle(ctx, i, cycle)
				continue
			}
			twin := make(chan struct{})
			go func() {
				defer close(twin)
				r.twinCycle(ctx, i, cycle)
			}()
			r.cycle(ctx, i, cycle)
			<-twin
		}
	}
}

// twinSeed sets a twin's plans apart from its worker's.
const twinSeed = 0x7417

// twinCycle runs the BPF steps of a second plan for function i, beside
// its worker's cycle. Tracer and kprobe steps are left out: each is one
// per function, and the twin would only be refused.
func (r *runner) twinCycle(ctx context.Context, i, cycle int) {
	fn := r.cfg.Funcs[i]
	st := state{links: map[int]Link{}}
	defer r.cleanup(fn, &st)
	for _, s := range Plan(CycleRNG(r.cfg.Seed^twinSeed, i, cycle), r.cfg.Update) {
		if ctx.Err() != nil {
			return
		}
		r.bpfStep(fn, s, &st)
	}
}

// bpfStep runs one attach, update or detach step of fn's plan.
func (r *runner) bpfStep(fn string, s Step, st *state) {
	k, rec := r.cfg.Kernel, r.cfg.Rec
	name := s.Name()
	switch s.Op {
	case OpAttach:
		p, err := r.load(fn, s.Kind)
		if err != nil {
			return
		}
		var l Link
		err = rec.Time(name, fn, func() (err error) { l, err = k.Link(p); return err })
		k.Release(p)
		if err == nil {
			st.links[s.Item] = l
		}
	case OpUpdate:
		l, ok := st.links[s.Item]
		if !ok {
			return
		}
		p, err := r.load(fn, l.Kind)
		if err != nil {
			return
		}
		_ = rec.Time(name, fn, func() error { return k.Update(l, p) })
		k.Release(p)
	case OpDetach:
		if l, ok := st.links[s.Item]; ok {
			delete(st.links, s.Item)
			_ = rec.Time(name, fn, func() error { return k.Unlink(l) })
		}
	}
}

// state is what one function has on its callsite during a cycle.
type state struct {
	links  map[int]Link
	ftrace bool
	kprobe bool
}

// cycle runs one planned cycle of function i and checks the oracle. The
// cycle always ends with nothing attached: if ctx ends midway, the rest is
// removed untimed-as-transition (recorded as cleanup).
func (r *runner) cycle(ctx context.Context, i, cycle int) {
	fn := r.cfg.Funcs[i]
	k, rec := r.cfg.Kernel, r.cfg.Rec
	st := state{links: map[int]Link{}}
	defer r.cleanup(fn, &st)

	for _, s := range Plan(CycleRNG(r.cfg.Seed, i, cycle), r.cfg.Update) {
		if ctx.Err() != nil {
			return
		}
		name := s.Name()
		switch s.Op {
		case OpAttach, OpUpdate, OpDetach:
			r.bpfStep(fn, s, &st)
		case OpFtraceOn:
			st.ftrace = rec.Time(name, fn, func() error { return k.FtraceOn(fn) }) == nil
		case OpFtraceOff:
			if st.ftrace {
				st.ftrace = false
				_ = rec.Time(name, fn, func() error { return k.FtraceOff(fn) })
			}
		case OpKprobeOn:
			st.kprobe = rec.Time(name, fn, func() error { return k.KprobeOn(fn) }) == nil
		case OpKprobeOff:
			if st.kprobe {
				st.kprobe = false
				_ = rec.Time(name, fn, func() error { return k.KprobeOff(fn) })
			}
		}
	}
	r.cycles.Add(1)
	r.check(fn)
}

func (r *runner) load(fn string, kind oracle.Kind) (Prog, error) {
	var p Prog
	err := r.cfg.Rec.Time(OpNameLoad, fn, func() (err error) { p, err = r.cfg.Kernel.Load(fn, kind); return err })
	return p, err
}

// cleanup removes whatever a cycle left on fn's callsite.
func (r *runner) cleanup(fn string, st *state) {
	k, rec := r.cfg.Kernel, r.cfg.Rec
	var errs []error
	for item, l := range st.links {
		delete(st.links, item)
		errs = append(errs, rec.Time(OpNameCleanup, fn, func() error { return k.Unlink(l) }))
	}
	if st.ftrace {
		st.ftrace = false
		errs = append(errs, rec.Time(OpNameCleanup, fn, func() error { return k.FtraceOff(fn) }))
	}
	if st.kprobe {
		st.kprobe = false
		errs = append(errs, rec.Time(OpNameCleanup, fn, func() error { return k.KprobeOff(fn) }))
	}
	if err := errors.Join(errs...); err != nil {
		r.mu.Lock()
		r.errs = append(r.errs, fmt.Errorf("churn: cleanup of %s: %w", fn, err))
		r.mu.Unlock()
	}
}

// check runs the func-ip oracle for fn and reports failures at once, so
// that a crash right after still leaves the finding on the channel.
func (r *runner) check(fn string) {
	res, err := r.cfg.Kernel.Check(fn)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("churn: func-ip check of %s: %w", fn, err))
		return
	}
	for _, o := range res {
		r.checks++
		if o.OK {
			continue
		}
		r.failures = append(r.failures, o)
		_ = r.cfg.Emit.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
	}
}
