// Package cell runs one matrix cell: boot a built kernel and initramfs, watch
// the console and the agent channel, enforce deadlines, and combine everything
// into a verdict written to the cell's directory as it happens.
package cell

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/monitor"
	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/harness/race"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/hang"
	"github.com/ftrace-harness/fth/wire/options"
)

// Spec is everything a cell needs beyond the built artifacts.
type Spec struct {
	VM qemu.Config
	// Agent are the agent's options: given as fth.<key>=<value> kernel
	// parameters, which the agent reads; the host reads the fields.
	Agent options.Args
	// Deadline bounds the whole boot, before the arch's TimeoutScale
	// (Timeouts).
	Deadline time.Duration
	// Silence is the no-output watchdog: before the agent says hello, the
	// console must speak this often; after, the agent must (it reports
	// liveness every 2 s).
	Silence time.Duration
	// PauseAfter, if set, stops the VM over QMP that long after the agent's
	// hello: a host-side hang injection to prove the watchdog works.
	PauseAfter time.Duration
	// Progress, if set, shows the agent's long phases (attach, detach,
	// churn); nil logs a line every 5 s instead.
	Progress *progress.Reporter
	// StopAtFinding ends the cell shortly after the first kernel report
	// (see monitor.Spec).
	StopAtFinding bool
}

// Timeouts are the cell's waits, graces included, scaled once by the
// arch's TimeoutScale: the same constructor scales a soak's.
func (s Spec) Timeouts() monitor.Timeouts {
	return monitor.NewTimeouts(s.VM.Arch.TimeoutScale, s.Deadline, s.Silence)
}

// Run boots the VM described by spec and has the monitor record everything
// in w. The returned error is an infrastructure error (QEMU would not
// start); kernel misbehaviour is a verdict, not an error.
func Run(ctx context.Context, log *slog.Logger, w *results.CellWriter, spec Spec) error {
	timeouts := spec.Timeouts()
	// The harness's defaults first: the kernel takes the last of a
	// parameter given twice, so a cell's own (fth run --kernel-arg) wins.
	spec.VM.Cmdline = append(rcuTasksStallArgs(timeouts.Silence), spec.VM.Cmdline...)
	spec.VM.Cmdline = append(spec.VM.Cmdline, spec.Agent.Cmdline()...)
	_ = w.Update(func(r *results.Result) {
		r.Accel = string(spec.VM.Accel)
		r.CPUs = spec.VM.CPUs
		r.Cmdline = spec.VM.KernelCmdline()
		r.Repro = spec.VM.Repro()
	})
	vm, err := qemu.Start(ctx, log, spec.VM)
	if err != nil {
		return err
	}
	inst := qemu.NewInstance(vm)
	defer inst.Close()
	if spec.VM.Race {
		rctx, cancel := context.WithCancel(ctx)
		c := &race.Conductor{Log: log, Target: vm, PCRegister: spec.VM.Arch.GDBPC, HoldLimit: scaled(race.DefaultHoldLimit, timeouts.Scale)}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := c.Serve(rctx); err != nil {
				log.Warn("race: the conductor stopped", "err", err)
			}
		}()
		defer func() { cancel(); <-served }()
	}
	return monitor.Run(ctx, log, w, inst, monitor.Spec{
		Timeouts:   timeouts,
		PauseAfter: spec.PauseAfter,
		Progress:   spec.Progress,
		// The agent option that stops avoiding the known findings' triggers
		// also makes them count.
		IncludeKnown:  spec.Agent.Options().IncludeKnown,
		Harness:       GuestHarness,
		StopAtFinding: spec.StopAtFinding,
	})
}

// GuestHarness is how the harness's threads look in the guest: u-root's
// init starts the agent as "uinit" (the task name every agent thread and
// its spin processes show), and its real-time threads use SCHED_FIFO/RR
// priorities 1 to 10 (kernel prio 98 to 89): the hammer's
// hammer.RTPriority, crash=rt-inversion's 1 and 2.
var GuestHarness = hang.Harness{Comm: "uinit", RTPrioLo: 89, RTPrioHi: 98}

// rcuTasksStallArgs make the kernel name the tasks holding an RCU-tasks
// grace period (with their stacks) after two thirds of the silence
// watchdog, instead of its default ten minutes: every churn operation
// waits for RCU-tasks, so a stuck grace period is the usual shape of a
// silent agent, and its holders must be on the console before the VM is
// killed. Its "grace period ... jiffies old" notes (a finding for the
// console detector) start at half the watchdog instead of 10 s: under TCG
// a grace period of ten seconds is slow, not stuck. The values are in
// jiffies; the base fragment fixes HZ at 250.
func rcuTasksStallArgs(silence time.Duration) []string {
	return []string{
		fmt.Sprintf("rcupdate.rcu_task_stall_info=%d", int(silence.Seconds()/2)*kernelHZ),
		fmt.Sprintf("rcupdate.rcu_task_stall_timeout=%d", int(silence.Seconds()*2/3)*kernelHZ),
	}
}

// kernelHZ is CONFIG_HZ of every kernel the harness builds (kconfigs/base).
const kernelHZ = 250

func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) * scale)
}
