package console

import "strings"

// group makes one finding per report of a log (lines are the log's lines,
// found its findings in log order):
//
//   - A fault whose header came while the previous fault of the same
//     printk context had not yet printed its instruction pointer or call
//     trace is a recursive fault: the kernel faulted again while printing
//     the first (riscv's show_pte faulting in its own fault handler, dozens
//     of times). It joins the first: the group spans them all, and takes
//     its function, stack and task from the first of them that printed one.
//   - An oops right after a KASAN report of a bad address (null-ptr-deref,
//     wild- or user-memory-access), in the same task, is that access
//     faulting once KASAN has reported it: generic KASAN checks the
//     address, reports, and lets the access go on. It joins the KASAN
//     report, which names the bug first.
//   - A later finding with the same title as an earlier one is the same
//     bug again (another CPU, another task): it counts in the first.
//
// What Detector emitted live is not changed: the harness records every
// report as it comes, and Parse, which sees the whole log, groups them.
func group(found []Finding, lines []string) []Finding {
	var out []Finding
	for _, f := range found {
		if n := len(out); n > 0 && recursiveOf(out[n-1], f) {
			out[n-1] = attachRecursive(out[n-1], f, lines)
			continue
		}
		if n := len(out); n > 0 && faultAfterKASAN(out[n-1], f) {
			out[n-1] = attach(out[n-1], f, lines)
			continue
		}
		out = append(out, f)
	}
	var merged []Finding
	first := map[string]int{}
	for _, f := range out {
		if i, ok := first[f.Title]; ok {
			merged[i].Count += f.Count
			merged[i].Recursive += f.Recursive
			continue
		}
		first[f.Title] = len(merged)
		merged = append(merged, f)
	}
	return merged
}

// recursiveOf reports whether f is a fault within g's fault: g (its last
// fault, for a group) was cut short by f's header in the same context, a
// few lines on, before it printed an instruction pointer or call trace.
func recursiveOf(g, f Finding) bool {
	return g.Kind == KindOops && f.Kind == KindOops && g.cut && !g.complete && g.ctx == f.ctx &&
		f.StartLine > g.EndLine && f.StartLine-g.EndLine <= absorbWindow
}

// kasanAddressReports are the KASAN reports after which the checked access
// itself faults.
var kasanAddressReports = []string{"KASAN: null-ptr-deref", "KASAN: wild-memory-access", "KASAN: user-memory-access"}

// faultAfterKASAN reports whether f is the fault of the access g, a KASAN
// report of a bad address, had just checked: an oops of the same task
// within absorbWindow lines of g's end.
func faultAfterKASAN(g, f Finding) bool {
	if f.Kind != KindOops || g.PID < 0 || g.PID != f.PID || f.StartLine <= g.EndLine || f.StartLine-g.EndLine > absorbWindow {
		return false
	}
	for _, p := range kasanAddressReports {
		if strings.HasPrefix(g.Title, p) {
			return true
		}
	}
	return false
}

// attachRecursive adds the recursive fault f to g.
func attachRecursive(g, f Finding, lines []string) Finding {
	g = attach(g, f, lines)
	g.Recursive += f.Count
	return g
}

// attach adds the report f to g's group: g's span grows to f's end, and
// what g lacks comes from f.
func attach(g, f Finding, lines []string) Finding {
	g.Count += f.Count
	g.EndLine = f.EndLine
	var b strings.Builder
	for i, l := range lines[g.StartLine-1 : g.EndLine] {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(l, "\r"))
	}
	g.Report = b.String()
	g.cut, g.complete = f.cut, f.complete
	if g.Function == "" && f.Function != "" {
		g.Function = f.Function
		g.Title = renderTitle(g.tmpl, g.groups, g.Function)
	}
	if len(g.Stack) == 0 {
		g.Stack = f.Stack
	}
	if g.Trampoline == "" {
		g.Trampoline = f.Trampoline
	}
	if g.CPU < 0 {
		g.CPU = f.CPU
	}
	if g.PID < 0 {
		g.PID = f.PID
	}
	if g.Comm == "" {
		g.Comm = f.Comm
	}
	if g.Taint == "" {
		g.Taint = f.Taint
	}
	return g
}
