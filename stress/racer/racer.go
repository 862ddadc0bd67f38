// Package racer is the race scenario's helper processes: the racer,
// which calls the target function from the held CPU, and the preemptor,
// which takes that CPU from it. Both are the agent binary run again under
// a subcommand (ModeRacer, ModePreempt), whose main calls RacerMain or
// PreemptMain; Start runs one and talks to it, a command byte at a time
// (Poke) and an answer a line (Read).
package racer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/fthtarget"
)

// The helpers' subcommands of the agent binary.
const (
	// ModeRacer is `agent racer <cpu> <path> [<read-path>]`: pinned to
	// cpu, it writes "1" to path (a debugfs file whose write calls the
	// target) once per command byte, and answers each call (RacerMain).
	ModeRacer = "racer"
	// ModePreempt is `agent preempt <cpu> <priority> <max-ns>`: pinned
	// to cpu at SCHED_FIFO priority, it spins from a start byte until a
	// stop byte or max-ns (PreemptMain).
	ModePreempt = "preempt"
)

// Call is the racer's command for one timed call of the target through
// its path: any byte that is not another command.
const Call = 'c'

// Helper is a running racer or preemptor: its stdin and its answers.
type Helper struct {
	name string
	cmd  *exec.Cmd
	in   *os.File
	out  *bufio.Reader
	outF *os.File
}

// Command runs this agent binary again under a subcommand.
func Command(ctx context.Context, mode string, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, append([]string{mode}, args...)...)
	// u-root's busybox dispatches on the name it is run as.
	cmd.Args[0] = "agent"
	return cmd, nil
}

// Start runs the helper of mode with args and waits for its "ready".
func Start(mode string, args ...string) (*Helper, error) {
	cmd, err := Command(context.Background(), mode, args...)
	if err != nil {
		return nil, err
	}
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
	h := &Helper{name: mode, cmd: cmd, in: inW, out: bufio.NewReader(outR), outF: outR}
	// Each helper says "ready" once pinned and scheduled as asked.
	line, err := h.Read(5 * time.Second)
	if err != nil || line != "ready" {
		h.Stop()
		return nil, fmt.Errorf("agent %s did not start: %q %v", mode, line, err)
	}
	return h, nil
}

// Poke sends one command byte (the racer's call, the preemptor's start
// and stop).
func (h *Helper) Poke(b byte) error {
	// A raw write: it must not go through a goroutine that could wait
	// behind the held CPU.
	_, err := unix.Write(int(h.in.Fd()), []byte{b})
	return err
}

// Read returns the helper's next answer, or an error after d.
func (h *Helper) Read(d time.Duration) (string, error) {
	_ = h.outF.SetReadDeadline(time.Now().Add(d))
	line, err := h.out.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", h.name, err)
	}
	return strings.TrimSpace(line), nil
}

// Pid is the helper's process id.
func (h *Helper) Pid() int { return h.cmd.Process.Pid }

// Stop ends the helper and waits for it.
func (h *Helper) Stop() {
	_ = h.in.Close()
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	_ = h.outF.Close()
}

// PinProcess pins every thread of the process to cpu and, with prio > 0,
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
func PinProcess(cpu, prio int, comm string) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := SetProcessCPUs(&set, prio); err != nil {
		return err
	}
	NameThreads(comm)
	return nil
}

// NameThreads gives every thread of the process the task name comm, best
// effort: threads started later inherit it.
func NameThreads(comm string) {
	tids, _ := os.ReadDir("/proc/self/task")
	for _, t := range tids {
		_ = os.WriteFile("/proc/self/task/"+t.Name()+"/comm", []byte(comm), 0)
	}
}

// SetProcessCPUs gives every thread of the process the CPU set and, with
// prio > 0, SCHED_FIFO at prio. It lists the threads again until a pass
// finds none it has not set: a thread the runtime starts from one not yet
// set, between a listing and that thread's turn, inherits nothing (a
// racer whose writing thread was such a one called from CPU 0 for a whole
// CI run, every injection missed). A thread started after a pass that
// found nothing new was started by one already set, and inherits.
func SetProcessCPUs(set *unix.CPUSet, prio int) error {
	done := map[int]bool{}
	for pass := 0; ; pass++ {
		tids, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, set); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue // gone since the listing
				}
				return fmt.Errorf("pin thread %d to %d CPU(s): %w", tid, set.Count(), err)
			}
			if prio > 0 {
				attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
				if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
					return fmt.Errorf("thread %d SCHED_FIFO %d: %w", tid, prio, err)
				}
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
		if pass == 100 {
			return fmt.Errorf("pin %d CPU(s): the process kept starting threads through %d passes", set.Count(), pass)
		}
	}
}

// RacerMain is `agent racer <cpu> <path> [<read-path>]`. Its answer also
// counts the involuntary context switches the call took (RUSAGE_THREAD's
// nivcsw): a preempted call took at least one. With read-path, the
// command ReadLoop reads that file whole, again and again (a tracefs
// file whose every read looks kernel state up, as enabled_functions does).
func RacerMain(args []string) error {
	if len(args) != 2 && len(args) != 3 {
		return errors.New("agent racer: want <cpu> <path> [<read-path>]")
	}
	cpu, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("agent racer: cpu %q", args[0])
	}
	if err := PinProcess(cpu, 0, Comm); err != nil {
		return fmt.Errorf("agent racer: %w", err)
	}
	fd, err := unix.Open(args[1], unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("agent racer: %s: %w", args[1], err)
	}
	readFD := -1
	if len(args) == 3 {
		if readFD, err = unix.Open(args[2], unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("agent racer: %s: %w", args[2], err)
		}
	}
	fmt.Println("ready")
	buf := make([]byte, 1)
	one := []byte("1")
	// The nap file (fthtarget.NapFile), opened at the first Nap or
	// NoNap.
	napFD := -1
	nap := []byte(strconv.FormatInt(NapTime().Milliseconds(), 10))
	noNap := []byte("0")
	for {
		if n := RawRead(0, buf); n <= 0 {
			return nil
		}
		if buf[0] == Loop {
			loopCalls(fd, one)
			continue
		}
		if buf[0] == ReadLoop && readFD >= 0 {
			loopReads(readFD)
			continue
		}
		callFD, arg := fd, one
		if buf[0] == Nap || buf[0] == NoNap {
			if napFD < 0 {
				if napFD, err = unix.Open(fthtarget.NapFile, unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
					return fmt.Errorf("agent racer: %s: %w", fthtarget.NapFile, err)
				}
			}
			callFD, arg = napFD, nap
			if buf[0] == NoNap {
				arg = noNap
			}
		}
		var ru0, ru1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
		// The calling thread's id first, so that the controller can read
		// its kernel stack while it is held.
		fmt.Printf("call %d\n", unix.Gettid())
		t0 := time.Now()
		// Raw, like the preemptor's waits: the call is timed alone.
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(callFD), uintptr(unsafe.Pointer(&arg[0])), uintptr(len(arg)))
		d := time.Since(t0)
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
		fmt.Printf("done %d %d %d %d %d\n", d.Nanoseconds(), int(errno), ru1.Nivcsw-ru0.Nivcsw, ru1.Nvcsw-ru0.Nvcsw, Getcpu())
	}
}

// Loop is the racer's command to call the target back to back until
// the next byte (the INT3 window: the callsite is run whenever the
// patcher is held, with no round trip to a controller that may be held
// with it); every other byte is one timed call.
const Loop = 'l'

// ReadLoop is the racer's command to read its read-path whole, back
// to back, until the next byte.
const ReadLoop = 'r'

// Nap is the racer's command for one timed call of
// fth_target_napping() (through fthtarget.NapFile), which sleeps
// NapTime: the fexit trampoline target's call.
const Nap = 'n'

// NoNap is the racer's command for one call of
// fth_target_napping() that asks for no nap: the fexit trampoline
// target's call when the task is held in the image before the function
// (the agent's fexit prologue points).
const NoNap = 'm'

// NapTime is long enough for a detached fexit image's first wait
// (RCU-tasks, which the agent waits for with fth_target's barrier) and
// its percpu_ref's switch to atomic (an RCU grace period) to end while
// the task sleeps in the original function, so that the exits of the
// tasks in it drop the image's last references: the image's last wait
// (RCU-tasks again, for the epilogue) then starts with the held task
// still in the image.
// Measured on x86_64 under TCG, the first wait ended 340-370 ms after
// the detach (a campaign, 2026-12-07): 1.5 s there; the other arches'
// grace periods under TCG are slower, and keep 3 s.
func NapTime() time.Duration {
	if runtime.GOARCH == "amd64" {
		return 1500 * time.Millisecond
	}
	return 3 * time.Second
}

// loopReads reads fd from its start to its end, again and again, until
// stdin has a byte, as loopCalls calls.
func loopReads(fd int) {
	buf := make([]byte, 64<<10)
	loopUntilPoked(func() unix.Errno {
		_, _, errno := unix.RawSyscall(unix.SYS_LSEEK, uintptr(fd), 0, 0)
		for errno == 0 {
			n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			if errno = e; n == 0 {
				break
			}
		}
		return errno
	})
}

// loopCalls calls the target through fd until stdin has a byte.
func loopCalls(fd int, one []byte) {
	loopUntilPoked(func() unix.Errno {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one[0])), 1)
		return errno
	})
}

// loopUntilPoked runs op back to back until stdin has a byte, reads it,
// and says "looped <ops> <failed> <errno>": failed counts the ops that
// returned an error, errno is the last one's.
func loopUntilPoked(op func() unix.Errno) {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	var zero unix.Timespec
	ops, failed, last := 0, 0, 0
	for {
		if errno := op(); errno != 0 {
			failed, last = failed+1, int(errno)
		}
		ops++
		n, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		if n > 0 {
			b := make([]byte, 1)
			RawRead(0, b)
			fmt.Printf("looped %d %d %d\n", ops, failed, last)
			return
		}
	}
}

// PreemptMain is `agent preempt <cpu> <priority> <max-ns>`.
func PreemptMain(args []string) error {
	if len(args) != 3 {
		return errors.New("agent preempt: want <cpu> <priority> <max-ns>")
	}
	cpu, err1 := strconv.Atoi(args[0])
	prio, err2 := strconv.Atoi(args[1])
	maxNS, err3 := strconv.ParseInt(args[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return fmt.Errorf("agent preempt %q: want three integers", args)
	}
	if err := PinProcess(cpu, prio, GuestComm); err != nil {
		return fmt.Errorf("agent preempt: %w", err)
	}
	fmt.Println("ready")
	buf := make([]byte, 16)
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	var zero unix.Timespec
	for {
		if n := RawRead(0, buf[:1]); n <= 0 {
			return nil
		}
		if buf[0] != PreemptStart {
			continue // a stop that came after the bound ended a spin
		}
		t0 := time.Now()
		// Spin, never sleep, until told to stop or the bound: the held
		// task must stay preempted, off the CPU, the whole window.
		stopped := 0
		for stopped == 0 && time.Since(t0).Nanoseconds() < maxNS {
			n, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			if int(n) > 0 && RawRead(0, buf[:1]) == 1 && buf[0] == PreemptStop {
				stopped = 1
			}
		}
		fmt.Printf("spun %d %d %d\n", time.Since(t0).Nanoseconds(), Getcpu(), stopped)
	}
}

// The preemptor's commands: distinct bytes, so that a stop arriving after
// the bound ended a spin is never taken for the next start.
const (
	PreemptStart = 's'
	PreemptStop  = 'x'
)

// Getcpu is the CPU the calling thread runs on (getcpu(2), raw).
func Getcpu() int {
	var cpu, node uint32
	unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0)
	return int(cpu)
}

// RawRead is read(2) without the Go scheduler: a blocking Syscall lets the
// runtime hand the process's only P to another thread, and the locked
// thread then waits on a futex for it when the syscall returns, which
// is a voluntary switch that lets the preempted task run (measured: the
// preemptor "spun" 1.2 s while the held task's call returned after 110
// ms). RawSyscall keeps the P, so the thread runs on at once.
func RawRead(fd int, b []byte) int {
	n, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return -1
	}
	return int(n)
}

// Comm names the racer in the guest: a task name of its own, so that
// a report whose task is the racer says so. The preemptor is GuestComm,
// one of the harness's own real-time threads.
const Comm = "fth-racer"

// GuestComm is the agent's task name in the guest (u-root starts it as
// uinit), which the host counts as the harness's (cell.GuestHarness).
const GuestComm = "uinit"

// TaskStack reads /proc/<tid>/stack: the kernel frames of a task that is
// not running (CONFIG_STACKTRACE), without addresses ("call_write+0x4c/0x64
// [fth_target]"); nil when the kernel does not say.
func TaskStack(tid int) []string {
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

// OnCPU runs fn on a thread of its own pinned to cpu, with that thread's
// id, and sends its result.
func OnCPU(cpu int, fn func(tid int) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- err
			return
		}
		done <- fn(unix.Gettid())
	}()
	return done
}
