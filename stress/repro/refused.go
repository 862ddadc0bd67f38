package repro

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/wire/event"
)

// refusedListed is where the sequence holds the writer: called by
// __register_ftrace_function() right after it puts the ops on
// ftrace_ops_list, before ftrace_startup() runs the IPMODIFY handshake.
// Not __ftrace_hash_update_ipmodify itself: setting the ops' filter, before
// the registration, calls that too.
const refusedListed = "ftrace_update_trampoline"

// refusedHold is how long the reader stays held after the writer is let
// go: the writer's refusal returns in milliseconds, unless it waits for
// the reader's CPU (a grace period: the fix).
const refusedHold = time.Second

// refusedDirect (refused-direct): register_ftrace_direct() publishes its
// trampoline in direct_functions and registers its ops, whose
// ftrace_startup() puts the ops on ftrace_ops_list before it runs the
// IPMODIFY handshake; a direct ops without ops_func on a function that has
// an IPMODIFY ops is refused there (-EBUSY), and ftrace takes the ops off
// the list again with no grace period. A caller whose callsite goes
// through ftrace_ops_list_func called the listed ops meanwhile
// (call_direct_funcs: the trampoline's address) and jumps to the
// trampoline once the list function returns, after the refusal returned
// to its user. The sequence holds the writer (fth_deliver.ko's direct
// user's attach, from CPU 0) with its ops listed, then the reader (CPU 1's
// caller) at the list function's caller's jump to the direct trampoline,
// lets the writer go, and a second later the reader: it runs the
// trampoline of a user whose attach was refused, which the module reports
// as a stray call. Any user that frees its trampoline after a refusal (a
// module whose init failed, BPF: docs/findings.md 12) leaves it freed
// text.
//
// With refused false (refused-direct-accepted, the control) the second
// ops is not IPMODIFY, the attach is accepted, and the reader's call
// counts.
func (sq *sequence) refusedDirect(ctx context.Context, refused bool) error {
	logf := sq.logf
	if runtime.GOARCH != "amd64" && directJumps[runtime.GOARCH] == nil {
		return fmt.Errorf("repro %s: x86_64, arm64 and riscv64 only: the reader's hold is where the list function's caller jumps to a direct trampoline, known for those", sq.Opts.Repro)
	}
	h, closePort, err := sq.openListCallHold(refusedListed)
	if err != nil {
		return err
	}
	defer closePort()
	r := h.r

	d, err := sq.loadDeliver(1)
	if err != nil {
		return err
	}
	defer d.close()
	mod := d.mod
	second, secondWhat := "ops-ipmodify", "register fth_deliver.ko's IPMODIFY ftrace_ops (ops-ipmodify) on "+deliver.FuncSeq+" (a direct ops without ops_func cannot share with it)"
	if !refused {
		// x86_64 takes a direct call from ftrace_regs_caller only: the
		// reader's hold needs an ops that saves regs there.
		second = "ops-recursion"
		if runtime.GOARCH == "amd64" {
			second = "ops-regs"
		}
		secondWhat = "register fth_deliver.ko's " + second + " ftrace_ops on " + deliver.FuncSeq + " (not IPMODIFY: a direct ops shares with it)"
	}
	steps := []step{
		{"attach fth_deliver.ko's counting ftrace_ops (ops) to " + deliver.FuncSeq + ": with a second ops there its callsite calls ftrace_ops_list_func",
			func() error { return mod.Attach("ops") }},
		{secondWhat, func() error { return mod.Attach(second) }},
	}
	total := len(steps) + 2
	if err := sq.doSteps(steps, total); err != nil {
		return err
	}
	if err := mod.Run(true); err != nil {
		return fmt.Errorf("repro: start the callers: %w", err)
	}
	// Stopped before the checkpoint, so that it judges a quiet module, or
	// on the way out.
	stop := sync.OnceFunc(func() {
		if err := mod.Run(false); err != nil {
			logf("stop the callers: %v", err)
		}
	})
	defer stop()
	arm := event.RaceMsg{Op: event.RaceArm, Addr: h.addr[refusedListed], Size: h.insnSize, CPU: 0, TimeoutMS: 10000,
		Then: &event.RaceMsg{Op: event.RaceArm, Addr: h.jump, Size: h.how.size, CPU: 1, TimeoutMS: 5000, HoldMS: int(refusedHold / time.Millisecond)}}
	if err := r.Arm(arm); err != nil {
		return fmt.Errorf("repro: arm at %s: %w", refusedListed, err)
	}
	write := "attach fth_deliver.ko's direct user (register_ftrace_direct) to " + deliver.FuncSeq
	logf("%d/%d %s from CPU 0, the host holding it at %s (its ops listed), the reader (CPU 1's caller) at %s", total-1, total, write, refusedListed, h.how.asm)
	written := onCPU0(func() error { return mod.Attach("direct") })
	held, err := refusedHolds(r)
	if err != nil {
		return fmt.Errorf("repro: %w", err)
	}
	logf("%d/%d %s", total, total, held)
	sq.awaitWrite(written, write)
	sq.Sleep(callsAfter)
	stop()
	// A checkpoint reports a detached or refused user's strays.
	if err := mod.Check(); err != nil {
		return fmt.Errorf("repro: checkpoint: %w", err)
	}
	fs, err := sq.emitModuleFindings(mod)
	if err != nil {
		return err
	}
	logf("%d delivery findings", len(fs))
	return nil
}

// refusedHolds reads the host's answers to the two arms of the refused
// sequences and says what was held, or why the sequence did not run.
func refusedHolds(r *raceHolds) (string, error) {
	// The longest of the two stops (10 s) and the host's answer.
	next := func(want ...string) (event.RaceMsg, error) { return r.Expect(raceport.Reply+raceport.Slack, want...) }
	if m, err := next(event.RaceStopped, event.RaceTimeout, event.RaceMissed); err != nil || m.Op != event.RaceStopped {
		return "", fmt.Errorf("the writer did not stop at %s: %+v %v", refusedListed, m, err)
	}
	if _, err := next(event.RaceArmed); err != nil {
		return "", err
	}
	m, err := next(event.RaceStopped, event.RaceTimeout, event.RaceMissed)
	if err != nil {
		return "", err
	}
	// The writer is let go as the reader holds (or as its arm times out).
	if _, err := next(event.RaceReleased); err != nil {
		return "", err
	}
	if m.Op != event.RaceStopped {
		return "", fmt.Errorf("the reader never reached the jump to the direct trampoline while the writer was held at %s (%s): the sequence did not run", refusedListed, m.Msg)
	}
	if _, err := next(event.RaceReleased); err != nil {
		return "", err
	}
	return fmt.Sprintf("the reader held at the direct call while the writer went on from %s, then let go %v later", refusedListed, refusedHold), nil
}
