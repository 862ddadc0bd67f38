package bench

import (
	"regexp"
	"strconv"
	"strings"
)

// OpsRun is what one load of ftrace-ops.ko printed.
type OpsRun struct {
	// Calls is nr_function_calls; Tracee the function timed, as %ps
	// printed it (e.g. "tracee_relevant [ftrace_ops]").
	Calls  uint64
	Tracee string
	// TotalNs is the whole loop; PerCallNs the module's own integer
	// division (the all-ones -1 when Calls is 0).
	TotalNs   uint64
	PerCallNs uint64
	// NoSaveRegs is set when the module said the kernel cannot save
	// registers: save_regs was then ignored, and the number is without.
	NoSaveRegs bool
	// Line is the kernel's "Attempted ..." line as read, kept so that a
	// run's events hold the module's own words (and tests real fixtures).
	Line string
}

// NsPerCall is TotalNs/Calls with the fraction the module's integer
// division drops (under a nanosecond per call on real hardware); 0 without
// calls.
func (r OpsRun) NsPerCall() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.TotalNs) / float64(r.Calls)
}

// attemptedRE matches the module's result line, from
// samples/ftrace/ftrace-ops.c:
//
//	pr_info("Attempted %u calls to %ps in %lluns (%lluns / call)\n", ...)
//
// anywhere in a line, so that a raw /dev/kmsg record ("6,812,3456789,-;…"),
// a dmesg line ("[    3.456789] ftrace_ops: …") and the bare message all
// parse.
var attemptedRE = regexp.MustCompile(`Attempted (\d+) calls to (.+?) in (\d+)ns \((\d+)ns / call\)`)

// NoSaveRegsMsg is what the module prints, and then measures without
// FTRACE_OPS_FL_SAVE_REGS, on a kernel without DYNAMIC_FTRACE_WITH_REGS.
const NoSaveRegsMsg = "this kernel does not support saving registers"

// ParseOpsLine parses the module's result line; ok is false for any other
// line.
func ParseOpsLine(line string) (OpsRun, bool) {
	m := attemptedRE.FindStringSubmatch(line)
	if m == nil {
		return OpsRun{}, false
	}
	calls, err1 := strconv.ParseUint(m[1], 10, 32)
	total, err2 := strconv.ParseUint(m[3], 10, 64)
	per, err3 := strconv.ParseUint(m[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return OpsRun{}, false
	}
	return OpsRun{Calls: calls, Tracee: m[2], TotalNs: total, PerCallNs: per}, true
}

// ParseOpsRun reads the kernel log lines of one load, in order, and returns
// the first result line with whether the save-registers notice came before
// it. ok is false when no result line is there (the module failed before
// its benchmark, or the log lost the line).
func ParseOpsRun(lines []string) (OpsRun, bool) {
	noRegs := false
	for _, l := range lines {
		if strings.Contains(l, NoSaveRegsMsg) {
			noRegs = true
			continue
		}
		if r, ok := ParseOpsLine(l); ok {
			r.NoSaveRegs = noRegs
			r.Line = l
			return r, true
		}
	}
	return OpsRun{}, false
}

// KmsgMessage returns the message of one /dev/kmsg record
// ("<prio>,<seq>,<usec>,<flags>[,…];<message>\n[ KEY=value\n]…"): the text
// after the first ';' up to the first newline, so that dictionary lines are
// dropped. A string without a header is returned up to its first newline.
func KmsgMessage(rec string) string {
	if i := strings.IndexByte(rec, ';'); i >= 0 && !strings.ContainsAny(rec[:i], " \n") {
		rec = rec[i+1:]
	}
	msg, _, _ := strings.Cut(rec, "\n")
	return msg
}
