// Package inject is the race scenario's injections, which the campaign's
// race stage runs too: it preempts a task at one exact instruction and
// races a detach or a repatch of the code around it from another CPU:
//
//  1. the agent asks the host (race port) to stop the held CPU at the
//     target address; the host sets a gdbstub breakpoint and answers armed;
//  2. the racer, a process pinned to the held CPU, calls
//     fth_target_counted() (a write to its debugfs file), whose entry leads
//     to the target; the host answers stopped once exactly that vCPU
//     stands there, and lets every other vCPU run;
//  3. the agent wakes the preemptor, a SCHED_FIFO process pinned to the
//     held CPU: the wakeup's IPI is now pending there; then it asks for the
//     release, and the held vCPU takes the interrupt before the target
//     instruction and switches to the preemptor: the racer is preempted at
//     that instruction;
//  4. while the preemptor spins, the agent detaches the trampoline (or
//     enables tracing on the callsite) and looks whether the kernel freed
//     the image under the preempted task;
//  5. the preemptor stops, the racer runs on from the target, and returns,
//     or the kernel dies there.
//
// The racer and the preemptor are processes of their own, each with
// asynchronous preemption off and one P (stress/racer): nothing in
// them sleeps or migrates behind the agent's back. The agent's own control
// thread is pinned away from the held CPU, so that no step of the protocol
// waits behind the held vCPU.
package inject

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/raceport"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// racePriority is the preemptor's SCHED_FIFO priority: the top of the
// harness's own range (cell.GuestHarness), above every other task of the
// race scenario, which runs no hammer.
const racePriority = 10

// preemptBound is the longest a preemptor spins without being told to
// stop.
const preemptBound = 10 * time.Second

// raceStopTimeout bounds how long the host waits for the held CPU to reach
// the target once the racer is told to call.
const raceStopTimeout = 10 * time.Second

// raceReturnTimeout bounds how long the agent waits for the racer's call
// to return after the window: a kernel that survives returns at once.
const raceReturnTimeout = 20 * time.Second

// Env is what the injections take from the agent that runs them.
type Env struct {
	// W receives the injections' events and log lines.
	W *emit.Writer
	// Opts are the run's options (racetarget, injections, window, ...).
	Opts options.Options
	// InCampaign is the campaign's race stage: its targets are the
	// campaign's (options.RaceTargets).
	InCampaign bool
	// Until ends the injections once passed (the campaign's budget);
	// zero for none.
	Until time.Time
}

// Run loads fth_target with no kthreads of its own, starts the racer and
// the preemptor on cpu held, and injects at every target env.Opts asks
// for through the host's port; it returns the count of each outcome.
func Run(ctx context.Context, env Env, port *raceport.Port, held int) (map[string]int, error) {
	// No kthreads: the racer must be the only caller of the target.
	if err := fthtarget.Load(modload.DefaultDir, "nthreads=0"); err != nil {
		return nil, fmt.Errorf("race: load %s: %w", fthtarget.Module, err)
	}
	window := env.Opts.Window
	if window == options.Auto {
		window = options.RaceWindow
	}
	r := &Injector{Holds: Holds{Port: port}, env: env, cpu: held, window: window, outcomes: map[int]string{}, until: env.Until, windows: map[string]*insnWindow{}}
	var err error
	if r.racer, err = racer.Start(racer.ModeRacer, strconv.Itoa(held), fthtarget.Call); err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	defer r.racer.Stop()
	// The agent stops the preemptor after the window and the kallsyms
	// check; the bound only keeps a dead agent from leaving the CPU
	// taken (the fair server, which would end it, is off).
	if r.preempt, err = racer.Start(racer.ModePreempt, strconv.Itoa(held), strconv.Itoa(racePriority), strconv.FormatInt(preemptBound.Nanoseconds(), 10)); err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	defer r.preempt.Stop()
	if restore, err := hammer.FairServerOff(hammer.FairServerDir, held); err != nil {
		emit.Logf(env.W, "race: %v", err)
	} else {
		defer restore()
	}
	targets := options.RaceTargets(env.Opts.RaceTarget, runtime.GOARCH, env.InCampaign)
	if env.Opts.RaceList && env.Opts.RaceTarget == options.RaceAuto {
		targets = options.ArchRaceTargets(runtime.GOARCH)
	}
	emit.Logf(env.W, "race: %s injections at the %s of fth_target_counted, held cpu %d, window %v", env.Opts.Args()["injections"], strings.Join(targets, ", "), held, window)
	// Each target has its share of the injections, and its first
	// injection whatever the budget: the first is what catches a freed-early
	// class at once.
	// injections=N: the targets' shares add up to N, each at least one.
	share := func(k int) int {
		if env.Opts.Injections == options.All {
			return options.All
		}
		n := env.Opts.Injections / len(targets)
		if k < env.Opts.Injections%len(targets) {
			n++
		}
		return max(n, 1)
	}
	// In the campaign the targets it walks whole (options.RaceWalkAll)
	// come first, with no bound; then each other target has an equal
	// share of the budget, counted from there, so that the first
	// target's window cannot take all.
	bounded, budget := !r.until.IsZero(), max(time.Until(r.until), 0)
	targets, shared := budgetOrder(targets, runtime.GOARCH, bounded)
	var sharedFrom time.Time
	sharedK := 0
	for k, t := range targets {
		if ctx.Err() != nil {
			break
		}
		n := share(k)
		switch {
		case !bounded:
		case options.RaceWalkAll(t, runtime.GOARCH):
			// injections=N still bounds it.
			r.until = time.Time{}
		default:
			if sharedFrom.IsZero() {
				sharedFrom = time.Now()
			}
			sharedK++
			r.until = sharedFrom.Add(budget * time.Duration(sharedK) / time.Duration(shared))
		}
		r.started = 0
		switch t {
		case options.RaceCallsite:
			err = r.callsites(ctx, n)
		case options.RaceOpsTrampoline:
			err = r.opsTrampolines(ctx, n)
		case options.RaceInt3:
			err = r.int3Patches(ctx, n)
		case options.RaceCallOps:
			err = r.callOps(ctx, n)
		case options.RaceLiteral:
			err = r.literalOrder(ctx, n)
		case options.RaceFexitTrampoline:
			err = r.trampolines(ctx, n, oracle.FExit)
		default:
			err = r.trampolines(ctx, n, oracle.FEntry)
		}
		var why errUnreachable
		if errors.As(err, &why) {
			// A kernel without the window: listed with the reason,
			// and the other targets run.
			emit.Logf(env.W, "race: %s: unreachable: %s", t, why)
			_ = env.W.Emit(event.Event{Kind: event.KindRaceWindow, RaceWindow: &event.RaceWindow{Target: t, Arch: runtime.GOARCH, Unreachable: string(why)}})
			err = nil
			continue
		}
		if err != nil {
			break
		}
	}
	outcomes := countOutcomes(r.outcomes)
	emit.Logf(env.W, "race: outcomes %v", outcomes)
	return outcomes, err
}

// Injector is one race run's state.
type Injector struct {
	Holds
	env     Env
	racer   *racer.Helper
	preempt *racer.Helper
	cpu     int
	window  time.Duration
	seq     int
	// started counts the current target's injections.
	started int
	// windows are the targets' decoded windows, by target.
	windows map[string]*insnWindow
	// outcomes is the latest outcome of each injection, by Seq.
	outcomes map[int]string
	// until ends the injections once passed (the campaign's budget);
	// zero for none.
	until time.Time
}

// more reports whether the budget allows another injection at the
// current target: its first always runs (a churn that overran the budget
// must not cost the campaign its race), and one that has started always
// runs to its end.
func (r *Injector) more() bool {
	if r.started > 0 && !r.until.IsZero() && time.Now().After(r.until) {
		emit.Logf(r.env.W, "race: the budget is spent after %d injection(s)", r.seq)
		return false
	}
	r.started++
	return true
}

// errUnreachable is a target's reason it has no window on the running
// kernel though the arch has it (checked before any build,
// options.CheckRaceTargets): arm64's no-call-ops variant has no ops
// literal.
type errUnreachable string

func (e errUnreachable) Error() string { return string(e) }

// noCallOps is the CALL_OPS targets' reason on a kernel built without it.
func noCallOps() errUnreachable {
	return errUnreachable(fmt.Sprintf("this kernel has no DYNAMIC_FTRACE_WITH_CALL_OPS (%s, which it defines, is not in %s): no ops literal to load or write", ftraceNopOps, ksyms.DefaultPath))
}

// Holds is the race port as the injections and the repro sequences use
// it: the host's own failure is no verdict on the kernel
// (emit.Unjudged).
type Holds struct {
	Port *raceport.Port
}

// Send writes one message on the race port.
func (h Holds) Send(m event.RaceMsg) error { return h.Port.Send(m) }

// Peek has the host read the 8 bytes at addr (raceport.ErrUnreadable
// when it could not).
func (h Holds) Peek(addr uint64) (string, error) { return h.Port.Peek(addr, 8) }

// Recv reads the host's next message.
func (h Holds) Recv(d time.Duration) (event.RaceMsg, error) {
	m, err := h.Port.Recv(d)
	return m, unjudgedHost(err)
}

// Expect reads the host's next message within d, which must be one of
// the ops want.
func (h Holds) Expect(d time.Duration, want ...string) (event.RaceMsg, error) {
	m, err := h.Port.Expect(d, want...)
	return m, unjudgedHost(err)
}

// Arm has the host arm m (raceport.Port.Arm).
func (h Holds) Arm(m event.RaceMsg) error { return unjudgedHost(h.Port.Arm(m)) }

// Release has the host let the held vCPU go (raceport.Port.Release).
func (h Holds) Release(cpu int) (event.RaceMsg, error) {
	m, err := h.Port.Release(cpu)
	return m, unjudgedHost(err)
}

// unjudgedHost marks the conductor's own failure as no verdict.
func unjudgedHost(err error) error {
	var h *raceport.HostError
	if errors.As(err, &h) {
		return emit.Unjudged(err)
	}
	return err
}

// raceReleaseBound is how long after a stop the host lets the held vCPU go
// itself if the agent's release has not come: a few milliseconds
// normally, but a kernel text write on the agent's CPU (an image freed
// meanwhile: riscv64 invalidates it and fences every hart's icache) waits
// for the held vCPU and the agent with it.
const raceReleaseBound = 2 * time.Second

// stackDelay is how long into the window the held task's stack is read.
const stackDelay = 100 * time.Millisecond

// inject runs one injection at addr: the steps 1 to 5 above, with action
// run beside the window while the task is held. checkFreed has the host
// read the target's bytes at the end of the window (trampolines, which a
// correct kernel never changes under a task inside them).
func (r *Injector) inject(in *event.Injection, addr uint64, size int, action func() error, checkFreed bool) error {
	return r.injectCall(counterCall, in, addr, size, action, checkFreed)
}

// raceCall is how an injection's task gets to its target: the racer's
// command, the kernel function that makes the call (a held task's stack
// must show it, or the target), what the agent starts beside it once the
// call has started (beside, nil for nothing: it returns the wait for its
// end; the host steps it past the target), and
// what the agent does once the call has started and before the task is
// held (before, nil for nothing); window, when set, is how long the
// task stays held instead of the run's window.
type raceCall struct {
	cmd    byte
	caller string
	beside func() (wait func() error)
	before func() error
	window time.Duration
}

// counterCall is one call of fth_target_counted, through call_write.
var counterCall = raceCall{cmd: 'c', caller: fthtarget.Caller}

// injectCall is inject with the task's call c.
func (r *Injector) injectCall(c raceCall, in *event.Injection, addr uint64, size int, action func() error, checkFreed bool) error {
	r.seq++
	in.Seq, in.CPU, in.Addr = r.seq, r.cpu, fmt.Sprintf("%#x", addr)
	window := r.window
	if c.window > 0 {
		window = c.window
	}
	in.WindowMS = float64(window.Microseconds()) / 1000
	// The image's first bytes, read before any vCPU is held (a look
	// through the stub while one is held let it run on), to tell a freed
	// image, refilled from its start, from one the kernel patched in
	// place under the task.
	start := addr - uint64(in.Offset)
	var startBefore string
	if checkFreed && in.Offset > 0 {
		var err error
		if startBefore, err = r.Peek(start); err != nil && !errors.Is(err, raceport.ErrUnreadable) {
			return err
		}
	}
	// A task beside the racer runs through the same code: the host steps
	// it past the target.
	if err := r.Arm(event.RaceMsg{Addr: addr, Size: size, CPU: r.cpu, TimeoutMS: int(raceStopTimeout.Milliseconds()), BoundMS: int(raceReleaseBound.Milliseconds()), PassOthers: c.beside != nil}); err != nil {
		return err
	}
	if err := r.racer.Poke(c.cmd); err != nil {
		return err
	}
	var tid int
	if line, err := r.racer.Read(5 * time.Second); err != nil || !strings.HasPrefix(line, "call ") {
		return fmt.Errorf("race: the racer did not start its call: %q %v", line, err)
	} else {
		tid, _ = strconv.Atoi(strings.TrimPrefix(line, "call "))
	}
	// Started once the racer's call has: the arm's round trip (hundreds
	// of milliseconds on riscv64 under TCG) then cannot make it end
	// after the task beside it.
	if c.beside != nil {
		wait := c.beside()
		defer func() {
			if err := wait(); err != nil {
				emit.Logf(r.env.W, "race: injection %d: beside the racer: %v", in.Seq, err)
			}
		}()
	}
	var beforeErr error
	if c.before != nil {
		beforeErr = c.before()
	}
	m, err := r.Recv(raceStopTimeout + raceport.Slack)
	if err != nil {
		return err
	}
	if m.Op != event.RaceStopped {
		// Nothing was held: let the call finish and say why.
		in.Outcome, in.Msg = event.InjMissed, m.Msg
		if _, err := r.racer.Read(raceReturnTimeout); err != nil {
			return err
		}
		r.emit(*in)
		return nil
	}
	in.Insn = m.Insn
	in.Outcome = event.InjReleased
	r.emit(*in)
	// The wakeup's IPI waits on the held vCPU; the release lets it take
	// it before the target instruction.
	if err := r.preempt.Poke(racer.PreemptStart); err != nil {
		return err
	}
	if m, err = r.Release(r.cpu); err != nil {
		return err
	}
	released := time.Now()
	if m.Late {
		// The racer ran on through the target before the preemptor
		// could take its CPU: nothing was held there, and whatever
		// the window shows is not about a task preempted at it.
		checkFreed = false
	}
	// The action runs beside the window: on a correct kernel it may wait
	// for the held task itself (riscv64's CALL_OPS direct-call removal
	// waits for RCU-tasks), and the window must end regardless.
	acted := make(chan error, 1)
	go func() { acted <- action() }()
	// Where the held task is, in its own kernel stack: the proof that it
	// was preempted inside the target's caller and not, on a kernel
	// without preemption, on its way back to user space. The task stays
	// where it is for the whole window, so the read (up to 200 ms under
	// TCG) runs beside it, once the released vCPU has had time to take
	// the preemptor's wakeup.
	stack := make(chan []string, 1)
	go func() {
		time.Sleep(min(stackDelay, window/4))
		stack <- racer.TaskStack(tid)
	}()
	var actErr error
	select {
	case actErr = <-acted:
		in.ActionDone = true
		in.ActionMS = float64(time.Since(released).Microseconds()) / 1000
	case <-time.After(window):
	}
	if rest := window - time.Since(released); rest > 0 {
		time.Sleep(rest)
	}
	in.Stack = <-stack
	look := func() error {
		after, err := r.Peek(addr)
		switch {
		case errors.Is(err, raceport.ErrUnreadable):
			in.Msg = "the window's look at the target failed: " + err.Error()
		case err != nil:
			return err
		default:
			in.InsnAfter = after
			in.FreedInWindow = after != in.Insn
		}
		if in.FreedInWindow && startBefore != "" {
			// x86_64 7.3.4 puts a detached image by turning a nop5 in
			// it into a jump to its epilogue (bpf_tramp_image_put,
			// ip_after_call), with the task inside on purpose: a
			// rewrite in place, not a free. A freed image is refilled
			// from its start.
			if startAfter, err := r.Peek(start); err == nil && startAfter == startBefore {
				in.FreedInWindow = false
				in.Msg = fmt.Sprintf("the kernel rewrote the bytes under the held task in place (%s to %s) while the image's start stayed %s: patched, not freed", in.Insn, after, startBefore)
			}
		}
		return nil
	}
	if checkFreed {
		if err := look(); err != nil {
			return err
		}
		// An action that outran the window but ended while the task is
		// still held (a cold first detach under TCG took 853 ms against
		// x86's 400) freed whatever it frees under the task all the
		// same: look again rather than judge by the window's look.
		if !in.ActionDone && !in.FreedInWindow {
			select {
			case actErr = <-acted:
				in.ActionMS = float64(time.Since(released).Microseconds()) / 1000
				in.ActionLate = true
				if err := look(); err != nil {
					return err
				}
			default:
			}
		}
	}
	// What the window showed, recorded while the task is still held: on
	// a kernel that frees the image, the task may die the moment it runs.
	seen := *in
	if in.FreedInWindow {
		seen.Outcome = event.InjFreedUnderTask
		seen.Msg = fmt.Sprintf("the instruction under the preempted task at %s changed from %s to %q while it was held", in.Symbol, in.Insn, in.InsnAfter)
	}
	r.emit(seen)
	if err := r.preempt.Poke(racer.PreemptStop); err != nil {
		return err
	}
	spun, err := r.preempt.Read(5 * time.Second)
	if err != nil {
		return err
	}
	var spunNS int64
	var spunCPU, stopped int
	fmt.Sscanf(spun, "spun %d %d %d", &spunNS, &spunCPU, &stopped)
	in.SpunMS = float64(spunNS) / 1e6
	done, err := r.racer.Read(raceReturnTimeout)
	if err != nil {
		return fmt.Errorf("race: the racer did not return from %s within %v of the release: %w", in.Symbol, raceReturnTimeout, err)
	}
	var ns int64
	var errno int
	fmt.Sscanf(done, "done %d %d %d", &ns, &errno, &in.Preemptions)
	in.HeldMS = float64(ns) / 1e6
	if !in.ActionDone && !in.ActionLate {
		select {
		case actErr = <-acted:
			in.ActionMS = float64(time.Since(released).Microseconds()) / 1000
		case <-time.After(raceReturnTimeout):
			return fmt.Errorf("race: %s of %s did not end within %v after the held task ran on", in.Action, in.Symbol, raceReturnTimeout)
		}
	}
	judge(in, stopped == 1, c.caller)
	if m.Late {
		in.Outcome, in.FreedInWindow = event.InjMissed, false
		in.Msg = fmt.Sprintf("the host let the held vCPU go at its %v bound before the agent's release: the agent's CPU was held up meanwhile%s", raceReleaseBound, othersAt(m.PCs))
	}
	if beforeErr != nil {
		actErr = errors.Join(beforeErr, actErr)
	}
	if actErr != nil {
		in.Msg = strings.TrimSpace(in.Msg + "; action: " + actErr.Error())
	}
	r.emit(*in)
	return nil
}

// judge sets in's outcome from what the agent saw: whether the preemptor
// was stopped by the agent (rather than by its bound), how long the
// racer's call and the preemptor's spin took, and whether the target left
// kallsyms during the hold.
func judge(in *event.Injection, stoppedByAgent bool, caller string) {
	// The frames that place the task in the target: its caller, the
	// target function, or the target's raw address (an unwinder stops at
	// a trampoline, which has no symbol it trusts).
	inCaller := slices.ContainsFunc(in.Stack, func(f string) bool {
		// The image's own frame at the held offset (x86: the
		// interrupted place, unwound through the image's symbol).
		return strings.HasPrefix(f, caller+"+") || strings.HasPrefix(f, in.Function+"+") || f == in.Addr || strings.HasPrefix(f, in.Symbol+"/") ||
			(in.Offset == 0 && endOfSymbol(f))
	}) || (in.Target == options.RaceOpsTrampoline && unwindStoppedAtIRQ(in.Stack))
	switch {
	case !stoppedByAgent:
		// The preemptor hit its bound before the window's look at the
		// target: the task may have left it before the look.
		in.Outcome = event.InjNotPreempted
		in.FreedInWindow = false
		in.Msg = fmt.Sprintf("the preemptor gave up the CPU at its %v bound before the window's check ended", preemptBound)
	case len(in.Stack) > 0 && !inCaller:
		// Switched out, but after it left the target: on a kernel
		// without preemption, at the return to user space.
		in.Outcome = event.InjNotPreempted
		in.Msg = fmt.Sprintf("held outside %s and %s (stack %s): the task was switched out only after it left the target", caller, in.Addr, strings.Join(in.Stack, " < "))
	case in.HeldMS < in.SpunMS:
		// The task left before the window ended: whatever the kernel
		// freed meanwhile, it was not freed under a preempted task.
		in.Outcome = event.InjNotPreempted
		in.Msg = fmt.Sprintf("the call returned in %.1f ms while the preemptor spun %.1f ms: the task ran on instead of staying preempted", in.HeldMS, in.SpunMS)
	case in.FreedInWindow:
		in.Outcome = event.InjFreedUnderTask
		in.Msg = fmt.Sprintf("the instruction under the preempted task at %s changed from %s to %q while it was held", in.Symbol, in.Insn, in.InsnAfter)
	default:
		in.Outcome = event.InjSurvived
	}
}

// endOfSymbolRe is a frame printed at its symbol's size ("fn+0x40/0x40"):
// the address just past fn, which is the next symbol's first byte. The
// stack of a task held at a target's +0x0 names it so where the unwinder
// prints the interrupted pc as a return address (riscv64's ftrace_caller
// comes out as ftrace_graph_func+0x40/0x40).
var endOfSymbolRe = regexp.MustCompile(`^[^+ ]+\+(0x[0-9a-f]+)/(0x[0-9a-f]+)$`)

func endOfSymbol(frame string) bool {
	m := endOfSymbolRe.FindStringSubmatch(frame)
	return m != nil && m[1] == m[2]
}

// unwindStoppedAtIRQ reports a stack that is a kernel-mode preemption on
// an interrupt's return and nothing more: the unwinder could not go past
// the interrupted place. Only the ops trampoline target trusts it. x86_64 7.3.4's ORC unwinder stops so at an
// ftrace_ops trampoline ("irqentry_exit+0xbe/0x6a0 <
// asm_sysvec_call_function_single+0x16/0x20"); a task preempted in user
// space or on its way there shows exit_to_user_mode_loop instead.
func unwindStoppedAtIRQ(stack []string) bool {
	return len(stack) == 2 && strings.HasPrefix(stack[0], "irqentry_exit+") &&
		(strings.HasPrefix(stack[1], "asm_sysvec_") || strings.HasPrefix(stack[1], "asm_common_interrupt+"))
}

func (r *Injector) emit(in event.Injection) {
	r.outcomes[in.Seq] = in.Outcome
	_ = r.env.W.Emit(event.Event{Kind: event.KindInjection, Injection: &in})
}

// countOutcomes counts the latest outcome of each injection, judged ones
// only.
func countOutcomes(latest map[int]string) map[string]int {
	n := map[string]int{}
	for _, o := range latest {
		if o != event.InjReleased {
			n[o]++
		}
	}
	return n
}

// budgetOrder is the order a race stage runs targets in, and how many of
// them share its budget: with a budget, the targets goarch's campaign
// walks whole (options.RaceWalkAll) come first and take no share;
// without one, the order given, every target counted.
func budgetOrder(targets []string, goarch string, budget bool) ([]string, int) {
	if !budget {
		return targets, len(targets)
	}
	sorted := slices.Clone(targets)
	slices.SortStableFunc(sorted, func(x, y string) int {
		return cmpBool(options.RaceWalkAll(y, goarch), options.RaceWalkAll(x, goarch))
	})
	shared := 0
	for _, t := range sorted {
		if !options.RaceWalkAll(t, goarch) {
			shared++
		}
	}
	return sorted, shared
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// othersAt says where the vCPUs that were not held stood when the host let
// the held one go at its bound, named through kallsyms: what kept the
// agent from its release.
func othersAt(pcs map[int]uint64) string {
	if len(pcs) == 0 {
		return ""
	}
	var addrs []uint64
	for _, pc := range pcs {
		addrs = append(addrs, pc)
	}
	names := map[uint64]string{}
	if f, err := os.Open(ksyms.DefaultPath); err == nil {
		names, _ = ksyms.Nearest(f, addrs)
		f.Close()
	}
	var at []string
	for _, cpu := range slices.Sorted(maps.Keys(pcs)) {
		where := fmt.Sprintf("%#x", pcs[cpu])
		if n, ok := names[pcs[cpu]]; ok {
			where = n
		}
		at = append(at, fmt.Sprintf("cpu %d at %s", cpu, where))
	}
	return " (then " + strings.Join(at, ", ") + ")"
}
