package repro

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/wire/event"
)

// midUpdateHold is where the modifying trampoline's CPU is held:
// update_ftrace_direct_mod() has taken direct_mutex and registers its
// tmp_ops (ftrace_startup) before it asks every IPMODIFY function's
// trampoline to share.
const midUpdateHold = "ftrace_startup"

// midUpdateWindow are the calls of bpf_trampoline_update() made
// after it has rebuilt the trampoline's flags and before its own
// modify takes direct_mutex (the last of them, where it waits): its
// task's stack in one of them is in the window. x86_64's
// arch_bpf_trampoline_size() vfree()s a scratch image, whose TLB
// flush waits for the held CPU: the task stays in the window there.
var midUpdateWindow = []string{"arch_bpf_trampoline_size", "bpf_tramp_image_alloc", "arch_prepare_bpf_trampoline",
	"arch_protect_bpf_trampoline", "modify_fentry", "update_ftrace_direct_mod"}

// midUpdateOthers are the functions whose trampoline is modified while the
// fexit's update waits, tried in turn: a trampoline's lock is one of 32
// taken by its address, and one that shares the fexit trampoline's lock
// makes the fexit wait before its flags change, so the sequence does not
// run; the next function's very likely does not.
var midUpdateOthers = []string{deliver.FuncOther, "__do_sys_getppid", "__do_sys_getpgrp"}

// midUpdateHoldFor is how long the host holds the modify: the fexit's
// update needs a few milliseconds to reach its window.
const midUpdateHoldFor = 2 * time.Second

// midUpdateWaitFor bounds how long the sequence looks for the fexit's
// update in its window once the modify is let go.
const midUpdateWaitFor = 5 * time.Second

// midUpdate (ipmodify-mid-update): on x86_64 7.3 every BPF trampoline
// is an entry of one shared direct ftrace_ops, and update_ftrace_direct_mod()
// asks, for every function of that ops whose record has an IPMODIFY ops (a
// livepatch), that function's trampoline to share (ENABLE_SHARE_IPMODIFY_SELF)
// while holding direct_mutex and only the modified trampoline's own lock.
// A trampoline registered while the livepatch was already there, with a
// fentry alone, was asked then and had nothing to share (no CALL_ORIG): it
// is not marked sharing. A fexit added to it rebuilds its flags (CALL_ORIG,
// no ORIG_STACK, since it is not sharing) and builds its image before it
// takes direct_mutex for its own modify; a stranger's modify that asks it
// in that window finds a trampoline that calls the original without
// ORIG_STACK, marks it SHARE_IPMODIFY behind its back (its lock not held)
// and answers -EAGAIN; the next ask, the stranger's retry or the fexit's
// own modify, finds SHARE_IPMODIFY already set with ORIG_STACK still off:
// WARN_ON_ONCE in bpf_tramp_ftrace_ops_func, and -EBUSY. The host holds the
// stranger's CPU in ftrace_startup, direct_mutex taken, until the fexit's
// task is on its way (HoldMS), then lets it go; the fexit's update waits
// in its window: first for the held CPU, then for direct_mutex.
//
// With stranger false (ipmodify-mid-update-peer, the control) the fentry is
// attached before the livepatch: the livepatch's registration asks it as a
// peer and marks it sharing, the fexit's update sets ORIG_STACK before it
// waits, the same hold and the same asks find nothing wrong.
func (sq *sequence) midUpdate(ctx context.Context, stranger bool) error {
	logf := sq.logf
	if runtime.GOARCH != "amd64" {
		return fmt.Errorf("repro %s: x86_64 only: its BPF trampolines share one direct ftrace_ops (HAVE_SINGLE_FTRACE_DIRECT_OPS), whose modify asks every trampoline; elsewhere each trampoline has its own ops and is asked alone", sq.Opts.Repro)
	}
	if sq.Livepatch == nil {
		return fmt.Errorf("repro %s: no livepatch here: %s", sq.Opts.Repro, sq.NoLivepatch)
	}
	// The agent stays off the held CPU, so that it can read the fexit
	// task's stack and send the release: the modify runs in a process of
	// its own there (ModeLinker).
	var cpu0 unix.CPUSet
	cpu0.Set(0)
	if err := racer.SetProcessCPUs(&cpu0, 0); err != nil {
		return fmt.Errorf("repro: pin the agent to CPU 0: %w", err)
	}
	defer func() {
		var all unix.CPUSet
		for c := range sq.NumCPU {
			all.Set(c)
		}
		_ = racer.SetProcessCPUs(&all, 0)
	}()
	r, closePort, err := sq.openRacePort()
	if err != nil {
		return err
	}
	defer closePort()
	addr, err := ksyms.Read(ksyms.DefaultPath, []string{midUpdateHold})
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	hold, ok := addr.Addr(midUpdateHold)
	if !ok {
		return fmt.Errorf("repro: no kallsyms address for %s", midUpdateHold)
	}

	d, err := sq.loadDeliver(2 + 2*len(midUpdateOthers))
	if err != nil {
		return err
	}
	defer d.close()
	klp := sq.Livepatch
	patched := false
	defer func() {
		if patched {
			if err := klp.Detach(); err != nil {
				logf("disable the livepatch: %v", err)
			}
		}
	}()
	livepatch := step{"apply the livepatch " + sq.LivepatchModule + " (klp's IPMODIFY ftrace_ops) to " + deliver.FuncSeq,
		func() error {
			if err := klp.Attach(); err != nil {
				return err
			}
			patched = true
			return nil
		}}
	fentry := step{"attach a BPF fentry to " + deliver.FuncSeq + " (its trampoline calls no original: asked to share, it has nothing to share)",
		func() error { return d.link(deliver.FuncSeq, oracle.FEntry, "fentry-seq") }}
	steps := []step{livepatch, fentry}
	if !stranger {
		fentry.what = "attach a BPF fentry to " + deliver.FuncSeq
		livepatch.what += " (asked as a peer, the fentry's trampoline is marked sharing)"
		steps = []step{fentry, livepatch}
	}
	for _, fn := range midUpdateOthers {
		steps = append(steps, step{"attach a BPF fentry to " + fn + " (a trampoline to modify)",
			func() error { return d.link(fn, oracle.FEntry, "fentry-"+fn) }})
	}
	total := len(steps) + 1
	if err := sq.doSteps(steps, total); err != nil {
		return err
	}
	for try, fn := range midUpdateOthers {
		ran, err := sq.midUpdateTry(r, d, hold, fn, fmt.Sprintf("%d/%d", total, total))
		if err != nil {
			return err
		}
		if ran {
			break
		}
		if try == len(midUpdateOthers)-1 {
			// A pass here would say nothing of the kernel.
			return emit.Unjudged(errors.New("repro: the sequence did not run: the fexit's update never reached its window while a modify was held"))
		}
	}
	sq.Sleep(callsAfter)
	return nil
}

// midUpdateTry modifies fn's trampoline from CPU 1, held by the host in
// ftrace_startup with direct_mutex taken, while CPU 0 attaches the fexit to
// FuncSeq; the host ends the hold after midUpdateHoldFor. It reports
// whether the fexit's task was in its window then (the sequence ran); if
// not, the fexit is detached again.
func (sq *sequence) midUpdateTry(r *raceHolds, d *deliverMod, hold uint64, fn, num string) (bool, error) {
	logf := sq.logf
	// Everything loaded before the hold: the modify in a linker process on
	// CPU 1, the fexit here.
	linker, err := racer.Start(ModeLinker, "1", fn)
	if err != nil {
		return false, fmt.Errorf("repro: %w", err)
	}
	defer linker.Stop()
	link, err := d.linkLater(deliver.FuncSeq, oracle.FExit, "fexit-seq")
	if err != nil {
		return false, fmt.Errorf("repro: load the fexit: %w", err)
	}
	// The host lets the modify go itself: by then the fexit's update
	// waits for the held CPU (a TLB flush's IPI) with its own CPU, and
	// the agent's, spinning.
	arm := event.RaceMsg{Op: event.RaceArm, Addr: hold, Size: 1, CPU: 1, TimeoutMS: 10000, HoldMS: int(midUpdateHoldFor / time.Millisecond)}
	if err := r.Arm(arm); err != nil {
		return false, fmt.Errorf("repro: arm at %s: %w", midUpdateHold, err)
	}
	logf("%s attach a second BPF fentry to %s from CPU 1 (modifies its trampoline: update_ftrace_direct_mod), the host holding it at %s", num, fn, midUpdateHold)
	if err := linker.Poke('l'); err != nil {
		return false, fmt.Errorf("repro: %w", err)
	}
	m, err := r.Recv(time.Duration(arm.TimeoutMS)*time.Millisecond + raceport.Slack)
	if err != nil {
		return false, fmt.Errorf("repro: %w", err)
	}
	modified := func() error {
		line, err := linker.Read(30 * time.Second)
		switch {
		case err != nil:
			return err
		case line == "linked 0":
			return nil
		case strings.HasPrefix(line, "linked "):
			n, _ := strconv.Atoi(strings.TrimPrefix(line, "linked "))
			return fmt.Errorf("BPF_LINK_CREATE: %w", unix.Errno(n))
		}
		return fmt.Errorf("agent linker: %q", line)
	}
	if m.Op != event.RaceStopped {
		logf("the modify of %s never reached %s (%s %s): the sequence did not run", fn, midUpdateHold, m.Op, m.Msg)
		_ = modified()
		return false, nil
	}
	fexitWhat := "attach a BPF fexit to " + deliver.FuncSeq + " from CPU 0 (rebuilds its trampoline's flags: CALL_ORIG)"
	logf("%s %s while the modify is held", num, fexitWhat)
	tids := make(chan int, 1)
	fexit := racer.OnCPU(0, func(tid int) error {
		tids <- tid
		return link()
	})
	var tid int
	select {
	case tid = <-tids:
	case err := <-fexit:
		return false, fmt.Errorf("repro: %s: %w", fexitWhat, err)
	}
	if _, err = r.Expect(midUpdateHoldFor+raceport.Slack, event.RaceReleased); err != nil {
		return false, fmt.Errorf("repro: the host's release: %w", err)
	}
	// The modify holds direct_mutex a while more (its temporary ops'
	// text writes): the fexit's update waits for it inside the window.
	var where []string
	waited := false
	var fe error
	fexitDone := false
	for deadline := time.Now().Add(midUpdateWaitFor); time.Now().Before(deadline) && !fexitDone; time.Sleep(10 * time.Millisecond) {
		where = racer.TaskStack(tid)
		if waited = slices.ContainsFunc(where, inMidUpdateWindow); waited {
			break
		}
		select {
		case fe = <-fexit:
			fexitDone = true
		default:
		}
	}
	if !fexitDone {
		fe = waitResult(fexit)
	}
	me := modified()
	// A fexit refused busy was asked mid-update: the sequence ran.
	waited = waited || errors.Is(fe, unix.EBUSY)
	logf("%s the modify of %s: %s; the fexit on %s: %s", num, fn, errOrDone(me), deliver.FuncSeq, errOrDone(fe))
	if waited {
		logf("%s the fexit's task was in its trampoline's update, flags rebuilt, when the modify went on to ask (its stack: %s)", num, strings.Join(where, " <- "))
		return true, nil
	}
	logf("the fexit's task did not reach its trampoline's update past the flags while the modify was held (its stack: %s): its trampoline's lock is likely %s's; again with the next function", strings.Join(where, " <- "), fn)
	if fe == nil {
		d.unlinkLast()
	}
	// The linker's link goes with it (its stop).
	return false, nil
}

// waitResult waits for an operation's result, up to 30 s.
func waitResult(c <-chan error) error {
	select {
	case err := <-c:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("not back after 30 s")
	}
}

// inMidUpdateWindow reports whether a stack frame is one of
// midUpdateWindow's calls.
func inMidUpdateWindow(frame string) bool {
	fn, _, _ := strings.Cut(frame, "+")
	return slices.Contains(midUpdateWindow, fn)
}

// errOrDone says "done" for a nil error.
func errOrDone(err error) string {
	if err == nil {
		return "done"
	}
	return err.Error()
}
