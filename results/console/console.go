// Package console finds kernel reports (oopses, BUGs, WARNINGs, panics,
// lockups, stalls, lockdep splats and ftrace bugs) in a serial console log.
//
// The model is syzkaller's pkg/report: the patterns that recognise a report
// are data (patterns.go), and a corpus of real console logs under testdata/
// pins down what each log must yield. Parse works on a finished log; a
// Detector does the same work a line at a time for live runs, and Parse is
// built on it so that both always agree.
package console

import (
	"sort"
	"strings"
)

// Kind is a typed crash class.
type Kind string

const (
	// KindOops is an oops: "Oops:", "general protection fault", an x86
	// "BUG: unable to handle ..." page fault, arm64 "Unable to handle kernel
	// paging request" and the like.
	KindOops Kind = "oops"
	// KindBug is "kernel BUG at" and every other "BUG: ..." (sleeping in
	// atomic context, KASAN, ...), plus UBSAN.
	KindBug Kind = "bug"
	// KindWarning is a WARN() splat: "WARNING: CPU: N PID: N at file:line
	// func+0x/0x" and the newer "WARNING: file:line at func+0x/0x, CPU#N" form.
	KindWarning Kind = "warning"
	// KindPanic is "Kernel panic - not syncing: ...".
	KindPanic Kind = "panic"
	// KindFtraceBug is ftrace_bug(): the "[ ftrace bug ]" block with
	// "ftrace faulted on modifying" or "ftrace failed to modify", together
	// with the WARNING ftrace_bug() prints after it.
	KindFtraceBug Kind = "ftrace-bug"
	// KindRCUStall is an RCU CPU or tasks stall warning.
	KindRCUStall Kind = "rcu-stall"
	// KindSoftLockup is "watchdog: BUG: soft lockup - CPU#N stuck for Ns!".
	KindSoftLockup Kind = "soft-lockup"
	// KindHardLockup is "Watchdog detected hard LOCKUP on cpu N".
	KindHardLockup Kind = "hard-lockup"
	// KindHungTask is "INFO: task X:pid blocked for more than N seconds.".
	KindHungTask Kind = "hung-task"
	// KindLockdep is a lockdep report: possible deadlocks, inconsistent lock
	// state, suspicious RCU usage, "BUG: MAX_LOCKDEP_...".
	KindLockdep Kind = "lockdep"
	// KindWorkqueueStall is "BUG: workqueue lockup - pool ...".
	KindWorkqueueStall Kind = "wq-stall"
)

// Finding is one kernel report found in a log.
type Finding struct {
	// Kind is the crash class.
	Kind Kind
	// Title is normalised so that the same bug gets the same title in every
	// run: "WARNING in ftrace_bug", "BUG: soft lockup in smp_call_function_many",
	// "kernel panic: Fatal exception", "possible deadlock in blkdev_reread_part".
	Title string
	// Function is the function the title names, "" if none could be found.
	Function string
	// StartLine and EndLine are the 1-based, inclusive line numbers of the
	// report in the log. StartLine is the header (or the "cut here" banner
	// right before it); EndLine is the end marker, or else the last line of
	// the call trace or register dump, bounded to the pattern's line budget.
	StartLine, EndLine int
	// Report is the log's lines StartLine..EndLine joined with "\n",
	// timestamps kept. Lines of other CPUs printed in between are kept too,
	// because the report is a slice of the log, not a reconstruction.
	Report string
	// Stack holds the function names of the report's first call trace, in
	// order, without offsets and without unreliable ("? ") frames.
	Stack []string
}

// Parse finds every report in a complete log, in log order.
//
// It feeds the log to a Detector line by line, so live detection and offline
// parsing cannot disagree.
func Parse(log []byte) []Finding {
	text := string(log)
	text = strings.TrimSuffix(text, "\n")
	if text == "" {
		return nil
	}
	d := NewDetector()
	var found []Finding
	for _, line := range strings.Split(text, "\n") {
		found = append(found, d.Line(line)...)
	}
	found = append(found, d.Flush()...)
	// Reports of different CPUs can be open at once and end in any order.
	sort.SliceStable(found, func(i, j int) bool { return found[i].StartLine < found[j].StartLine })
	return found
}
