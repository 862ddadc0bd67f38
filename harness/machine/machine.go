// Package machine is what the monitor runs a cell on: a kernel that runs the
// agent, booted under QEMU (package qemu) or deployed to a board over SSH
// (package soak's board, on package ssh's client). Its shape follows
// syzkaller's vmimpl.Instance: the instance starts the agent itself, hands
// over one ordered stream of what happened (console lines, agent lines,
// machine events), and answers for forensics and teardown. Everything that
// judges — watchdogs, hang tails, verdicts, the result files — lives in
// harness/monitor, once for every kind of target.
//
// Capabilities only some targets have (pausing the vCPUs, reading why QEMU
// reset) are separate interfaces the monitor finds by type assertion.
// Injector is not one of them: harness/cell hands the race conductor the
// VM itself, and the monitor never sees the race port.
// Construction stays with the caller (harness/cell, harness/soak): there is
// no registry.
package machine

import (
	"context"
	"io"

	"github.com/ftrace-harness/fth/harness/gdbstub"
	"github.com/ftrace-harness/fth/results"
)

// Kind says what an Event carries.
type Kind int

const (
	// Console is one line of the kernel log: the serial console of a VM,
	// the /dev/kmsg stream of a board.
	Console Kind = iota
	// Agent is one line of the agent's event channel (JSON).
	Agent
	// Exited: the guest is gone (QEMU exited) or the agent process ended
	// without the target expecting more. Err may say why.
	Exited
	// Reset: the guest reset the machine itself and the target holds it
	// stopped, registers intact, for Diagnose (QEMU with
	// reboot=shutdown,shutdown=pause).
	Reset
	// Lost: the target lost its connection to the machine and is waiting
	// for it to come back; the monitor's silence watchdog waits too.
	Lost
	// Back: the machine answered again in the same boot (a network blip);
	// the agent goes on or is restarted by the target.
	Back
	// Rebooted: the machine came back in a new boot. Findings holds what the
	// target recovered of the crash (pstore, the previous boot's log), and
	// Resumed whether the target started the agent again in the new boot.
	Rebooted
	// Unreachable: the machine did not come back; the target gave up.
	Unreachable
)

// String names the kind for logs.
func (k Kind) String() string {
	switch k {
	case Console:
		return "console"
	case Agent:
		return "agent"
	case Exited:
		return "exited"
	case Reset:
		return "reset"
	case Lost:
		return "lost"
	case Back:
		return "back"
	case Rebooted:
		return "rebooted"
	case Unreachable:
		return "unreachable"
	}
	return "kind(?)"
}

// Event is one thing a target reports, in the order it happened.
type Event struct {
	Kind Kind
	// Text is the line, for Console and Agent.
	Text string
	// History marks a Console line from before the cell began (a board's
	// kernel log backlog): it goes to console.log, not to the detector.
	History bool
	// Err is why the guest or agent ended (Exited), or why the machine is
	// unreachable (Unreachable).
	Err error
	// Findings are reports recovered after a reboot (Rebooted), each with
	// its Source ("pstore", "prev-boot").
	Findings []results.Finding
	// Resumed says the agent runs again after a reboot (Rebooted).
	Resumed bool
	// BootID is the new boot's id (Rebooted).
	BootID string
}

// Instance is one kernel under test running the agent.
type Instance interface {
	// Events delivers what happens, in order. The channel is closed when
	// the instance has nothing more to say (after Exited, Unreachable, or
	// Close).
	Events() <-chan Event
	// Diagnose gathers what the target can tell about a guest that
	// stopped talking or misbehaved, given the report the cell ended on
	// (nil for none; a hang the console did not report is a
	// console.KindHang finding): registers and stack words of a VM, a
	// board's blocked tasks (sysrq w) and agent task stacks. It is called
	// before teardown, at most once, and must return within ctx. Its
	// Diagnosis says whether the console is still to deliver evidence it
	// set off; the monitor reads that before it explains a hang.
	Diagnose(ctx context.Context, rep *results.Finding) Diagnosis
	// Kill ends the guest at once, after a hang: nothing more is read.
	Kill()
	// Close releases everything; safe after Kill and more than once.
	Close() error
}

// Diagnosis is what a target's Diagnose gathered.
type Diagnosis struct {
	// File names the cell directory's file Text belongs in ("" for
	// nothing), such as results.RegistersFile or results.TasksFile.
	File, Text string
	// Wait says Diagnose set off output that the console has yet to
	// deliver (a board's sysrq w, written over SSH, comes back through
	// the kernel log stream): the monitor reads the console until it
	// goes quiet before it goes on.
	Wait bool
}

// Pauser is a target whose vCPUs can be stopped from outside, as a hang
// would stop them: the monitor's hang injection (--pause-after).
type Pauser interface {
	Pause(ctx context.Context) error
}

// Injector is a target that can hold one vCPU at an exact instruction
// while the others run (QEMU's gdbstub): the race scenario's preemption
// injection (harness/race conducts it). A board has no such thing.
type Injector interface {
	// RaceChannel is the control port the agent's injector talks on.
	RaceChannel() io.ReadWriter
	// DialGDB connects to the stub; the guest stops while it connects.
	DialGDB(ctx context.Context) (*gdbstub.Conn, error)
}

// Sysrqer is a target that can send the guest kernel a magic sysrq key
// from outside, so that a guest whose agent went silent still tells what
// it is doing (blocked tasks, runqueues) on its console before it is
// killed. The output comes as Console events.
type Sysrqer interface {
	Sysrq(ctx context.Context, key byte) error
}

// ResetExplainer is a target that can say more about a reset it reported:
// QEMU's SHUTDOWN reason and whether its reset log shows a triple fault.
// Both are valid until Close.
type ResetExplainer interface {
	ShutdownReason() string
	TripleFault() bool
}

// Stderrer is a target with a diagnostic stream of its own (QEMU's stderr)
// worth quoting when the guest vanished without a report.
type Stderrer interface {
	Stderr() string
}
