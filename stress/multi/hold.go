package multi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/latency"
	"github.com/ftrace-harness/fth/wire/event"
)

// The phases Hold, Add and Held.Detach emit, beside the storm's own.
const (
	PhaseAttach = "multi-attach"
	PhaseDetach = "multi-detach"
)

// DefaultChunk is the most functions one link names: 38,000 functions are
// 38 links. One tracing_multi link's attach takes every trampoline's lock
// at once (trampoline_lock_all) and runs in one syscall: for a module's
// functions 7.3 looks each name up by a linear walk of the module's
// symbols (bpf_check_attach_btf_id_multi, find_kallsyms_symbol_value), so
// a link of 4,096 of fth_scale.ko's 32,768 functions took 20 s under TCG,
// one task in the kernel all along, and held an RCU-tasks grace period
// past the harness's 11-s stall report (2026-12-07). 1,024 keeps each
// link a quarter of that.
const DefaultChunk = 1024

// Kind is the kind of multi-function link a Held makes.
type Kind string

const (
	// Tracing is BPF_TRACE_FENTRY_MULTI (Linux 7.3 with one shared
	// direct ops, x86_64): a BPF trampoline per function, all behind the
	// kernel's one direct ops.
	Tracing Kind = "tracing_multi"
	// Kprobe is BPF_TRACE_KPROBE_MULTI: one fprobe, an ftrace_ops whose
	// filter holds every function, on the arches whose 7.3 has no
	// tracing_multi.
	Kprobe Kind = "kprobe_multi"
)

// Group is the functions of one BTF object, which one program reaches.
type Group struct {
	// Name is "vmlinux" or the module's name, for messages.
	Name string
	// Spec is the object's BTF: vmlinux's, or the module's split on it.
	// A kprobe_multi link names functions by symbol and needs none.
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
	// Emit gets the phases, the failures and the logs.
	Emit emit.Emitter
	// Kind is the link kind (default Tracing).
	Kind Kind
	// Chunk is the most functions one link names (0: DefaultChunk).
	Chunk int

	// link stands in for the kernel in tests: it links fns (ids their
	// BTF ids) and returns what closes the link.
	link func(g Group, fns []string, ids []uint32) (func() error, unix.Errno, error)
}

// Held is the live multi-function links of one Hold and its Adds.
type Held struct {
	cfg   Config
	progs []func() error
	links []held
	// Functions is how many functions the links attach.
	Functions int
}

type held struct {
	close func() error
	funcs int
}

// Hold makes a Held and attaches groups' functions to it (Add).
func Hold(ctx context.Context, cfg Config, groups []Group) (*Held, event.Phase, error) {
	if cfg.Chunk <= 0 {
		cfg.Chunk = DefaultChunk
	}
	if cfg.Kind == "" {
		cfg.Kind = Tracing
	}
	h := &Held{cfg: cfg}
	ph, err := h.Add(ctx, groups)
	return h, ph, err
}

// Add attaches more functions, cfg.Chunk to a link. A link the kernel
// refuses is split in two until the refused functions are found, each
// reported as a failure of the multi-attach phase, which is emitted at the
// end. The error is for what stops the phase (a program the kernel
// refuses, ctx canceled); the links made so far are held either way.
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
	all := total(groups)
	for _, g := range groups {
		if len(g.Funcs) == 0 {
			continue
		}
		linkFn := cfg.link
		if linkFn == nil {
			var err error
			if linkFn, err = h.kernelLinker(g); err != nil {
				return end(fmt.Errorf("%s: %w", g.Name, err))
			}
		}
		var ids []uint32
		if cfg.Kind == Tracing {
			var err error
			if ids, err = IDs(g.Spec, g.Funcs); err != nil {
				return end(fmt.Errorf("%s: %w", g.Name, err))
			}
		}
		// attach1 links fns[lo:hi], splitting a refused link until each
		// refused function stands alone.
		var attach1 func(lo, hi int) error
		attach1 = func(lo, hi int) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var sub []uint32
			if ids != nil {
				sub = ids[lo:hi]
			}
			t0 := time.Now()
			closeFn, errno, err := linkFn(g, g.Funcs[lo:hi], sub)
			switch {
			case err == nil:
				samples = append(samples, time.Since(t0))
				h.links = append(h.links, held{close: closeFn, funcs: hi - lo})
				h.Functions += hi - lo
				ph.Attempted += hi - lo
				ph.Succeeded += hi - lo
				return nil
			case errno == 0:
				return fmt.Errorf("%s link over %d functions of %s: %w", cfg.Kind, hi-lo, g.Name, err)
			case errno == unix.EOPNOTSUPP:
				// The kernel has no such link (7.3's
				// bpf_tracing_multi_attach() without one shared direct
				// ops, arm64's): a refusal of the kind, not of these
				// functions, and no use splitting.
				return fmt.Errorf("%s link over %d functions of %s: %w", cfg.Kind, hi-lo, g.Name, err)
			case hi-lo > 1:
				mid := lo + (hi-lo)/2
				if err := attach1(lo, mid); err != nil {
					return err
				}
				return attach1(mid, hi)
			}
			ph.Attempted++
			ph.Failed++
			name := attach.ErrnoName(errno)
			if ph.Errnos == nil {
				ph.Errnos = map[string]int{}
			}
			ph.Errnos[name]++
			_ = cfg.Emit.Emit(event.Event{Kind: event.KindFailure, Failure: &event.Failure{
				Phase: PhaseAttach, Function: g.Funcs[lo], Errno: name,
				Msg: fmt.Sprintf("%s link on %s (%s): %v", cfg.Kind, g.Funcs[lo], g.Name, err),
			}})
			return nil
		}
		for i := 0; i < len(g.Funcs); i += cfg.Chunk {
			if err := attach1(i, min(i+cfg.Chunk, len(g.Funcs))); err != nil {
				return end(err)
			}
			_ = cfg.Emit.Emit(event.Event{Kind: event.KindProgress, Progress: &event.Progress{
				Phase: PhaseAttach, Done: ph.Attempted, Total: all,
			}})
		}
		emit.Logf(cfg.Emit, "multi: %s: %d of %d functions attached by %s links", g.Name, ph.Succeeded, ph.Attempted, cfg.Kind)
	}
	return end(nil)
}

// kernelLinker loads the program of g's links and returns what links it.
func (h *Held) kernelLinker(g Group) (func(Group, []string, []uint32) (func() error, unix.Errno, error), error) {
	switch h.cfg.Kind {
	case Tracing:
		prog, err := LoadProgram(g.BTFFD)
		if err != nil {
			return nil, err
		}
		h.progs = append(h.progs, func() error { return unix.Close(prog) })
		return func(_ Group, _ []string, ids []uint32) (func() error, unix.Errno, error) {
			fd, errno := Link(prog, ids)
			if errno != 0 {
				return nil, errno, fmt.Errorf("BPF_LINK_CREATE: %w", errno)
			}
			return func() error { return unix.Close(fd) }, 0, nil
		}, nil
	case Kprobe:
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name: progName, Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeMulti, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			return nil, fmt.Errorf("load a kprobe_multi program: %w", err)
		}
		h.progs = append(h.progs, prog.Close)
		return func(_ Group, fns []string, _ []uint32) (func() error, unix.Errno, error) {
			l, err := link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: fns})
			if err != nil {
				errno := unix.EINVAL
				errors.As(err, &errno)
				if errors.Is(err, ebpf.ErrNotSupported) {
					// The kernel has none: not a refusal of these
					// functions, and no use splitting.
					errno = 0
				}
				return nil, errno, err
			}
			return l.Close, 0, nil
		}, nil
	}
	return nil, fmt.Errorf("unknown link kind %q", h.cfg.Kind)
}

func total(groups []Group) int {
	n := 0
	for _, g := range groups {
		n += len(g.Funcs)
	}
	return n
}

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
		if err := l.close(); err != nil {
			ph.Failed += l.funcs
			errs = append(errs, fmt.Errorf("close a %s link of %d functions: %w", h.cfg.Kind, l.funcs, err))
			continue
		}
		samples = append(samples, time.Since(t0))
		ph.Succeeded += l.funcs
	}
	h.links, h.Functions = nil, 0
	for _, p := range h.progs {
		_ = p()
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
		_ = l.close()
	}
	for _, p := range h.progs {
		_ = p()
	}
	h.links, h.progs, h.Functions = nil, nil, 0
}

// Kind says which kind of link h makes.
func (h *Held) Kind() Kind { return h.cfg.Kind }

// HoldBest holds groups by tracing_multi, or by kprobe_multi where the
// kernel refuses a tracing_multi program or link outright (7.3 has
// tracing_multi on x86_64 only); refused says why tracing_multi was not
// used, nil when it was. err is Hold's for the kind that was used. Only a
// refusal by the kernel (Refused) leads to kprobe_multi: a failure of the
// harness's own stays an error.
func HoldBest(ctx context.Context, cfg Config, groups []Group) (h *Held, ph event.Phase, refused, err error) {
	cfg.Kind = Tracing
	h, ph, err = Hold(ctx, cfg, groups)
	if err == nil || h.Functions > 0 || ctx.Err() != nil || !Refused(err) {
		return h, ph, nil, err
	}
	h.Close()
	refused = err
	emit.Logf(cfg.Emit, "multi: tracing_multi refused (%v); kprobe_multi instead", err)
	cfg.Kind = Kprobe
	h, ph, err = Hold(ctx, cfg, groups)
	return h, ph, refused, err
}
