package oracle

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
)

// Sample is what one window measured.
type Sample struct {
	// Before and After are the slot's counters around the calls.
	Before, After Counters
	// RecursionMisses is how often the kernel skipped the program because
	// it was already running on that CPU.
	RecursionMisses uint64
}

// Window attaches a fentry func-ip program to Func, makes calls with Call
// from one locked OS thread while nothing else changes Func's callsite, and
// detaches it.
type Window struct {
	Loader *Loader
	// Func is the traced function; Call must reach it exactly once.
	Func string
	Call func()
	// Key is the slot key; windows get their own slot so that churn
	// programs on other functions never count into it.
	Key string
	// Name prefixes the transition names recorded in Rec ("exact",
	// "calibrate"): <Name>_load, <Name>_attach, <Name>_detach.
	Name string
	Rec  *tally.Recorder
	// Skip is how many of the calls Run leaves out while still reporting
	// them made: non-zero only in the test-only skip-count sabotage, which
	// must make the exact-count check fail.
	Skip int
}

// Run makes calls calls inside one attach/detach of the program. check
// selects whether the program compares addresses.
func (w Window) Run(ctx context.Context, calls int, check bool) (Sample, error) {
	var s Sample
	if err := ctx.Err(); err != nil {
		return s, fmt.Errorf("oracle.Window %s: %w", w.Func, err)
	}
	var ld *Loaded
	err := w.Rec.Time(w.Name+"_load", w.Func, func() (err error) {
		ld, err = w.Loader.load(w.Func, FEntry, w.Key, check)
		return err
	})
	if err != nil {
		return s, fmt.Errorf("oracle.Window %s: %w", w.Func, err)
	}
	defer ld.Prog.Close()

	var link int
	err = w.Rec.Time(w.Name+"_attach", w.Func, func() error {
		fd, errno := attach.LinkCreate(ld.Prog.FD(), FEntry.LinkType())
		if errno != 0 {
			return fmt.Errorf("BPF_LINK_CREATE: %w", errno)
		}
		link = fd
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("oracle.Window %s: %w", w.Func, err)
	}
	detached := false
	detach := func() error {
		if detached {
			return nil
		}
		detached = true
		return w.Rec.Time(w.Name+"_detach", w.Func, func() error { return unix.Close(link) })
	}
	defer detach()

	if s.Before, err = w.Loader.Map.Read(ld.FuncIP.Slot); err != nil {
		return s, fmt.Errorf("oracle.Window %s: %w", w.Func, err)
	}
	callOnOneThread(max(calls-w.Skip, 0), w.Call)
	if s.After, err = w.Loader.Map.Read(ld.FuncIP.Slot); err != nil {
		return s, fmt.Errorf("oracle.Window %s: %w", w.Func, err)
	}
	derr := detach()
	if st, err := ld.Prog.Stats(); err == nil {
		s.RecursionMisses = st.RecursionMisses
	}
	if derr != nil {
		return s, fmt.Errorf("oracle.Window %s: detach: %w", w.Func, derr)
	}
	return s, nil
}

// callOnOneThread makes n calls from one OS thread, so that every call is
// the same task's and no Go scheduling decision splits the window.
func callOnOneThread(n int, call func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for range n {
			call()
		}
	}()
	<-done
}

// CalibrationCalls is how many calls calibration makes: one hit is enough,
// more guard against a call path that skips the function now and then.
const CalibrationCalls = 64

// Calibrate measures the offset of bpf_get_func_ip from the kallsyms
// address on fn (reached by call), and on success makes the loader compare
// addresses from then on. It must run before the loader is shared. The
// returned event is the calibration's report; err is non-nil when the
// oracle cannot run (the event then says why, with OK false when the kernel
// misbehaved rather than the setup).
func (l *Loader) Calibrate(ctx context.Context, fn string, call func(), rec *tally.Recorder) (event.Oracle, error) {
	o := event.Oracle{Name: NameCalibration, Function: fn}
	if l.Addrs == nil {
		o.Skipped = "kallsyms addresses unavailable"
		return o, errors.New("oracle.Calibrate: " + o.Skipped)
	}
	addr, ok := l.Addrs.Addr(fn)
	if !ok {
		o.Skipped = fmt.Sprintf("%s has no unique kallsyms address", fn)
		return o, errors.New("oracle.Calibrate: " + o.Skipped)
	}
	o.Expected = addr
	w := Window{Loader: l, Func: fn, Call: call, Key: "calibrate:" + fn, Name: "calibrate", Rec: rec}
	s, err := w.Run(ctx, CalibrationCalls, false)
	if err != nil {
		o.Skipped = err.Error()
		return o, fmt.Errorf("oracle.Calibrate: %w", err)
	}
	d := s.After.Sub(s.Before)
	if d.Hits == 0 {
		o.Msg = fmt.Sprintf("no hit in %d calls (recursion misses %d)", CalibrationCalls, s.RecursionMisses)
		return o, fmt.Errorf("oracle.Calibrate %s: %s", fn, o.Msg)
	}
	o.Got = s.After.LastIP
	delta, err := Delta(addr, s.After.LastIP)
	o.Delta = delta
	if err != nil {
		o.Msg = err.Error()
		return o, fmt.Errorf("oracle.Calibrate %s: %w", fn, err)
	}
	o.OK = true
	o.Checks = 1
	o.Msg = fmt.Sprintf("bpf_get_func_ip = kallsyms %#x %+d after %d hits", addr, delta, d.Hits)
	l.delta, l.checking = delta, true
	return o, nil
}

// Exact runs one exact-count window of calls calls and checks the count.
// The sample is returned too, for a func-ip check of the same window.
func (w Window) Exact(ctx context.Context, calls int) (event.Oracle, Sample, error) {
	s, err := w.Run(ctx, calls, w.Loader.checking)
	if err != nil {
		return event.Oracle{Name: NameExact, Function: w.Func, Skipped: err.Error()}, s, err
	}
	return CheckExact(w.Func, calls, s), s, nil
}
