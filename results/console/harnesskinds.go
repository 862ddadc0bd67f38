package console

import (
	"regexp"
	"strconv"
	"strings"
)

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
	// KindBadSyscallReturn is the agent dying of a value no correct
	// kernel returns: a read(2) that says it read more bytes than it was
	// given room for (the Go runtime then slices past the buffer). The
	// agent's crash is the kernel's doing, and counts as its finding.
	KindBadSyscallReturn Kind = "bad-syscall-return"
)

// readOverrunRe is the Go runtime's panic when a Read returned more than
// its buffer held: "slice bounds out of range [:n] with capacity c".
var readOverrunRe = regexp.MustCompile(`^panic: runtime error: slice bounds out of range \[:(\d+)\] with capacity (\d+)$`)

// readFrames are the frames of the goroutine that slices a Read's result
// of an *os.File, whose count is read(2)'s return value as the kernel
// gave it: io.Copy's loop (os.File.WriteTo, exec's pipe copier) and
// os.File.Read's callers in bufio.
var readFrames = regexp.MustCompile(`^(?:io\.copyBuffer|bufio\.\(\*Reader\)\.(?:Read|fill|ReadSlice))\(`)

// kernelCausedCrash says an agent crash's report (the panic line, then
// the panicking goroutine) is a read(2) that returned more than it was
// asked for, and titles it.
func kernelCausedCrash(report string) (string, bool) {
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		m := readOverrunRe.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		n, err1 := strconv.ParseUint(m[1], 10, 64)
		c, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 != nil || err2 != nil || n <= c {
			return "", false
		}
		// The first frame of the panicking goroutine, after its
		// "goroutine N [running]:" line.
		for _, f := range lines[i+1:] {
			f = strings.TrimSpace(f)
			if f == "" || strings.HasPrefix(f, "goroutine ") {
				continue
			}
			if readFrames.MatchString(f) {
				// No numbers in a title: two runs of one bug must
				// agree (the report quotes them).
				return "read(2) returned more bytes than asked (the agent's Go runtime sliced past its buffer)", true
			}
			return "", false
		}
	}
	return "", false
}

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
