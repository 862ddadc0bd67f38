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

// attachRecursive adds the recursive fault f to g.
func attachRecursive(g, f Finding, lines []string) Finding {
	g.Count += f.Count
	g.Recursive += f.Count
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
