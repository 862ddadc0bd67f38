package deliver

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/livepatch"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
)

// The users the agent attaches itself: BPF programs (Counted), tracers
// (Toggle) and the livepatch (External).

// bpfCounted is a func-ip fentry or fexit program on FuncSeq, counting in
// the oracle map's slot for its kind.
type bpfCounted struct {
	l    *oracle.Loader
	kind oracle.Kind
	// fail emits a failed func-ip check and records it for the verdict.
	fail func(event.Oracle)
	link int
	prev oracle.Counters
	slot uint32
	// progs are the programs of the attachment in place, kept open for
	// their recursion-miss counts; missed sums those of detached ones.
	progs  []*ebpf.Program
	missed uint64
}

// newBPFCounted is a detached user of kind whose programs l loads.
func newBPFCounted(l *oracle.Loader, kind oracle.Kind, fail func(event.Oracle)) *bpfCounted {
	return &bpfCounted{l: l, kind: kind, fail: fail, link: -1}
}

func (b *bpfCounted) key() string { return oracle.Key(b.kind, FuncSeq) }

func (b *bpfCounted) Attach() error {
	ld, err := b.l.Load(FuncSeq, b.kind, b.key())
	if err != nil {
		return err
	}
	b.slot = ld.FuncIP.Slot
	b.prev, _ = b.l.Map.Read(b.slot)
	fd, errno := attach.LinkCreate(ld.Prog.FD(), b.kind.LinkType())
	if errno != 0 {
		ld.Prog.Close()
		return fmt.Errorf("BPF_LINK_CREATE: %w: %w", ErrRefused, errno)
	}
	b.link = fd
	b.progs = append(b.progs, ld.Prog)
	return nil
}

func (b *bpfCounted) Detach() error {
	if b.link < 0 {
		return nil
	}
	err := unix.Close(b.link)
	b.link = -1
	for _, p := range b.progs {
		if st, serr := p.Stats(); serr == nil {
			b.missed += st.RecursionMisses
		}
		p.Close()
	}
	b.progs = nil
	if exp, ok := b.l.Expected(FuncSeq); ok && b.l.Checking() {
		if cur, rerr := b.l.Map.Read(b.slot); rerr == nil {
			if o := oracle.CheckFuncIP(FuncSeq, b.kind, exp, b.prev, cur); !o.OK {
				b.fail(o)
			}
		}
	}
	return err
}

// Missed is how many runs the kernel skipped because the program was
// already running on that CPU (BPF's per-CPU recursion guard: a caller
// preempted inside the program, another caller on its CPU): by design,
// not a lost call. Complete once the user is detached.
func (b *bpfCounted) Missed() (uint64, error) { return b.missed, nil }

// bpfUpdater is a bpfCounted that can be replaced in place.
type bpfUpdater struct{ *bpfCounted }

// Update replaces the attached program with a new one counting in the
// same slot (BPF_LINK_UPDATE): the trampoline is regenerated and the
// callsite's direct call modified, a transition for every other user.
func (b bpfUpdater) Update() error { return b.update() }

func (b *bpfCounted) update() error {
	if b.link < 0 {
		return fmt.Errorf("%s: not attached", b.kind)
	}
	ld, err := b.l.Load(FuncSeq, b.kind, b.key())
	if err != nil {
		return err
	}
	if errno := attach.LinkUpdate(b.link, ld.Prog.FD()); errno != 0 {
		ld.Prog.Close()
		return fmt.Errorf("BPF_LINK_UPDATE: %w", errno)
	}
	b.progs = append(b.progs, ld.Prog)
	return nil
}

func (b *bpfCounted) Hits() (uint64, error) {
	slot, err := b.l.Map.Slot(b.key())
	if err != nil {
		return 0, err
	}
	c, err := b.l.Map.Read(slot)
	return c.Hits, err
}

// tracerToggle switches a tracer filtered to FuncSeq on and off in an
// instance of its own.
type tracerToggle struct {
	fs     tracefs.FS
	tracer string
}

func (t tracerToggle) On() error {
	if err := t.fs.SetFilter(FuncSeq); err != nil {
		return err
	}
	return t.fs.SetTracer(t.tracer)
}

func (t tracerToggle) Off() error { return t.fs.SetTracer(tracefs.Nop) }

// KLPModule is the delivery oracle's livepatch (stress/kmod-klp), the
// module of UserLivepatch.
const KLPModule = "fth_klp"

// klpPath is KLPModule's file in the image.
const klpPath = modload.DefaultDir + "/" + KLPModule + ".ko"

// NoLivepatch says why the livepatch user cannot run here ("" if it
// can): no module file, or a kernel without CONFIG_LIVEPATCH.
func NoLivepatch() string {
	if _, err := os.Stat(klpPath); err != nil {
		return KLPModule + ".ko is not in the image"
	}
	return livepatch.Supported(livepatch.DefaultDir)
}

// klpUser attaches the livepatch user by loading fth_klp.ko and detaches
// it by disabling the patch and unloading the module, each waiting out
// the per-task transition (up to a minute: a task is switched only when
// the patched function is off its stack).
type klpUser struct {
	ctx context.Context
	rec *tally.Recorder
	w   *emit.Writer
}

// NewKLPUser is the livepatch user (UserLivepatch), applied while ctx
// lasts and removed even after it ended, its module's load and unload
// timed in rec, where it was loaded logged in w. Only where NoLivepatch
// says nothing can it attach.
func NewKLPUser(ctx context.Context, rec *tally.Recorder, w *emit.Writer) External {
	return klpUser{ctx: ctx, rec: rec, w: w}
}

func (k klpUser) patch() livepatch.Patch {
	return livepatch.Patch{
		Dir: livepatch.DefaultDir, Name: KLPModule, Timeout: time.Minute,
		Load: func() error {
			return k.rec.Time(modload.OpLoad, KLPModule, func() error {
				return modload.Load(klpPath, "")
			})
		},
		Unload: func() error { return modload.UnloadRetry(k.rec, KLPModule, 50) },
	}
}

func (k klpUser) Attach() error {
	if err := k.patch().Enable(k.ctx); err != nil {
		return err
	}
	modload.LogLoaded(k.w, KLPModule)
	return nil
}

func (k klpUser) Detach() error { return k.patch().Disable(context.WithoutCancel(k.ctx)) }
