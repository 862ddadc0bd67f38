package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/results/event"
	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/hammer"
	"github.com/ftrace-harness/fth/stress/kmods"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/options"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/report"
	"github.com/ftrace-harness/fth/stress/tracefs"
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

// helper is a running racer or preemptor: its stdin and its answers.
type helper struct {
	name string
	cmd  *exec.Cmd
	in   *os.File
	out  *bufio.Reader
	outF *os.File
}

func startHelper(mode string, args ...string) (*helper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{mode}, args...)...)
	// u-root's busybox dispatches on the name it is run as.
	cmd.Args[0] = "agent"
	// One P, no asynchronous preemption, no collector: nothing in a
	// helper wakes another thread or sleeps behind the caller's back.
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1", "GOGC=off")
	cmd.Stderr = os.Stderr
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", mode, err)
	}
	inR.Close()
	outW.Close()
	h := &helper{name: mode, cmd: cmd, in: inW, out: bufio.NewReader(outR), outF: outR}
	// Each helper says "ready" once pinned and scheduled as asked.
	line, err := h.read(5 * time.Second)
	if err != nil || line != "ready" {
		h.stop()
		return nil, fmt.Errorf("agent %s did not start: %q %v", mode, line, err)
	}
	return h, nil
}

// poke sends one command byte (the racer's call, the preemptor's start
// and stop).
func (h *helper) poke(b byte) error {
	// A raw write: it must not go through a goroutine that could wait
	// behind the held CPU.
	_, err := unix.Write(int(h.in.Fd()), []byte{b})
	return err
}

// read returns the helper's next answer, or an error after d.
func (h *helper) read(d time.Duration) (string, error) {
	_ = h.outF.SetReadDeadline(time.Now().Add(d))
	line, err := h.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", h.name, err)
	}
	return strings.TrimSpace(line), nil
}

func (h *helper) stop() {
	_ = h.in.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	_ = h.outF.Close()
}

// pinProcess pins every thread of the process to cpu and, with prio > 0,
// makes each SCHED_FIFO at prio. The helpers do not lock their goroutine
// to a thread: the runtime's cooperative preemption of a locked goroutine
// hands the process's only P to another thread and parks the locked one
// on a futex, a voluntary sleep (traced: the preemptor left the CPU 18 ms
// into its window and the preempted task ran). Unlocked, a preempted
// goroutine is picked up again by the same thread at once; and whichever
// thread runs it, that thread is pinned and real-time. Threads the
// runtime starts later inherit both from the thread that starts them.
//
// Every thread is also named comm, so that a kernel report whose task is
// a helper says which (the runtime's threads would show the binary's name).
func pinProcess(cpu, prio int, comm string) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := setProcessCPUs(&set, prio); err != nil {
		return err
	}
	tids, _ := os.ReadDir("/proc/self/task")
	for _, t := range tids {
		_ = os.WriteFile("/proc/self/task/"+t.Name()+"/comm", []byte(comm), 0)
	}
	return nil
}

// setProcessCPUs gives every thread of the process the CPU set and, with
// prio > 0, SCHED_FIFO at prio.
func setProcessCPUs(set *unix.CPUSet, prio int) error {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	cpu := -1 // for messages only
	for i := 0; i < 1024; i++ {
		if set.IsSet(i) {
			cpu = i
			break
		}
	}
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			return fmt.Errorf("pin thread %d to cpu %d: %w", tid, cpu, err)
		}
		if prio > 0 {
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
				return fmt.Errorf("thread %d SCHED_FIFO %d: %w", tid, prio, err)
			}
		}
	}
	return nil
}

// racerMain is `agent racer <cpu> <path>`. Its answer also counts the
// involuntary context switches the call took (RUSAGE_THREAD's nivcsw):
// a preempted call took at least one.
func racerMain(args []string) error {
	if len(args) != 2 {
		return errors.New("agent racer: want <cpu> <path>")
	}
	cpu, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("agent racer: cpu %q", args[0])
	}
	if err := pinProcess(cpu, 0, racerComm); err != nil {
		return fmt.Errorf("agent racer: %w", err)
	}
	fd, err := unix.Open(args[1], unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent racer: %s: %w", args[1], err)
	}
	fmt.Println("ready")
	buf := make([]byte, 1)
	one := []byte("1")
	for {
		if n := rawRead(0, buf); n <= 0 {
			return nil
		}
		var ru0, ru1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
		// The calling thread's id first, so that the controller can read
		// its kernel stack while it is held.
		fmt.Printf("call %d\n", unix.Gettid())
		t0 := time.Now()
		// Raw, like the preemptor's waits: the call is timed alone.
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one[0])), 1)
		d := time.Since(t0)
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
		fmt.Printf("done %d %d %d %d %d\n", d.Nanoseconds(), int(errno), ru1.Nivcsw-ru0.Nivcsw, ru1.Nvcsw-ru0.Nvcsw, getcpu())
	}
}

// preemptMain is `agent preempt <cpu> <priority> <max-ns>`.
func preemptMain(args []string) error {
	if len(args) != 3 {
		return errors.New("agent preempt: want <cpu> <priority> <max-ns>")
	}
	cpu, err1 := strconv.Atoi(args[0])
	prio, err2 := strconv.Atoi(args[1])
	maxNS, err3 := strconv.ParseInt(args[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("agent preempt %q: want three integers", args)
	}
	if err := pinProcess(cpu, prio, "uinit"); err != nil {
		return fmt.Errorf("agent preempt: %w", err)
	}
	fmt.Println("ready")
	buf := make([]byte, 16)
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	var zero unix.Timespec
	for {
		if n := rawRead(0, buf[:1]); n <= 0 {
			return nil
		}
		if buf[0] != preemptStart {
			continue // a stop that came after the bound ended a spin
		}
		t0 := time.Now()
		// Spin, never sleep, until told to stop or the bound: the held
		// task must stay preempted, off the CPU, the whole window.
		stopped := 0
		for stopped == 0 && time.Since(t0).Nanoseconds() < maxNS {
			n, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			if int(n) > 0 && rawRead(0, buf[:1]) == 1 && buf[0] == preemptStop {
				stopped = 1
			}
		}
		fmt.Printf("spun %d %d %d\n", time.Since(t0).Nanoseconds(), getcpu(), stopped)
	}
}

// The preemptor's commands: distinct bytes, so that a stop arriving after
// the bound ended a spin is never taken for the next start.
const (
	preemptStart = 's'
	preemptStop  = 'x'
)

func getcpu() int {
	var cpu, node uint32
	unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0)
	return int(cpu)
}

// rawRead is read(2) without the Go scheduler: a blocking Syscall lets the
// runtime hand the process's only P to another thread, and the locked
// thread then waits on a futex for it when the syscall returns, which
// is a voluntary switch that lets the preempted task run (measured: the
// preemptor "spun" 1.2 s while the held task's call returned after 110
// ms). RawSyscall keeps the P, so the thread runs on at once.
func rawRead(fd int, b []byte) int {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return -1
	}
	return int(n)
}

// racerComm names the racer in the guest: a task name of its own, so that
// a report whose task is the racer says so. The preemptor is "uinit", one
// of the harness's own real-time threads (cell.GuestHarness).
const racerComm = "fth-racer"

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
	// outcomes is the latest outcome of each injection, by Seq.
	outcomes map[int]string
}

// executeRace runs the race scenario in a controller process of its own,
// started with every thread of the agent kept off the held CPU, and
// forwards its events. A fresh process is the only way to an address space
// that has never run on the held CPU: on riscv64 (ASID allocator) an mm
// keeps every CPU it ever ran on in its cpumask, so any TLB flush of the
// agent's own memory (the Go runtime returning pages) waited for the held
// vCPU and the protocol stalled for the host's whole hold limit.
func (a *agent) executeRace(ctx context.Context) error {
	if a.sys.numCPU < 2 {
		return fmt.Errorf("race: needs at least 2 CPUs (one held, one racing), have %d: boot with --cpus 2", a.sys.numCPU)
	}
	held := a.sys.numCPU - 1
	var rest unix.CPUSet
	for c := 0; c < held; c++ {
		rest.Set(c)
	}
	// No agent thread may wait on the held CPU's runqueue either: a
	// read parked on the netpoller needs another thread to wake it.
	if err := setProcessCPUs(&rest, 0); err != nil {
		return fmt.Errorf("race: keep the agent off cpu %d: %w", held, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var args []string
	for k, v := range a.opts.Args() {
		args = append(args, "-"+k+"="+v)
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{modeRaceCtl, strconv.Itoa(held)}, args...)...)
	cmd.Args[0] = "agent"
	cmd.Env = append(os.Environ(), "FTH_NO_CMDLINE=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("race: start the controller: %w", err)
	}
	latest := map[int]string{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev event.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			report.Logf(a.w, "race: controller: %s", sc.Text())
			continue
		}
		if ev.Kind == event.KindInjection {
			latest[ev.Injection.Seq] = ev.Injection.Outcome
		}
		_ = a.w.Emit(ev)
	}
	a.race = countOutcomes(latest)
	if err := cmd.Wait(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("%s (controller: %w)", strings.TrimPrefix(msg, "agent: "), err)
	}
	return nil
}

// raceCtlMain is `agent racectl <held-cpu> <agent flags>`: the race
// scenario's controller (executeRace), born with every CPU but the held
// one (which its own affinity therefore cannot tell it).
func raceCtlMain(ctx context.Context, args []string, sys system) error {
	if len(args) < 1 {
		return errors.New("agent racectl: want <held-cpu> <agent flags>")
	}
	held, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("agent racectl: held cpu %q", args[0])
	}
	opts, err := options.Parse(args[1:], "", options.Env{NumCPU: held + 1}, sys.stderr)
	if err != nil {
		return err
	}
	a := &agent{sys: sys, opts: opts, w: report.NewWriter(sys.stdout)}
	if err := a.controlRace(ctx, held); err != nil {
		fmt.Fprintf(sys.stderr, "agent: %v\n", err)
		return err
	}
	return nil
}

// controlRace is the controller's whole run, holding cpu held.
func (a *agent) controlRace(ctx context.Context, held int) error {
	window := a.opts.Window
	if window == options.Auto {
		window = options.RaceWindow(runtime.GOARCH)
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

	if !kmods.Loaded(targetModule) {
		// No kthreads: the racer must be the only caller of the target.
		if err := kmods.Load(filepath.Join(kmods.DefaultDir, targetModule+".ko"), "nthreads=0"); err != nil {
			return fmt.Errorf("race: load %s: %w", targetModule, err)
		}
	}
	r := &raceAgent{a: a, port: port, portIn: bufio.NewReader(port), cpu: held, window: window, outcomes: map[int]string{}}
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
	report.Logf(a.w, "race: %d injections at the %s of fth_target_counted, held cpu %d, window %v", a.opts.Injections, a.opts.RaceTarget, held, window)

	switch a.opts.RaceTarget {
	case options.RaceCallsite:
		err = r.callsites(ctx)
	default:
		err = r.trampolines(ctx)
	}
	report.Logf(a.w, "race: outcomes %v", countOutcomes(r.outcomes))
	return err
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
	if err := r.send(event.RaceMsg{Op: event.RacePeek, Addr: addr, Size: 8}); err != nil {
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
		return m, fmt.Errorf("race: the host: %s", m.Msg)
	}
	return m, nil
}

// inject runs one injection at addr: the steps 1 to 5 above, with action
// run beside the window while the task is held. checkFreed has the host
// read the target's bytes at the end of the window (trampolines, which a
// correct kernel never changes under a task inside them).
func (r *raceAgent) inject(in *event.Injection, addr uint64, size int, action func() error, checkFreed bool) error {
	r.seq++
	in.Seq, in.CPU, in.Addr = r.seq, r.cpu, fmt.Sprintf("%#x", addr)
	in.WindowMS = float64(r.window.Microseconds()) / 1000
	if err := r.send(event.RaceMsg{Op: event.RaceArm, Addr: addr, Size: size, CPU: r.cpu, TimeoutMS: int(raceStopTimeout.Milliseconds())}); err != nil {
		return err
	}
	if m, err := r.recv(5 * time.Second); err != nil || m.Op != event.RaceArmed {
		return fmt.Errorf("race: arm %#x: %+v %v", addr, m, err)
	}
	if err := r.racer.poke('c'); err != nil {
		return err
	}
	var tid int
	if line, err := r.racer.read(5 * time.Second); err != nil || !strings.HasPrefix(line, "call ") {
		return fmt.Errorf("race: the racer did not start its call: %q %v", line, err)
	} else {
		tid, _ = strconv.Atoi(strings.TrimPrefix(line, "call "))
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
	if m, err := r.recv(10 * time.Second); err != nil || m.Op != event.RaceReleased {
		return fmt.Errorf("race: release: %+v %v", m, err)
	}
	released := time.Now()
	// The action runs beside the window: on a correct kernel it may wait
	// for the held task itself (riscv64's CALL_OPS direct-call removal
	// waits for RCU-tasks), and the window must end regardless.
	acted := make(chan error, 1)
	go func() { acted <- action() }()
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
	// Where the held task is, in its own kernel stack: the proof that it
	// was preempted inside the target's caller and not, on a kernel
	// without preemption, on its way back to user space.
	in.Stack = taskStack(tid)
	if checkFreed {
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
	if !in.ActionDone {
		select {
		case actErr = <-acted:
			in.ActionMS = float64(time.Since(released).Microseconds()) / 1000
		case <-time.After(raceReturnTimeout):
			return fmt.Errorf("race: %s of %s did not end within %v after the held task ran on", in.Action, in.Symbol, raceReturnTimeout)
		}
	}
	judge(in, stopped == 1, targetCaller)
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
		return strings.HasPrefix(f, caller+"+") || strings.HasPrefix(f, in.Function+"+") || f == in.Addr
	})
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

// trampolines injects at the first instruction of the trampoline image of
// a fentry program on fth_target_counted, and detaches its only link
// during the window: the image may be freed only after the preempted task
// left it (RCU-tasks).
func (r *raceAgent) trampolines(ctx context.Context) error {
	// Trampoline images are in kallsyms only with BPF JIT symbols on,
	// which is the default only where the JIT is (x86_64, not riscv64).
	if err := os.WriteFile(jitKallsyms, []byte("1"), 0); err != nil {
		report.Logf(r.a.w, "race: %s: %v", jitKallsyms, err)
	}
	cache := btf.NewCache()
	m, err := oracle.NewMap(4)
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	defer m.Close()
	loader := &oracle.Loader{Map: m, Cache: cache}
	ld, err := loader.Load(targetCounted, oracle.FEntry, oracle.Key(oracle.FEntry, targetCounted))
	if err != nil {
		return fmt.Errorf("race: load a fentry program on %s: %w", targetCounted, err)
	}
	// One program for every injection: only the trampoline image comes
	// and goes, so a crash is the image's, not the program's.
	defer ld.Prog.Close()
	var second *oracle.Loaded
	if r.a.opts.RaceAction == options.RaceReplace {
		if second, err = loader.Load(targetCounted, oracle.FEntry, oracle.Key(oracle.FEntry, targetCounted)+"#2"); err != nil {
			return fmt.Errorf("race: load a second fentry program on %s: %w", targetCounted, err)
		}
		defer second.Prog.Close()
	}
	size := insnSize()
	// One read of kallsyms per injection (4 s under TCG): the images
	// listed after one attach are the ones to ignore after the next.
	before, err := trampolineSyms()
	if err != nil {
		return err
	}
	// detached holds every image address a past injection detached: the
	// allocator gives a new image the place of a freed one.
	detached := map[uint64]bool{}
	for i := 0; i < r.a.opts.Injections && ctx.Err() == nil; i++ {
		fd, errno := attach.LinkCreate(ld.Prog.FD(), oracle.FEntry.LinkType())
		if errno != 0 {
			return fmt.Errorf("race: attach fentry to %s: %w", targetCounted, errno)
		}
		addr, sym, after, err := newImage(trampolineSyms, before, detached)
		if err != nil {
			unix.Close(fd)
			return err
		}
		before = after
		detached[addr] = true
		in := &event.Injection{Target: options.RaceTrampoline, Symbol: sym + "+0x0", Function: targetCounted, Action: r.a.opts.RaceAction}
		// The action runs beside the window (inject): links is shared.
		var mu sync.Mutex
		links := []int{fd}
		var act func() error
		switch r.a.opts.RaceAction {
		case options.RaceReplace:
			act = func() error {
				fd2, errno := attach.LinkCreate(second.Prog.FD(), oracle.FEntry.LinkType())
				if errno != 0 {
					return fmt.Errorf("attach a second fentry: %w", errno)
				}
				mu.Lock()
				links = append(links, fd2)
				mu.Unlock()
				return nil
			}
		default:
			act = func() error {
				mu.Lock()
				links = links[1:]
				mu.Unlock()
				return unix.Close(fd)
			}
		}
		err = r.inject(in, addr, size, act, true)
		// Whatever is still attached goes now, outside the window.
		mu.Lock()
		for _, l := range links {
			unix.Close(l)
		}
		links = nil
		mu.Unlock()
		if err != nil {
			return err
		}
		if r.a.opts.RaceAction == options.RaceReplace {
			// The replacement made an image this agent never listed;
			// listed now, and detached like every image here, it cannot
			// pass for the next attach's while it waits to be freed.
			if before, err = trampolineSyms(); err != nil {
				return err
			}
			for a := range before {
				detached[a] = true
			}
		}
	}
	return nil
}

// callsites injects at the second instruction of fth_target_counted's
// patchable entry while it is disabled, and enables the function tracer
// on it during the window: a kernel that rewrites both instructions of
// the callsite under a preempted task (riscv's AUIPC+JALR before Linux
// 6.16) sends it through a half-old pair.
func (r *raceAgent) callsites(ctx context.Context) error {
	off, err := secondInsnOffset()
	if err != nil {
		return err
	}
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, targetModule, []string{targetCounted})
	if err != nil {
		return fmt.Errorf("race: %w", err)
	}
	fn, ok := addrs.Addr(targetCounted)
	if !ok {
		return fmt.Errorf("race: no kallsyms address for %s", targetCounted)
	}
	top := tracefs.New(tracefs.DefaultRoot)
	inst, err := top.Instance("fth_race")
	if err != nil {
		return fmt.Errorf("race: tracefs instance: %w", err)
	}
	defer func() {
		_ = inst.Reset()
		_ = top.RemoveInstance("fth_race")
	}()
	if err := inst.SetFilter(targetCounted); err != nil {
		return fmt.Errorf("race: set_ftrace_filter %s: %w", targetCounted, err)
	}
	for i := 0; i < r.a.opts.Injections && ctx.Err() == nil; i++ {
		if err := inst.SetTracer(tracefs.Nop); err != nil {
			return fmt.Errorf("race: tracer off: %w", err)
		}
		in := &event.Injection{Target: options.RaceCallsite, Symbol: fmt.Sprintf("%s+%#x", targetCounted, off), Function: targetCounted, Action: "enable"}
		enable := func() error { return inst.SetTracer(tracefs.Function) }
		if err := r.inject(in, fn+off, 2, enable, false); err != nil {
			return err
		}
	}
	return inst.SetTracer(tracefs.Nop)
}

// targetCaller is the function that calls the target, fth_target's
// debugfs write handler: it is on the held task's stack wherever inside
// fth_target_counted or its trampoline the task was preempted.
const targetCaller = "call_write"

// taskStack reads /proc/<tid>/stack: the kernel frames of a task that is
// not running (CONFIG_STACKTRACE), without addresses ("call_write+0x4c/0x64
// [fth_target]"); nil when the kernel does not say.
func taskStack(tid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stack", tid))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// "[<0>] call_write+0x4c/0x64 [fth_target]"
		if _, f, ok := strings.Cut(l, "] "); ok {
			out = append(out, strings.TrimSpace(f))
		}
	}
	return out
}

// jitKallsyms makes the kernel list BPF images in kallsyms.
const jitKallsyms = "/proc/sys/net/core/bpf_jit_kallsyms"

// newImage finds the image the last attach made: a bpf_trampoline_ symbol
// that was not listed before it, or, when the new image took the place of
// a detached one, the one detached address still listed. While more than
// one detached image is listed (some not yet freed) it reads kallsyms
// again, for a few seconds.
func newImage(scan func() (map[uint64]string, error), before map[uint64]string, detached map[uint64]bool) (uint64, string, map[uint64]string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := scan()
		if err != nil {
			return 0, "", nil, err
		}
		var fresh, reused []uint64
		for a := range after {
			switch _, old := before[a]; {
			case !old:
				fresh = append(fresh, a)
			case detached[a]:
				reused = append(reused, a)
			}
		}
		switch {
		case len(fresh) == 1:
			return fresh[0], after[fresh[0]], after, nil
		case len(fresh) == 0 && len(reused) == 1:
			return reused[0], after[reused[0]], after, nil
		case len(fresh) == 0 && len(reused) == 0:
			return 0, "", nil, fmt.Errorf("race: no new bpf_trampoline_ symbol in %s after the attach (kptr_restrict, or %s off)", ksyms.DefaultPath, jitKallsyms)
		}
		if time.Now().After(deadline) {
			return 0, "", nil, fmt.Errorf("race: cannot tell the new trampoline image among %d new and %d reused places", len(fresh), len(reused))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// trampolineSyms reads the bpf_trampoline_ symbols of kallsyms by address.
func trampolineSyms() (map[uint64]string, error) {
	f, err := os.Open(ksyms.DefaultPath)
	if err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	defer f.Close()
	out := map[uint64]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, " bpf_trampoline_") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) < 3 {
			continue
		}
		a, err := strconv.ParseUint(fs[0], 16, 64)
		if err != nil || a == 0 {
			continue
		}
		out[a] = fs[2]
	}
	return out, sc.Err()
}

// insnSize is the breakpoint's kind for the first instruction of a
// trampoline: x86 counts bytes (1 does), the others a word.
func insnSize() int {
	if runtime.GOARCH == "amd64" {
		return 1
	}
	return 4
}

// secondInsnOffset is where the second instruction of a patchable function
// entry lies: riscv64 patches AUIPC+JALR (Linux 7.x only the JALR), arm64
// a MOV and a BL. x86 patches one 5-byte call: it has no second
// instruction to stop at.
func secondInsnOffset() (uint64, error) {
	switch runtime.GOARCH {
	case "riscv64", "arm64":
		return 4, nil
	}
	return 0, fmt.Errorf("race: racetarget=callsite needs a two-instruction callsite (riscv64, arm64); %s patches one instruction: use racetarget=trampoline", runtime.GOARCH)
}
