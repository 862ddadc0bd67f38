package multi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/latency"
	"github.com/ftrace-harness/fth/stress/report"
	"github.com/ftrace-harness/fth/wire/event"
)

// The phases Hold and Held.Detach emit, beside the storm's own.
const (
	PhaseAttach = "multi-attach"
	PhaseDetach = "multi-detach"
)

// DefaultChunk is the most functions one link names: 38,000 functions are
// ten links. One link's attach takes every trampoline's lock at once
// (trampoline_lock_all), so a link of every function would hold them all
// for its whole update.
const DefaultChunk = 4096

// Group is the functions of one BTF object, which one program reaches.
type Group struct {
	// Name is "vmlinux" or the module's name, for messages.
	Name string
	// Spec is the object's BTF: vmlinux's, or the module's split on it.
	Spec *btf.Spec
	// BTFFD is the module's BTF handle (ModuleHandle); 0 for vmlinux.
	BTFFD int
	// Funcs are the functions to attach.
	Funcs []string
}

// ModuleHandle opens the BTF object of the loaded module name, which a
// Group of the module's functions needs.
func ModuleHandle(name string) (*btf.Handle, error) {
	h, err := btf.FindHandle(func(info *btf.HandleInfo) bool { return info.IsModule() && info.Name == name })
	if err != nil {
		return nil, fmt.Errorf("BTF handle of module %s: %w", name, err)
	}
	return h, nil
}

// Config is how Hold attaches.
type Config struct {
	// Emit gets the phase, the failures and the logs.
	Emit report.Emitter
	// Chunk is the most functions one link names (0: DefaultChunk).
	Chunk int

	// load, link and close stand in for the syscalls in tests.
	load  func(btfFD int) (int, error)
	link  func(progFD int, ids []uint32) (int, unix.Errno)
	close func(fd int) error
}

// Held is the live tracing_multi links of one Hold and its Adds.
type Held struct {
	cfg   Config
	progs []int
	links []held
	// Functions is how many functions the links attach.
	Functions int
}

type held struct {
	fd    int
	funcs int
}

// Hold loads one program per group and attaches it to the group's
// functions, cfg.Chunk at a time: Add on a new Held.
func Hold(ctx context.Context, cfg Config, groups []Group) (*Held, event.Phase, error) {
	if cfg.Chunk <= 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.load == nil {
		cfg.load, cfg.link, cfg.close = LoadProgram, Link, unix.Close
	}
	h := &Held{cfg: cfg}
	ph, err := h.Add(ctx, groups)
	return h, ph, err
}

// Add attaches more functions, a program of their own per group. A link
// the kernel refuses is split in two until the refused functions are
// found, each reported as a failure of the multi-attach phase, which is
// emitted at the end. The error is for what stops the phase (a program
// the kernel refuses, ctx canceled); the links made so far are held
// either way.
func (h *Held) Add(ctx context.Context, groups []Group) (event.Phase, error) {
	cfg := h.cfg
	ph := event.Phase{Name: PhaseAttach}
	var samples []time.Duration
	start := time.Now()
	end := func(err error) (event.Phase, error) {
		ph.Latency = latency.Summarize(samples)
		ph.Wall = event.Duration(time.Since(start))
		if len(ph.Errnos) == 0 {
			ph.Errnos = nil
		}
		p := ph
		_ = cfg.Emit.Emit(event.Event{Kind: event.KindPhase, Phase: &p})
		return ph, err
	}
	// attach links ids (fns), splitting a refused link until each refused
	// function stands alone.
	var attach1 func(prog int, g string, ids []uint32, fns []string) error
	attach1 = func(prog int, g string, ids []uint32, fns []string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		fd, errno := cfg.link(prog, ids)
		if errno == 0 {
			samples = append(samples, time.Since(t0))
			h.links = append(h.links, held{fd: fd, funcs: len(ids)})
			h.Functions += len(ids)
			ph.Attempted += len(ids)
			ph.Succeeded += len(ids)
			return nil
		}
		if len(ids) == 1 {
			ph.Attempted++
			ph.Failed++
			name := attachErrno(errno)
			if ph.Errnos == nil {
				ph.Errnos = map[string]int{}
			}
			ph.Errnos[name]++
			_ = cfg.Emit.Emit(event.Event{Kind: event.KindFailure, Failure: &event.Failure{
				Phase: PhaseAttach, Function: fns[0], Errno: name,
				Msg: fmt.Sprintf("BPF_LINK_CREATE tracing_multi on %s (%s BTF id %d): %v", fns[0], g, ids[0], errno),
			}})
			return nil
		}
		half := len(ids) / 2
		if err := attach1(prog, g, ids[:half], fns[:half]); err != nil {
			return err
		}
		return attach1(prog, g, ids[half:], fns[half:])
	}
	for _, g := range groups {
		if len(g.Funcs) == 0 {
			continue
		}
		ids, err := IDs(g.Spec, g.Funcs)
		if err != nil {
			return end(fmt.Errorf("%s: %w", g.Name, err))
		}
		prog, err := cfg.load(g.BTFFD)
		if err != nil {
			return end(fmt.Errorf("%s: %w", g.Name, err))
		}
		h.progs = append(h.progs, prog)
		for i := 0; i < len(ids); i += cfg.Chunk {
			j := min(i+cfg.Chunk, len(ids))
			if err := attach1(prog, g.Name, ids[i:j], g.Funcs[i:j]); err != nil {
				return end(err)
			}
			_ = cfg.Emit.Emit(event.Event{Kind: event.KindProgress, Progress: &event.Progress{
				Phase: PhaseAttach, Done: ph.Attempted, Total: total(groups),
			}})
		}
		report.Logf(cfg.Emit, "multi: %s: %d of %d functions attached by tracing_multi links", g.Name, ph.Succeeded, ph.Attempted)
	}
	return end(nil)
}

func total(groups []Group) int {
	n := 0
	for _, g := range groups {
		n += len(g.Funcs)
	}
	return n
}

// attachErrno names errno as the storm's failures name theirs.
func attachErrno(errno unix.Errno) string { return attach.ErrnoName(errno) }

// Detach closes every link, each one's time a sample of the multi-detach
// phase it emits, then the programs. Succeeded counts the functions whose
// link closed.
func (h *Held) Detach() (event.Phase, error) {
	ph := event.Phase{Name: PhaseDetach}
	var samples []time.Duration
	start := time.Now()
	var errs []error
	for _, l := range h.links {
		ph.Attempted += l.funcs
		t0 := time.Now()
		if err := h.cfg.close(l.fd); err != nil {
			ph.Failed += l.funcs
			errs = append(errs, fmt.Errorf("close a tracing_multi link of %d functions: %w", l.funcs, err))
			continue
		}
		samples = append(samples, time.Since(t0))
		ph.Succeeded += l.funcs
	}
	h.links = nil
	h.Functions = 0
	for _, p := range h.progs {
		_ = h.cfg.close(p)
	}
	h.progs = nil
	ph.Latency = latency.Summarize(samples)
	ph.Wall = event.Duration(time.Since(start))
	p := ph
	_ = h.cfg.Emit.Emit(event.Event{Kind: event.KindPhase, Phase: &p})
	return ph, errors.Join(errs...)
}

// Close releases whatever is still held, without a phase: for the paths
// that end a run early.
func (h *Held) Close() {
	if h == nil {
		return
	}
	for _, l := range h.links {
		_ = h.cfg.close(l.fd)
	}
	for _, p := range h.progs {
		_ = h.cfg.close(p)
	}
	h.links, h.progs, h.Functions = nil, nil, 0
}
