package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// injectRTInversion makes the stall the churn's old preemption pressure
// made by accident (crash=rt-inversion), on purpose: two agent threads on
// one CPU at SCHED_FIFO, the lower one runnable and spinning, the higher
// one spinning above it for good. The lower one is then a task that
// RCU-tasks waits for and that never runs: every synchronize_rcu_tasks()
// (each BPF trampoline's last detach) blocks. The host must report it as
// harness-induced, with the runqueue rows that show why, never as a kernel
// hang. The garbage collector is turned off first: a collection would wait
// for the starved thread forever and freeze the whole agent, which is a
// different (silent) outcome of the same cause.
func injectRTInversion(cpu int) error {
	debug.SetGCPercent(-1)
	started := make(chan error, 2)
	var victimRuns atomic.Bool
	spin := func(prio int, ran *atomic.Bool) {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			started <- fmt.Errorf("pin to cpu %d: %w", cpu, err)
			return
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			started <- fmt.Errorf("SCHED_FIFO %d: %w", prio, err)
			return
		}
		started <- nil
		for {
			if ran != nil {
				ran.Store(true)
			}
		}
	}
	go spin(1, &victimRuns)
	if err := <-started; err != nil {
		return err
	}
	// The victim must be on the CPU's runqueue, running, before the hog
	// takes the CPU from it: preempted, not asleep.
	for deadline := time.Now().Add(5 * time.Second); !victimRuns.Load(); {
		if time.Now().After(deadline) {
			return fmt.Errorf("the SCHED_FIFO 1 thread never ran on cpu %d", cpu)
		}
		time.Sleep(10 * time.Millisecond)
	}
	go spin(2, nil)
	return <-started
}
