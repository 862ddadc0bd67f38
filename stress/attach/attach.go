// Package attach loads a trivial BPF fentry program per kernel function,
// attaches it, and later detaches it, timing every operation and reporting the
// kernel's true errno for every failure.
package attach

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/latency"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// Phase names as they appear in Progress, Failure and Phase events.
const (
	PhaseLoad   = "load"
	PhaseAttach = "attach"
	PhaseDetach = "detach"
)

// Defaults for Config fields left zero.
const (
	DefaultMaxFailureEvents = 200
	DefaultProgressEvery    = 100
	DefaultProgressInterval = 2 * time.Second
)

// Config configures an Attacher.
type Config struct {
	// Cache is the parsed kernel BTF shared by every load. Without it each
	// load parses vmlinux BTF again, which costs hundreds of milliseconds.
	Cache *btf.Cache
	// Emit receives Progress, Failure and Phase events.
	Emit emit.Emitter
	// MaxFailureEvents caps Failure events per phase; later failures are
	// only counted in Phase.Errnos. The cap is per phase so that a load
	// phase full of verifier refusals cannot hide the rarer, more telling
	// attach and detach failures.
	MaxFailureEvents int
	// ProgressEvery and ProgressInterval: a Progress event is sent after
	// this many operations or this much time, whichever comes first.
	ProgressEvery    int
	ProgressInterval time.Duration
	// FExitEvery makes every FExitEvery-th program of a Load an fexit
	// instead of an fentry (0: all fentry). An fexit trampoline calls the
	// traced function itself and is built and sized differently, so a
	// mix covers both kinds of image.
	FExitEvery int
}

// Attacher runs the load, attach and detach phases.
type Attacher struct {
	cfg Config
	now func() time.Time
}

// New returns an Attacher. cfg.Cache and cfg.Emit are required.
func New(cfg Config) (*Attacher, error) {
	if cfg.Cache == nil || cfg.Emit == nil {
		return nil, errors.New("attach.New: Cache and Emit are required")
	}
	if cfg.MaxFailureEvents == 0 {
		cfg.MaxFailureEvents = DefaultMaxFailureEvents
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	return &Attacher{cfg: cfg, now: time.Now}, nil
}

// Program returns the spec of the fentry program for fn: it returns 0 and
// does nothing else, so any effect seen while it is attached comes from the
// trampoline, not from the program.
func Program(fn string) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:       "fth_fentry",
		Type:       ebpf.Tracing,
		AttachType: ebpf.AttachTraceFEntry,
		AttachTo:   fn,
		License:    "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	}
}

// phaseRun accumulates one phase's counts and timings.
type phaseRun struct {
	a       *Attacher
	phase   event.Phase
	sent    int // Failure events emitted
	samples []time.Duration
	start   time.Time
	total   int
	lastPro time.Time
}

func (a *Attacher) begin(name string, total int) *phaseRun {
	now := a.now()
	return &phaseRun{
		a:       a,
		phase:   event.Phase{Name: name, Errnos: map[string]int{}},
		samples: make([]time.Duration, 0, total),
		start:   now,
		total:   total,
		lastPro: now,
	}
}

// about announces the operation that is about to run. It is sent before the
// syscall, not after: a kernel that dies inside the syscall never lets the
// agent say what it was doing.
func (p *phaseRun) about(fn string) {
	_ = p.a.cfg.Emit.Emit(event.Event{Kind: event.KindOp, Op: &event.Op{Phase: p.phase.Name, Function: fn, Index: p.phase.Attempted + 1}})
}

func (p *phaseRun) ok(d time.Duration) {
	p.phase.Attempted++
	p.phase.Succeeded++
	p.samples = append(p.samples, d)
	p.progress()
}

// fail records a failed operation. Failed operations are timed too: a slow
// refusal is as interesting as a slow success.
func (p *phaseRun) fail(fn string, d time.Duration, errno string, msg string) {
	p.phase.Attempted++
	p.phase.Failed++
	p.samples = append(p.samples, d)
	key := errno
	if key == "" {
		key = OtherErrno
	}
	p.phase.Errnos[key]++
	if p.sent < p.a.cfg.MaxFailureEvents {
		p.sent++
		_ = p.a.cfg.Emit.Emit(event.Event{Kind: event.KindFailure, Failure: &event.Failure{
			Phase: p.phase.Name, Function: fn, Errno: errno, Msg: msg,
		}})
	}
	p.progress()
}

func (p *phaseRun) progress() {
	now := p.a.now()
	if p.phase.Attempted%p.a.cfg.ProgressEvery != 0 && now.Sub(p.lastPro) < p.a.cfg.ProgressInterval {
		return
	}
	p.lastPro = now
	_ = p.a.cfg.Emit.Emit(event.Event{Kind: event.KindProgress, Progress: &event.Progress{
		Phase: p.phase.Name, Done: p.phase.Attempted, Total: p.total,
	}})
}

// end emits and returns the Phase event. It runs on cancellation too, so the
// host sees how far a phase got.
func (p *phaseRun) end() event.Phase {
	p.phase.Latency = latency.Summarize(p.samples)
	p.phase.Wall = event.Duration(p.a.now().Sub(p.start))
	if len(p.phase.Errnos) == 0 {
		p.phase.Errnos = nil
	}
	ph := p.phase
	_ = p.a.cfg.Emit.Emit(event.Event{Kind: event.KindPhase, Phase: &ph})
	return ph
}

// Load loads one fentry program per function into set and returns the "load"
// phase. Per-function failures are reported, not returned; the error is only
// for a phase that could not finish (ctx canceled).
func (a *Attacher) Load(ctx context.Context, set *Set, funcs []string) (event.Phase, error) {
	p := a.begin(PhaseLoad, len(funcs))
	// One CollectionOptions for all loads: its Cache is what shares the
	// parsed kernel BTF. ProgramOptions.KernelTypes would not do: it only
	// feeds CO-RE relocations, while the attach target is looked up
	// through the cache.
	opts := ebpf.CollectionOptions{Cache: a.cfg.Cache}
	fexitRefused := 0
	defer func() {
		if fexitRefused > 0 {
			emit.Logf(a.cfg.Emit, "attach: %d functions refused an fexit and got an fentry instead (__noreturn functions)", fexitRefused)
		}
	}()
	for i, fn := range funcs {
		if err := ctx.Err(); err != nil {
			return p.end(), fmt.Errorf("attach.Load: %w", err)
		}
		ps := Program(fn)
		if k := a.cfg.FExitEvery; k > 0 && i%k == k-1 {
			ps.Name, ps.AttachType = "fth_fexit", ebpf.AttachTraceFExit
		}
		spec := &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"fentry": ps}}
		t0 := a.now()
		coll, err := ebpf.NewCollectionWithOptions(spec, opts)
		if err != nil && ps.AttachType == ebpf.AttachTraceFExit && strings.Contains(err.Error(), "__noreturn") {
			// The verifier refuses an fexit where the function
			// never returns (do_exit and the other __noreturn
			// functions): the mix takes an fentry there.
			fexitRefused++
			ps.Name, ps.AttachType = "fth_fentry", ebpf.AttachTraceFEntry
			coll, err = ebpf.NewCollectionWithOptions(spec, opts)
		}
		d := a.now().Sub(t0)
		if err != nil {
			errno, _ := errnoOf(err)
			p.fail(fn, d, errno, message(err))
			continue
		}
		prog := coll.DetachProgram("fentry")
		coll.Close()
		set.progs = append(set.progs, loaded{fn: fn, prog: prog, attachType: attachTypeOf(ps.AttachType)})
		p.ok(d)
	}
	return p.end(), nil
}

// Attach creates an fentry link for every program in set and returns the
// "attach" phase. The time is that of the BPF_LINK_CREATE syscall alone. Each
// program fd is closed once its link exists, since the link holds the
// program; a program whose attach failed is closed too.
func (a *Attacher) Attach(ctx context.Context, set *Set) (event.Phase, error) {
	p := a.begin(PhaseAttach, len(set.progs))
	for len(set.progs) > 0 {
		if err := ctx.Err(); err != nil {
			return p.end(), fmt.Errorf("attach.Attach: %w", err)
		}
		l := set.progs[0]
		p.about(l.fn)
		t0 := a.now()
		fd, errno := LinkCreate(l.prog.FD(), l.attachType)
		d := a.now().Sub(t0)
		if errno != 0 {
			p.fail(l.fn, d, ErrnoName(errno), fmt.Sprintf("BPF_LINK_CREATE: %s (%v)", ErrnoName(errno), errno))
		} else {
			set.links = append(set.links, Link{Func: l.fn, FD: fd})
			p.ok(d)
		}
		l.prog.Close()
		set.progs = set.progs[1:]
	}
	return p.end(), nil
}

// Detach closes n links of set (options.All for every one), timing each close:
// closing the last reference to a tracing link unregisters the trampoline
// synchronously, so the close is the detach. Links beyond n stay attached.
func (a *Attacher) Detach(ctx context.Context, set *Set, n int) (event.Phase, error) {
	if n == options.All || n > len(set.links) {
		n = len(set.links)
	}
	p := a.begin(PhaseDetach, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return p.end(), fmt.Errorf("attach.Detach: %w", err)
		}
		l := set.links[0]
		set.links = set.links[1:]
		p.about(l.Func)
		t0 := a.now()
		err := unix.Close(l.FD)
		d := a.now().Sub(t0)
		if err != nil {
			errno, _ := errnoOf(err)
			p.fail(l.Func, d, errno, "close link: "+err.Error())
			continue
		}
		p.ok(d)
	}
	return p.end(), nil
}

// loaded is a program waiting to be attached.
type loaded struct {
	fn         string
	prog       *ebpf.Program
	attachType uint32 // of BPF_LINK_CREATE: the program's own
}

// attachTypeOf is the link's attach type for a program's.
func attachTypeOf(t ebpf.AttachType) uint32 {
	if t == ebpf.AttachTraceFExit {
		return unix.BPF_TRACE_FEXIT
	}
	return unix.BPF_TRACE_FENTRY
}

// Link is one attached fentry trampoline.
type Link struct {
	// Func is the traced kernel function.
	Func string
	// FD is the BPF link; closing it detaches.
	FD int
}

// Set owns every program and link the Attacher created, so that one Close on
// every exit path releases them all.
type Set struct {
	progs []loaded
	links []Link
}

// NewSet returns an empty Set.
func NewSet() *Set { return &Set{} }

// Loaded is the number of programs loaded but not attached.
func (s *Set) Loaded() int { return len(s.progs) }

// Links returns the links still attached.
func (s *Set) Links() []Link { return append([]Link(nil), s.links...) }

// Close releases all remaining programs and links, untimed. It is safe to
// call more than once.
func (s *Set) Close() error {
	var errs []error
	for _, l := range s.progs {
		if err := l.prog.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close program for %s: %w", l.fn, err))
		}
	}
	s.progs = nil
	for _, l := range s.links {
		if err := unix.Close(l.FD); err != nil {
			errs = append(errs, fmt.Errorf("close link for %s: %w", l.Func, err))
		}
	}
	s.links = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("attach.Set.Close: %w", err)
	}
	return nil
}
