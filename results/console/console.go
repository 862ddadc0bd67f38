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
	"fmt"
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
	// KindLeak is a leak the kernel found: a kmemleak "unreferenced
	// object", a network device whose references never drop
	// ("unregister_netdevice: waiting for lo to become free").
	KindLeak Kind = "leak"
)

// Finding is one kernel report found in a log.
type Finding struct {
	// Kind is the crash class.
	Kind Kind
	// Title is normalised so that the same bug gets the same title in every
	// run: "WARNING in ftrace_bug", "BUG: soft lockup in smp_call_function",
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
	// order, without offsets and without unreliable ("? ") frames; a frame
	// printed twice in a row (riscv's epc and ra) is kept once.
	Stack []string
	// Trampoline is the first BPF or ftrace trampoline frame of the report
	// ("__bpf_prog_exit_recur", "ftrace_regs_caller", "bpf_trampoline_6442491234"):
	// the report came through the code this harness patches. Such frames
	// never name the culprit (Function skips them), so they are kept here.
	Trampoline string
	// CPU and PID are what the report says ran into it, -1 when it does not
	// say; Comm is that task's name.
	CPU, PID int
	Comm     string
	// Taint is the kernel's taint flags when the report was printed, as
	// letters ("GW", "GL"); "not tainted" when it said so, "" when the
	// report does not say.
	Taint string
	// Count is how many reports of the log this finding stands for. A
	// Detector emits every report (Count 1); Parse groups the reports of a
	// log: the same title again, and faults that happened while the kernel
	// was still printing an earlier fault (Recursive of them), count in the
	// first one.
	Count int
	// Recursive is how many of the Count reports were recursive faults.
	Recursive int

	// What grouping needs: the title's template and groups, to rename a
	// finding once a recursive fault names its function; the printk
	// context; whether a new header in that context cut the report short;
	// whether it got as far as an instruction pointer or call trace.
	tmpl     string
	groups   map[string]string
	ctx      string
	cut      bool
	complete bool
}

// ResetTitle is the title of a kernel that restarted with nothing on the
// console to say why: a second boot in one log, after neither a report nor
// an orderly restart. The harness titles a guest reset that QEMU saw the
// same way.
const ResetTitle = "reset: the guest reset with no console report"

// Parse finds every report in a complete log, in log order, one finding
// per report: the same title again, or a fault while an earlier fault was
// still being printed, counts in the first finding (Count, Recursive)
// instead of making another.
//
// It feeds the log to a Detector line by line, so live detection and offline
// parsing cannot disagree; only the grouping is Parse's own.
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
	return group(found, strings.Split(text, "\n"))
}

// Context says where a report happened as it names it: "CPU 1, task
// uinit[55], taint G O", leaving out what it does not say.
func (f Finding) Context() string {
	var parts []string
	if f.CPU >= 0 {
		parts = append(parts, fmt.Sprintf("CPU %d", f.CPU))
	}
	if f.Comm != "" || f.PID >= 0 {
		task := f.Comm
		if f.PID >= 0 {
			task += fmt.Sprintf("[%d]", f.PID)
		}
		parts = append(parts, "task "+task)
	}
	if f.Taint != "" {
		parts = append(parts, "taint "+f.Taint)
	}
	return strings.Join(parts, ", ")
}
