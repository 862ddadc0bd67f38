package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/kmods"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/report"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// The race scenario preempts a task at one exact instruction and races a
// detach or a repatch of the code around it from another CPU:
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
// asynchronous preemption off and one P (see injectRTInversion): nothing in
// them sleeps or migrates behind the agent's back. The agent's own control
// thread is pinned away from the held CPU, so that no step of the protocol
// waits behind the held vCPU.

// Agent subcommands of the race scenario's helpers.
const (
	// modeRacer is `agent racer <cpu> <path>`: pinned to cpu, it writes
	// "1" to path for every line on stdin and answers "done <ns> <errno>".
	modeRacer = "racer"
	// modePreempt is `agent preempt <cpu> <priority> <max-ns>`: pinned to
	// cpu at SCHED_FIFO priority, for every byte on stdin it spins until
	// the next byte or max-ns, then answers "spun <ns>".
	modePreempt = "preempt"
	// modeRaceCtl is `agent racectl <agent flags>`: the controller.
	modeRaceCtl = "racectl"
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

// raceAgent is one race run's state.
type raceAgent struct {
	a       *agent
	port    *os.File
	portIn  *bufio.Reader
	racer   *helper
	preempt *helper
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
func (r *raceAgent) more() bool {
	if r.started > 0 && !r.until.IsZero() && time.Now().After(r.until) {
		report.Logf(r.a.w, "race: the budget is spent after %d injection(s)", r.seq)
		return false
	}
	r.started++
	return true
}

// executeRace becomes the race scenario's controller: with every thread
// kept off the held CPU, the agent execs itself as `agent racectl`, which
// reopens the event channel, runs the injections and finishes the run
// (Done, poweroff). Exec is the only way to an address space that has never
// run on the held CPU. On riscv64 (ASID allocator) an mm keeps every CPU it
// ever ran on in its cpumask, and a TLB flush of it is an SBI remote fence
// that spins in firmware until every such hart answers: a flush by the
// agent's own Go runtime (returning pages) froze CPU 0 while CPU 1 was held,
// the release never came, and both CPUs reported soft lockups (injection
// 14 of 50). A child process would not do: its parent's mm, the agent's,
// still carries the held CPU.
func (a *agent) executeRace(ctx context.Context) error {
	if a.sys.numCPU < 2 {
		return fmt.Errorf("race: needs at least 2 CPUs (one held, one racing), have %d: boot with --cpus 2", a.sys.numCPU)
	}
	held := a.sys.numCPU - 1
	rest := below(held)
	// Exec keeps the calling thread's affinity; every thread gets it, so
	// that whichever one calls exec passes it on.
	if err := setProcessCPUs(&rest, 0); err != nil {
		return fmt.Errorf("race: keep the agent off cpu %d: %w", held, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	argv := []string{"agent", modeRaceCtl, strconv.Itoa(held)}
	for k, v := range a.opts.Args() {
		argv = append(argv, "-"+k+"="+v)
	}
	report.Logf(a.w, "race: the agent becomes the race controller (exec, off cpu %d)", held)
	// The event channel is close-on-exec: the controller opens it again.
	err = unix.Exec(exe, argv, append(os.Environ(), "FTH_NO_CMDLINE=1"))
	return fmt.Errorf("race: exec the controller: %w", err)
}

// raceCtlMain is `agent racectl <held-cpu> <agent flags>`: the race
// scenario's controller (executeRace), with every CPU but the held one
// (which its own affinity therefore cannot tell it). It ends the run as the
// agent would: Done, then poweroff when asked.
func raceCtlMain(ctx context.Context, args []string, sys system) error {
	held, opts, optErr, err := raceArgs(modeRaceCtl, args, sys)
	if err != nil {
		return err
	}
	ch, err := report.Open(opts.Events, sys.virtioDir, sys.devDir, sys.stdout)
	if err != nil {
		fmt.Fprintf(sys.stderr, "agent: %v; writing events to stdout\n", err)
		ch, _ = report.Open("-", "", "", sys.stdout)
	}
	defer ch.Close()
	a := &agent{sys: sys, opts: opts, w: report.NewWriter(ch.W), set: attach.NewSet()}
	runErr := optErr
	if runErr == nil {
		runErr = a.controlRace(ctx, held)
	}
	return a.finish(runErr)
}

// below is the set of CPUs numbered below held: every CPU but the held
// one, which is the last.
func below(held int) unix.CPUSet {
	var set unix.CPUSet
	for c := 0; c < held; c++ {
		set.Set(c)
	}
	return set
}

// raceArgs reads `<held-cpu> <agent flags>`, the arguments of the race
// controllers (racectl, racestage), and names their threads as the
// harness's own task (cell.GuestHarness), as the agent's were. A bad held
// CPU is err; bad flags are optErr, with the options at their defaults.
func raceArgs(mode string, args []string, sys system) (held int, opts options.Options, optErr, err error) {
	if len(args) < 1 {
		return 0, opts, nil, fmt.Errorf("agent %s: want <held-cpu> <agent flags>", mode)
	}
	if held, err = strconv.Atoi(args[0]); err != nil {
		return 0, opts, nil, fmt.Errorf("agent %s: held cpu %q", mode, args[0])
	}
	nameThreads(guestComm)
	opts, optErr = options.Parse(args[1:], "", options.Env{NumCPU: held + 1}, sys.stderr)
	return held, opts, optErr, nil
}

// controlRace is the controller's whole run, holding cpu held.
func (a *agent) controlRace(ctx context.Context, held int) error {
	window := a.opts.Window
	if window == options.Auto {
		window = options.RaceWindow
	}
	name, err := report.FindPort(a.sys.virtioDir, event.RacePortName)
	if err != nil {
		return fmt.Errorf("race: no %s port: the host must boot the VM for the race scenario (fth run --agent-arg scenario=race does): %w", event.RacePortName, err)
	}
	port, err := report.OpenPortRW(a.sys.virtioDir, a.sys.devDir, name)
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer port.Close()

	// No kthreads: the racer must be the only caller of the target.
	if err := loadTarget(kmods.DefaultDir, "nthreads=0"); err != nil {
		return fmt.Errorf("race: load %s: %w", targetModule, err)
	}
	r := &raceAgent{a: a, port: port, portIn: bufio.NewReader(port), cpu: held, window: window, outcomes: map[int]string{}, until: a.raceUntil, windows: map[string]*insnWindow{}}
	if r.racer, err = startHelper(modeRacer, strconv.Itoa(held), targetCall); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer r.racer.stop()
	// The agent stops the preemptor after the window and the kallsyms
	// check; the bound only keeps a dead agent from leaving the CPU
	// taken (the fair server, which would end it, is off).
	if r.preempt, err = startHelper(modePreempt, strconv.Itoa(held), strconv.Itoa(racePriority), strconv.FormatInt(preemptBound.Nanoseconds(), 10)); err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer r.preempt.stop()
	if restore, err := hammer.FairServerOff(hammer.FairServerDir, held); err != nil {
		report.Logf(a.w, "race: %v", err)
	} else {
		defer restore()
	}
	targets := options.RaceTargets(a.opts.RaceTarget, runtime.GOARCH, a.inCampaign)
	if a.opts.RaceList && a.opts.RaceTarget == options.RaceAuto {
		targets = options.ArchRaceTargets(runtime.GOARCH)
	}
	report.Logf(a.w, "race: %s injections at the %s of fth_target_counted, held cpu %d, window %v", a.opts.Args()["injections"], strings.Join(targets, ", "), held, window)
	// Each target has its share of the injections, and its first
	// injection whatever the budget: the first is what catches a freed-early
	// class at once.
	// injections=N: the targets' shares add up to N, each at least one.
	share := func(k int) int {
		if a.opts.Injections == options.All {
			return options.All
		}
		n := a.opts.Injections / len(targets)
		if k < a.opts.Injections%len(targets) {
			n++
		}
		return max(n, 1)
	}
	// In the campaign each target has an equal share of what is left of
	// the budget, so that the first target's window cannot take all.
	end := r.until
	start := time.Now()
	for k, t := range targets {
		if ctx.Err() != nil {
			break
		}
		if !end.IsZero() {
			r.until = start.Add(end.Sub(start) * time.Duration(k+1) / time.Duration(len(targets)))
		}
		r.started = 0
		switch t {
		case options.RaceCallsite:
			err = r.callsites(ctx, share(k))
		case options.RaceOpsTrampoline:
			err = r.opsTrampolines(ctx, share(k))
		case options.RaceInt3:
			err = r.int3Patches(ctx, share(k))
		case options.RaceCallOps:
			err = r.callOps(ctx, share(k))
		case options.RaceLiteral:
			err = r.literalOrder(ctx, share(k))
		case options.RaceFexitTrampoline:
			err = r.trampolines(ctx, share(k), oracle.FExit)
		default:
			err = r.trampolines(ctx, share(k), oracle.FEntry)
		}
		var why errUnreachable
		if errors.As(err, &why) {
			// A kernel without the window: listed with the reason,
			// and the other targets run.
			report.Logf(a.w, "race: %s: unreachable: %s", t, why)
			_ = a.w.Emit(event.Event{Kind: event.KindRaceWindow, RaceWindow: &event.RaceWindow{Target: t, Arch: runtime.GOARCH, Unreachable: string(why)}})
			err = nil
			continue
		}
		if err != nil {
			break
		}
	}
	a.race = countOutcomes(r.outcomes)
	report.Logf(a.w, "race: outcomes %v", a.race)
	return err
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

// send writes one message on the race port.
func (r *raceAgent) send(m event.RaceMsg) error {
	b, _ := json.Marshal(m)
	_, err := unix.Write(int(r.port.Fd()), append(b, '\n'))
	return err
}

// peek has the host read the 8 bytes at addr; "" when they are
// unreadable (unmapped).
func (r *raceAgent) peek(addr uint64) (string, error) {
	return r.peekN(addr, 8)
}

// peekN has the host read n bytes at addr, as hex.
func (r *raceAgent) peekN(addr uint64, n int) (string, error) {
	if err := r.send(event.RaceMsg{Op: event.RacePeek, Addr: addr, Size: n}); err != nil {
		return "", err
	}
	m, err := r.recv(10 * time.Second)
	if err != nil {
		return "", err
	}
	if m.Op != event.RacePeeked {
		return "", fmt.Errorf("race: peek %#x: %+v", addr, m)
	}
	if m.Insn == "" {
		return "", errUnreadable{m.Msg}
	}
	return m.Insn, nil
}

// errUnreadable is a peek the host could not answer: nothing is known of
// the bytes, which is not the same as their being gone.
type errUnreadable struct{ msg string }

func (e errUnreadable) Error() string { return e.msg }

// recv reads the host's next message.
func (r *raceAgent) recv(d time.Duration) (event.RaceMsg, error) {
	var m event.RaceMsg
	_ = r.port.SetReadDeadline(time.Now().Add(d))
	line, err := r.portIn.ReadBytes('\n')
	if err != nil {
		return m, fmt.Errorf("race port: %w", err)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("race port: %q: %w", line, err)
	}
	if m.Op == event.RaceError {
		// The conductor's own failure (a hold past its limit, a stub
		// that answered wrong): nothing the kernel did.
		return m, &unjudgedError{fmt.Errorf("race: the host: %s", m.Msg)}
	}
	return m, nil
}

// expect reads the host's next message within d, which must be one of
// the ops want.
func (r *raceAgent) expect(d time.Duration, want ...string) (event.RaceMsg, error) {
	m, err := r.recv(d)
	if err != nil {
		return m, err
	}
	for _, w := range want {
		if m.Op == w {
			return m, nil
		}
	}
	return m, fmt.Errorf("host: %+v, want %v", m, want)
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
func (r *raceAgent) inject(in *event.Injection, addr uint64, size int, action func() error, checkFreed bool) error {
	return r.injectCall(counterCall, in, addr, size, action, checkFreed)
}

// raceCall is how an injection's task gets to its target: the racer's
// command, the kernel function that makes the call (a held task's stack
// must show it, or the target), what the agent starts beside it before
// the arm (beside, nil for nothing: it returns the wait for its end), and
// what the agent does once the call has started and before the task is
// held (before, nil for nothing).
type raceCall struct {
	cmd    byte
	caller string
	beside func() (wait func() error)
	before func() error
}

// counterCall is one call of fth_target_counted, through call_write.
var counterCall = raceCall{cmd: 'c', caller: targetCaller}

// injectCall is inject with the task's call c.
func (r *raceAgent) injectCall(c raceCall, in *event.Injection, addr uint64, size int, action func() error, checkFreed bool) error {
	r.seq++
	in.Seq, in.CPU, in.Addr = r.seq, r.cpu, fmt.Sprintf("%#x", addr)
	in.WindowMS = float64(r.window.Microseconds()) / 1000
	// The image's first bytes, read before any vCPU is held (a look
	// through the stub while one is held let it run on), to tell a freed
	// image, refilled from its start, from one the kernel patched in
	// place under the task.
	start := addr - uint64(in.Offset)
	var startBefore string
	if checkFreed && in.Offset > 0 {
		var err error
		if startBefore, err = r.peek(start); err != nil && !errors.As(err, new(errUnreadable)) {
			return err
		}
	}
	if c.beside != nil {
		wait := c.beside()
		defer func() {
			if err := wait(); err != nil {
				report.Logf(r.a.w, "race: injection %d: beside the racer: %v", in.Seq, err)
			}
		}()
	}
	if err := r.send(event.RaceMsg{Op: event.RaceArm, Addr: addr, Size: size, CPU: r.cpu, TimeoutMS: int(raceStopTimeout.Milliseconds()), BoundMS: int(raceReleaseBound.Milliseconds())}); err != nil {
		return err
	}
	if m, err := r.recv(5 * time.Second); err != nil || m.Op != event.RaceArmed {
		return fmt.Errorf("race: arm %#x: %+v %v", addr, m, err)
	}
	if err := r.racer.poke(c.cmd); err != nil {
		return err
	}
	var tid int
	if line, err := r.racer.read(5 * time.Second); err != nil || !strings.HasPrefix(line, "call ") {
		return fmt.Errorf("race: the racer did not start its call: %q %v", line, err)
	} else {
		tid, _ = strconv.Atoi(strings.TrimPrefix(line, "call "))
	}
	var beforeErr error
	if c.before != nil {
		beforeErr = c.before()
	}
	m, err := r.recv(raceStopTimeout + 5*time.Second)
	if err != nil {
		return err
	}
	if m.Op != event.RaceStopped {
		// Nothing was held: let the call finish and say why.
		in.Outcome, in.Msg = event.InjMissed, m.Msg
		if _, err := r.racer.read(raceReturnTimeout); err != nil {
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
	if err := r.preempt.poke(preemptStart); err != nil {
		return err
	}
	if err := r.send(event.RaceMsg{Op: event.RaceRelease, CPU: r.cpu}); err != nil {
		return err
	}
	m, err = r.recv(10 * time.Second)
	if err != nil || m.Op != event.RaceReleased {
		return fmt.Errorf("race: release: %+v %v", m, err)
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
		time.Sleep(min(stackDelay, r.window/4))
		stack <- taskStack(tid)
	}()
	var actErr error
	select {
	case actErr = <-acted:
		in.ActionDone = true
		in.ActionMS = float64(time.Since(released).Microseconds()) / 1000
	case <-time.After(r.window):
	}
	if rest := r.window - time.Since(released); rest > 0 {
		time.Sleep(rest)
	}
	in.Stack = <-stack
	look := func() error {
		after, err := r.peek(addr)
		var unreadable errUnreadable
		switch {
		case errors.As(err, &unreadable):
			in.Msg = "the window's look at the target failed: " + unreadable.msg
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
			if startAfter, err := r.peek(start); err == nil && startAfter == startBefore {
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
	if err := r.preempt.poke(preemptStop); err != nil {
		return err
	}
	spun, err := r.preempt.read(5 * time.Second)
	if err != nil {
		return err
	}
	var spunNS int64
	var spunCPU, stopped int
	fmt.Sscanf(spun, "spun %d %d %d", &spunNS, &spunCPU, &stopped)
	in.SpunMS = float64(spunNS) / 1e6
	done, err := r.racer.read(raceReturnTimeout)
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
		in.Msg = fmt.Sprintf("the host let the held vCPU go at its %v bound before the agent's release: the agent's CPU was held up meanwhile (a kernel text write's IPI waits on the held vCPU)", raceReleaseBound)
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

func (r *raceAgent) emit(in event.Injection) {
	r.outcomes[in.Seq] = in.Outcome
	_ = r.a.w.Emit(event.Event{Kind: event.KindInjection, Injection: &in})
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
