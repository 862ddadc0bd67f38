package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/racer"
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
// They are the race scenario's helper processes (racer.Start, racer.PinProcess):
// asynchronous preemption off, one P, and every thread pinned and
// real-time, so that whichever thread runs the spin is the one starved.
// Each says "ready" only once it is. A spinner that ran on after the hog
// took the CPU (once its spin ran on a thread nobody had pinned, or the
// hog had not taken over before the next sleep) passes a quiescent state
// at its next tick in user space and the grace period ends: the injection
// checks the victim is off the CPU and says so when it is not.
func injectRTInversion(cpu int) (stop func(), err error) {
	victim, err := racer.Start(modeSpin, strconv.Itoa(cpu), "1")
	if err != nil {
		return nil, fmt.Errorf("start the SCHED_FIFO 1 spinner: %w", err)
	}
	hog, err := racer.Start(modeSpin, strconv.Itoa(cpu), "2")
	if err != nil {
		victim.Stop()
		return nil, fmt.Errorf("start the SCHED_FIFO 2 spinner: %w", err)
	}
	stop = func() { hog.Stop(); victim.Stop() }
	ticks, err := cpuTicks(victim.Pid(), time.Second)
	if err != nil {
		stop()
		return nil, err
	}
	if ticks > 0 {
		stop()
		return nil, emit.Unjudged(fmt.Errorf("the SCHED_FIFO 1 spinner ran %d ticks in the second after the SCHED_FIFO 2 one took cpu %d: nothing is starved", ticks, cpu))
	}
	return stop, nil
}

// cpuTicks is how many clock ticks the process pid ran (user and system,
// every thread) during d.
func cpuTicks(pid int, d time.Duration) (int64, error) {
	read := func() (int64, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		return statTicks(string(b))
	}
	t0, err := read()
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	t1, err := read()
	return t1 - t0, err
}

// statTicks adds utime and stime (fields 14 and 15) of a /proc/<pid>/stat
// line; the task name, field 2, may hold spaces and parentheses.
func statTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no task name", stat)
	}
	// After ")": field 3 (state) is fs[0], so field n is fs[n-3].
	fs := strings.Fields(stat[i+1:])
	if len(fs) < 13 {
		return 0, fmt.Errorf("stat %q: %d fields after the name", stat, len(fs))
	}
	u, err1 := strconv.ParseInt(fs[11], 10, 64)
	s, err2 := strconv.ParseInt(fs[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat utime/stime: %w", err)
	}
	return u + s, nil
}

// spinMain is `agent spin <cpu> <priority>`: every thread pinned to cpu at
// SCHED_FIFO priority, then a spin in user space forever, under the
// agent's task name so that the host counts it among the harness's
// threads.
func spinMain(args []string) error {
	if len(args) != 2 {
		return errors.New("agent spin: want <cpu> <priority>")
	}
	cpu, err1 := strconv.Atoi(args[0])
	prio, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("agent spin %q: want two integers", args)
	}
	if err := racer.PinProcess(cpu, prio, racer.GuestComm); err != nil {
		return fmt.Errorf("agent spin: %w", err)
	}
	fmt.Println("ready")
	for n := uint64(0); ; n++ {
		spinSink = n
	}
}

// spinSink keeps the spin loop from being optimised away.
var spinSink uint64

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
