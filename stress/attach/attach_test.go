package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

func TestErrnoName(t *testing.T) {
	for e, want := range map[unix.Errno]string{
		unix.EINVAL:  "EINVAL",
		unix.EPERM:   "EPERM",
		unix.E2BIG:   "E2BIG",
		unix.EBUSY:   "EBUSY",
		unix.ENOENT:  "ENOENT",
		524:          "ENOTSUPP",
		512:          "ERESTARTSYS",
		530:          "ERECALLCONFLICT",
		520:          "errno520",
		9999:         "errno9999",
		unix.EMFILE:  "EMFILE",
		unix.ENOSPC:  "ENOSPC",
		unix.ENOTSUP: "EOPNOTSUPP",
	} {
		if got := ErrnoName(e); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", int(e), got, want)
		}
	}
}

func TestErrnoOfAndMessage(t *testing.T) {
	wrapped := fmt.Errorf("program fentry: load program: %w", fmt.Errorf("inner: %w", unix.Errno(524)))
	if name, ok := errnoOf(wrapped); !ok || name != "ENOTSUPP" {
		t.Errorf("errnoOf = %q, %v", name, ok)
	}
	if _, ok := errnoOf(errors.New("no errno here")); ok {
		t.Error("errnoOf found an errno in a plain error")
	}

	ve := &ebpf.VerifierError{Cause: unix.EINVAL, Log: []string{"", "arg0 type FLOAT is not supported", "processed 0 insns"}}
	err := fmt.Errorf("program fentry: %w", ve)
	if name, ok := errnoOf(err); !ok || name != "EINVAL" {
		t.Errorf("errnoOf(verifier) = %q, %v", name, ok)
	}
	msg := message(err)
	if !strings.Contains(msg, "arg0 type FLOAT is not supported") {
		t.Errorf("message = %q, want the first verifier log line", msg)
	}
	if m := message(errors.New("first\nsecond")); m != "first" {
		t.Errorf("message = %q, want first line only", m)
	}
	if m := message(errors.New(strings.Repeat("x", 2*maxMsg))); len(m) > maxMsg+4 {
		t.Errorf("message not truncated: %d bytes", len(m))
	}
}

func TestLinkCreateAttrLayout(t *testing.T) {
	var a linkCreateAttr
	// Offsets of union bpf_attr.link_create in include/uapi/linux/bpf.h.
	for name, got := range map[string]uintptr{
		"prog_fd":       unsafe.Offsetof(a.progFD),
		"target_fd":     unsafe.Offsetof(a.targetFD),
		"attach_type":   unsafe.Offsetof(a.attachType),
		"flags":         unsafe.Offsetof(a.flags),
		"target_btf_id": unsafe.Offsetof(a.targetBTFID),
	} {
		want := map[string]uintptr{"prog_fd": 0, "target_fd": 4, "attach_type": 8, "flags": 12, "target_btf_id": 16}[name]
		if got != want {
			t.Errorf("offset of %s = %d, want %d", name, got, want)
		}
	}
	if s := unsafe.Sizeof(a); s != 24 {
		t.Errorf("size = %d, want 24", s)
	}
	if unix.BPF_LINK_CREATE != 28 || unix.BPF_TRACE_FENTRY != 24 {
		t.Errorf("BPF_LINK_CREATE, BPF_TRACE_FENTRY = %d, %d", unix.BPF_LINK_CREATE, unix.BPF_TRACE_FENTRY)
	}
}

func TestProgramSpec(t *testing.T) {
	p := Program("vfs_read")
	if p.Type != ebpf.Tracing || p.AttachType != ebpf.AttachTraceFEntry || p.AttachTo != "vfs_read" || p.License != "GPL" {
		t.Errorf("spec = %+v", p)
	}
	if len(p.Instructions) != 2 {
		t.Errorf("instructions = %v", p.Instructions)
	}
}

// fakeClock advances by step at every call, so every operation "takes" step.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func newTestAttacher(t *testing.T, m *emit.Memory, maxFail int) *Attacher {
	t.Helper()
	a, err := New(Config{Cache: btf.NewCache(), Emit: m, MaxFailureEvents: maxFail})
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: time.Unix(0, 0), step: time.Millisecond}
	a.now = c.now
	return a
}

func TestPhaseAccounting(t *testing.T) {
	var m emit.Memory
	a := newTestAttacher(t, &m, 3)
	p := a.begin(PhaseAttach, 250)
	for i := range 250 {
		if i%50 == 0 {
			p.fail(fmt.Sprintf("f%d", i), time.Millisecond, "EINVAL", "bad")
			continue
		}
		if i == 7 {
			p.fail("g", 2*time.Millisecond, "", "no errno")
			continue
		}
		p.ok(time.Duration(i) * time.Microsecond)
	}
	ph := p.end()
	if ph.Attempted != 250 || ph.Failed != 6 || ph.Succeeded != 244 {
		t.Errorf("counts = %+v", ph)
	}
	if ph.Errnos["EINVAL"] != 5 || ph.Errnos[OtherErrno] != 1 {
		t.Errorf("Errnos = %v", ph.Errnos)
	}
	if ph.Latency.Count != 250 || ph.Latency.Max.Std() != 2*time.Millisecond {
		t.Errorf("Latency = %+v", ph.Latency)
	}
	if f := m.OfKind(event.KindFailure); len(f) != 3 {
		t.Errorf("Failure events = %d, want the cap of 3", len(f))
	}
	// Counting Progress: one per 100 operations (the fake clock moves 1ms
	// per call, far below the 2s interval).
	if pr := m.OfKind(event.KindProgress); len(pr) != 2 || pr[1].Progress.Done != 200 || pr[1].Progress.Total != 250 {
		t.Errorf("Progress events = %+v", pr)
	}
	phases := m.OfKind(event.KindPhase)
	if len(phases) != 1 || phases[0].Phase.Name != PhaseAttach || phases[0].Phase.Wall <= 0 {
		t.Errorf("Phase events = %+v", phases)
	}

	// The cap is per phase: the next phase reports its own failures.
	p = a.begin(PhaseDetach, 5)
	for i := range 5 {
		p.fail(fmt.Sprintf("d%d", i), time.Millisecond, "EBUSY", "busy")
	}
	p.end()
	if f := m.OfKind(event.KindFailure); len(f) != 6 || f[5].Failure.Phase != PhaseDetach {
		t.Errorf("Failure events after a second phase = %d, want 6", len(f))
	}
}

func TestProgressByTime(t *testing.T) {
	var m emit.Memory
	a := newTestAttacher(t, &m, 0)
	c := &fakeClock{t: time.Unix(0, 0), step: 700 * time.Millisecond}
	a.now = c.now
	p := a.begin(PhaseLoad, 10)
	for range 5 {
		p.ok(time.Millisecond)
	}
	// Each ok() reads the clock once: 0.7s apart, so every third crosses 2s.
	if n := len(m.OfKind(event.KindProgress)); n != 1 {
		t.Errorf("Progress events = %d, want 1", n)
	}
}

func TestDetachClosesAndTimes(t *testing.T) {
	var m emit.Memory
	a := newTestAttacher(t, &m, 0)
	set := NewSet()
	for i := range 4 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Dup(int(f.Fd()))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		set.links = append(set.links, Link{Func: fmt.Sprintf("f%d", i), FD: fd})
	}
	// A link whose fd is already gone reports EBADF.
	set.links = append(set.links[:2], append([]Link{{Func: "gone", FD: -1}}, set.links[2:]...)...)

	ph, err := a.Detach(context.Background(), set, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ph.Attempted != 3 || ph.Succeeded != 2 || ph.Failed != 1 || ph.Errnos["EBADF"] != 1 {
		t.Errorf("phase = %+v", ph)
	}
	if got := len(set.Links()); got != 2 {
		t.Errorf("links left = %d, want 2", got)
	}
	f := m.OfKind(event.KindFailure)
	if len(f) != 1 || f[0].Failure.Function != "gone" || f[0].Failure.Errno != "EBADF" || f[0].Failure.Phase != PhaseDetach {
		t.Errorf("failures = %+v", f)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Detach(ctx, set, options.All); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Detach err = %v", err)
	}
	if err := set.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := set.Close(); err != nil || len(set.Links()) != 0 {
		t.Errorf("second Close = %v, links %d", err, len(set.Links()))
	}
}

func TestNewRequiresCacheAndEmitter(t *testing.T) {
	if _, err := New(Config{Emit: &emit.Memory{}}); err == nil {
		t.Error("New without cache succeeded")
	}
	if _, err := New(Config{Cache: btf.NewCache()}); err == nil {
		t.Error("New without emitter succeeded")
	}
}

// TestInVM loads, attaches and detaches real trampolines. It runs only with
// FTH_IN_VM=1: on a developer's host it would patch the running kernel.
func TestInVM(t *testing.T) {
	if os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_IN_VM=1 inside the test VM to attach real trampolines")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if err := PrepareLimits(10); err != nil {
		t.Log(err)
	}
	var m emit.Memory
	a, err := New(Config{Cache: btf.NewCache(), Emit: &m})
	if err != nil {
		t.Fatal(err)
	}
	set := NewSet()
	defer set.Close()
	ctx := context.Background()
	load, err := a.Load(ctx, set, []string{"vfs_read", "vfs_write", "fth_no_such_function"})
	if err != nil {
		t.Fatal(err)
	}
	if load.Succeeded != 2 || load.Failed != 1 {
		t.Errorf("load = %+v, failures %+v", load, m.OfKind(event.KindFailure))
	}
	att, err := a.Attach(ctx, set)
	if err != nil {
		t.Fatal(err)
	}
	if att.Succeeded != 2 {
		t.Fatalf("attach = %+v, failures %+v", att, m.OfKind(event.KindFailure))
	}
	// Make the traced functions run.
	if _, err := os.ReadFile("/proc/self/stat"); err != nil {
		t.Fatal(err)
	}
	det, err := a.Detach(ctx, set, options.All)
	if err != nil || det.Succeeded != 2 {
		t.Errorf("detach = %+v, %v", det, err)
	}
}

func TestLinkUpdateAttrLayout(t *testing.T) {
	var a linkUpdateAttr
	// Offsets of union bpf_attr.link_update in include/uapi/linux/bpf.h.
	for name, got := range map[string]uintptr{
		"link_fd":     unsafe.Offsetof(a.linkFD),
		"new_prog_fd": unsafe.Offsetof(a.newProgFD),
		"flags":       unsafe.Offsetof(a.flags),
		"old_prog_fd": unsafe.Offsetof(a.oldProgFD),
	} {
		want := map[string]uintptr{"link_fd": 0, "new_prog_fd": 4, "flags": 8, "old_prog_fd": 12}[name]
		if got != want {
			t.Errorf("offset of %s = %d, want %d", name, got, want)
		}
	}
	if unix.BPF_LINK_UPDATE != 29 || unix.BPF_TRACE_FEXIT != 25 {
		t.Errorf("BPF_LINK_UPDATE, BPF_TRACE_FEXIT = %d, %d", unix.BPF_LINK_UPDATE, unix.BPF_TRACE_FEXIT)
	}
}

// TestRawLinkErrnos passes fds that are not BPF objects: the kernel must
// answer with an errno (EBADF, or EPERM where bpf() is off), never a link.
func TestRawLinkErrnos(t *testing.T) {
	if fd, errno := LinkCreate(-1, unix.BPF_TRACE_FEXIT); errno == 0 {
		unix.Close(fd)
		t.Error("LinkCreate on fd -1 succeeded")
	}
	if errno := LinkUpdate(-1, -1); errno == 0 {
		t.Error("LinkUpdate on fd -1 succeeded")
	}
	if name, ok := ErrnoOf(fmt.Errorf("x: %w", unix.EBADF)); !ok || name != "EBADF" {
		t.Errorf("ErrnoOf = %q, %v", name, ok)
	}
	if Message(errors.New("a\nb")) != "a" {
		t.Error("Message")
	}
}
