package console

// Kinds of finding the harness makes itself, from how a target ended rather
// than from a line of its log. They share Kind with the console's so that
// result.json has one vocabulary.
const (
	// KindHang is a guest that said nothing for the silence watchdog.
	KindHang Kind = "hang"
	// KindReset is a guest that reset the machine with nothing on the
	// console (an x86 triple fault among others).
	KindReset Kind = "reset"
	// KindReboot is a board that came back in a new boot with no record
	// of why.
	KindReboot Kind = "reboot"
	// KindBoardLost is a board that did not come back.
	KindBoardLost Kind = "board-lost"
	// KindHarnessInduced is a stall the harness caused itself (its own
	// load starved the tasks the kernel waited for), with the evidence:
	// reported, never counted as a kernel finding.
	KindHarnessInduced Kind = "harness-induced"
	// KindAgentCrash is the harness's own guest agent dying of a Go
	// runtime error (its stderr is the console): a harness bug, never a
	// kernel finding; the panic that follows when init loses its child is
	// the crash's, not the kernel's.
	KindAgentCrash Kind = "agent-crash"
)

// HarnessCaused says a finding of kind k is the harness's own doing, not
// the kernel's: the one place the kinds are listed, for the headline rule
// (results.Finding.HarnessCaused) and the title agreement's.
func (k Kind) HarnessCaused() bool {
	return k == KindHarnessInduced || k == KindAgentCrash
}

// Hang says a finding of kind k reports tasks or CPUs that stopped
// making progress (a hung task, an RCU or workqueue stall, a lockup, or
// the silence watchdog's hang) rather than a fault: the kernel's own
// report has no stacks of the blocked tasks, so a target asks for them
// (target.Instance.Diagnose), and the live console's report ends the cell
// after its tail.
func (k Kind) Hang() bool {
	switch k {
	case KindHang, KindHungTask, KindRCUStall, KindWorkqueueStall, KindSoftLockup, KindHardLockup:
		return true
	}
	return false
}
