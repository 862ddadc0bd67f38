package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/tracefs"
)

// injectRTInversion makes the stall the churn's old preemption pressure
// made by accident (crash=rt-inversion), on purpose: two agent processes on
// one CPU at SCHED_FIFO, the lower one preempted while it spins and never
// run again, the higher one spinning above it for good. The lower one is
// then a task RCU-tasks waits for: its grace periods never end. The host
// must report the stall as harness-induced, with the runqueue rows that
// show why, never as a kernel hang.
//
// They are processes of their own, not threads of the agent: the Go
// runtime parks a locked thread whose goroutine it preempts, a voluntary
// context switch that ends the stall at once. A spin process runs with
// asynchronous preemption off and one P, so nothing in it ever sleeps.
func injectRTInversion(cpu int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	start := func(prio int) error {
		cmd := exec.Command(exe, modeSpin, strconv.Itoa(cpu), strconv.Itoa(prio))
		// u-root's busybox dispatches on the name it is run as.
		cmd.Args[0] = "agent"
		cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1", "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		return cmd.Start()
	}
	if err := start(1); err != nil {
		return fmt.Errorf("start the SCHED_FIFO 1 spinner: %w", err)
	}
	// The victim must be running, not asleep, when the hog preempts it.
	time.Sleep(time.Second)
	if err := start(2); err != nil {
		return fmt.Errorf("start the SCHED_FIFO 2 spinner: %w", err)
	}
	time.Sleep(time.Second)
	return nil
}

// spinMain is `agent spin <cpu> <priority>`: pin to cpu, take SCHED_FIFO
// at priority, and spin in user space forever, under the agent's task name
// so that the host counts it among the harness's threads.
func spinMain(args []string) error {
	if len(args) != 2 {
		return errors.New("agent spin: want <cpu> <priority>")
	}
	cpu, err1 := strconv.Atoi(args[0])
	prio, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("agent spin %q: want two integers", args)
	}
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&guestComm[0])), 0, 0, 0)
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("agent spin: pin to cpu %d: %w", cpu, err)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("agent spin: SCHED_FIFO %d: %w", prio, err)
	}
	for n := uint64(0); ; n++ {
		spinSink = n
	}
}

// spinSink keeps the spin loop from being optimised away.
var spinSink uint64

// guestComm is the agent's task name in the guest (u-root starts it as
// uinit), NUL-terminated for prctl.
var guestComm = []byte("uinit\x00")

// waitTasksRCU makes the agent wait, as a kernel developer's tool would,
// for an RCU-tasks grace period: a function tracer on a tracefs instance,
// switched off, ends in ftrace_shutdown(), whose ops is dynamic and so
// waits in synchronize_rcu_tasks() before its trampoline is freed. 7.3's
// BPF detach waits for no grace period synchronously (call_rcu_tasks), so
// crash=rt-inversion needs this to show its stall.
func waitTasksRCU() error {
	top := tracefs.New(tracefs.DefaultRoot)
	inst, err := top.Instance("fth-rcu-tasks")
	if err != nil {
		return err
	}
	if err := inst.SetFilter("do_nanosleep"); err != nil {
		return err
	}
	if err := inst.SetTracer("function"); err != nil {
		return err
	}
	// Blocks until the grace period ends: with the stall injected, until
	// the host ends the cell.
	return inst.SetTracer("nop")
}
