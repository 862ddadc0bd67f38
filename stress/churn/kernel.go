package churn

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/stress/tracers"
	"github.com/ftrace-harness/fth/wire/event"
)

// KprobeGroup is the kprobe event group of every probe the agent creates,
// so that cleanup can find them all and leave everyone else's alone.
const KprobeGroup = "fth"

// Real is the Kernel that changes the running kernel.
type Real struct {
	// Loader loads func-ip programs (calibrated or not).
	Loader *oracle.Loader
	// Ftrace is the function tracer at the top level of tracefs.
	Ftrace *tracers.Filtered
	// Top is the top-level tracing directory, for kprobes.
	Top tracefs.FS

	mu    sync.Mutex
	links map[int]string // open link fds, for Close
	prev  map[string]oracle.Counters
}

// NewReal returns a Real.
func NewReal(l *oracle.Loader, ftrace *tracers.Filtered, top tracefs.FS) *Real {
	return &Real{Loader: l, Ftrace: ftrace, Top: top, links: map[int]string{}, prev: map[string]oracle.Counters{}}
}

// Load implements Kernel.
func (r *Real) Load(fn string, kind oracle.Kind) (Prog, error) {
	ld, err := r.Loader.Load(fn, kind, oracle.Key(kind, fn))
	if err != nil {
		return Prog{}, err
	}
	return Prog{Func: fn, Kind: kind, Impl: ld}, nil
}

func progOf(p Prog) (*oracle.Loaded, error) {
	ld, ok := p.Impl.(*oracle.Loaded)
	if !ok || ld == nil || ld.Prog == nil {
		return nil, fmt.Errorf("churn: %s %s: not a loaded program", p.Kind, p.Func)
	}
	return ld, nil
}

// Link implements Kernel with a raw BPF_LINK_CREATE, for the true errno.
func (r *Real) Link(p Prog) (Link, error) {
	ld, err := progOf(p)
	if err != nil {
		return Link{}, err
	}
	fd, errno := attach.LinkCreate(ld.Prog.FD(), p.Kind.LinkType())
	if errno != 0 {
		return Link{}, fmt.Errorf("BPF_LINK_CREATE %s %s: %w", p.Kind, p.Func, errno)
	}
	r.mu.Lock()
	r.links[fd] = p.Func
	r.mu.Unlock()
	return Link{Func: p.Func, Kind: p.Kind, FD: fd}, nil
}

// Update implements Kernel with a raw BPF_LINK_UPDATE.
func (r *Real) Update(l Link, p Prog) error {
	ld, err := progOf(p)
	if err != nil {
		return err
	}
	if errno := attach.LinkUpdate(l.FD, ld.Prog.FD()); errno != 0 {
		return fmt.Errorf("BPF_LINK_UPDATE %s %s: %w", l.Kind, l.Func, errno)
	}
	return nil
}

// Unlink implements Kernel: closing the only reference to a tracing link
// unregisters it synchronously.
func (r *Real) Unlink(l Link) error {
	r.mu.Lock()
	delete(r.links, l.FD)
	r.mu.Unlock()
	if err := unix.Close(l.FD); err != nil {
		return fmt.Errorf("close link %s %s: %w", l.Kind, l.Func, err)
	}
	return nil
}

// Release implements Kernel.
func (r *Real) Release(p Prog) {
	if ld, err := progOf(p); err == nil {
		ld.Prog.Close()
	}
}

// FtraceOn implements Kernel.
func (r *Real) FtraceOn(fn string) error { return r.Ftrace.Add(fn) }

// FtraceOff implements Kernel.
func (r *Real) FtraceOff(fn string) error { return r.Ftrace.Remove(fn) }

func (r *Real) probe(fn string) tracefs.Probe {
	return tracefs.Probe{Group: KprobeGroup, Event: tracefs.EventName("", fn), Target: fn}
}

// KprobeOn implements Kernel: define, then arm. A probe that cannot be
// armed is deleted again, so that a failed On leaves nothing behind.
func (r *Real) KprobeOn(fn string) error {
	p := r.probe(fn)
	if err := r.Top.AddProbe(p); err != nil {
		return err
	}
	if err := r.Top.EnableEvent(p.Group, p.Event, true); err != nil {
		if rerr := r.Top.RemoveProbe(p.Group, p.Event); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// KprobeOff implements Kernel: disarm, then delete (the kernel refuses to
// delete an armed probe with EBUSY).
func (r *Real) KprobeOff(fn string) error {
	p := r.probe(fn)
	derr := r.Top.EnableEvent(p.Group, p.Event, false)
	if err := r.Top.RemoveProbe(p.Group, p.Event); err != nil {
		return errors.Join(derr, err)
	}
	return derr
}

// Check implements Kernel: every kind's slot of fn is compared with the
// previous read.
func (r *Real) Check(fn string) ([]event.Oracle, error) {
	exp, ok := r.Loader.Expected(fn)
	if !r.Loader.Checking() || !ok {
		return nil, nil
	}
	var out []event.Oracle
	for _, kind := range []oracle.Kind{oracle.FEntry, oracle.FExit} {
		key := oracle.Key(kind, fn)
		slot, err := r.Loader.Map.Slot(key)
		if err != nil {
			return out, err
		}
		cur, err := r.Loader.Map.Read(slot)
		if err != nil {
			return out, err
		}
		r.mu.Lock()
		prev := r.prev[key]
		r.prev[key] = cur
		r.mu.Unlock()
		if cur.Hits == prev.Hits && cur.Bad == prev.Bad {
			continue // no program of this kind ran since the last check
		}
		out = append(out, oracle.CheckFuncIP(fn, kind, exp, prev, cur))
	}
	return out, nil
}

// maxUpdateTries bounds how many hot functions ProbeLinkUpdate tries
// before giving up on finding one it can attach to.
const maxUpdateTries = 3

// ProbeLinkUpdate finds out once whether BPF_LINK_UPDATE works on tracing
// links: it attaches a func-ip program to one of fns and tries to replace
// it with another. Supported false carries the errno of the update
// (EINVAL up to Linux 7.3, whose tracing links have no update_prog); when
// no function would take a program at all, the message says so.
func (r *Real) ProbeLinkUpdate(fns []string) event.Feature {
	f := event.Feature{Name: "bpf_link_update_tracing"}
	var setup []error
	for _, fn := range fns[:min(len(fns), maxUpdateTries)] {
		err, updErr := r.tryUpdate(fn)
		if err != nil {
			setup = append(setup, err)
			continue
		}
		if updErr != nil {
			f.Errno, _ = attach.ErrnoOf(updErr)
			f.Msg = attach.Message(updErr)
			return f
		}
		f.Supported = true
		f.Msg = "on " + fn
		return f
	}
	f.Msg = "not probed: " + attach.Message(errors.Join(setup...))
	return f
}

// tryUpdate attaches one program to fn and replaces it with a second. err
// is for the setup, updErr for the update itself.
func (r *Real) tryUpdate(fn string) (err, updErr error) {
	a, err := r.Load(fn, oracle.FEntry)
	if err != nil {
		return err, nil
	}
	defer r.Release(a)
	b, err := r.Load(fn, oracle.FEntry)
	if err != nil {
		return err, nil
	}
	defer r.Release(b)
	l, err := r.Link(a)
	if err != nil {
		return err, nil
	}
	defer r.Unlink(l)
	return nil, r.Update(l, b)
}

// Close detaches links a cycle failed to, switches the function tracer off
// and deletes every kprobe of KprobeGroup. It is safe after any error.
func (r *Real) Close() error {
	var errs []error
	r.mu.Lock()
	for fd, fn := range r.links {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("close link of %s: %w", fn, err))
		}
	}
	r.links = map[int]string{}
	r.mu.Unlock()
	if r.Ftrace != nil {
		errs = append(errs, r.Ftrace.Close())
	}
	errs = append(errs, r.Top.ClearProbes(KprobeGroup))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("churn.Real.Close: %w", err)
	}
	return nil
}
