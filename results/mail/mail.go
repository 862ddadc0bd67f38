// Package mail writes the plain-text report of one failed cell that a
// kernel maintainer expects on a mailing list: a subject in the
// subsystem's style, the kernel and arch it was seen on, the config
// options that matter, the kernel's report with its stack decoded to
// file:line, how to reproduce (a standalone reproducer when the finding
// has one, and the harness's command), the bisection when there was one,
// and the fix when one is written. A cell that reproduces a finding of
// docs/findings.md gets that finding's cause and fix (known.Match); any
// other failure is reported as new, with what the cell recorded.
//
// The text uses the kernel's words: what the harness calls a cell, an
// oracle or a churn is said as what happened in the kernel.
package mail

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// Cell is what the report is written from.
type Cell struct {
	Result results.Result
	// Agent is what the cell's agent ran with (agentOptions), read once
	// by NewCell.
	Agent options.Options
	// Stack is the headline report's call trace decoded to file:line,
	// one line per frame (symbolize.Frame.Lines), nil when it was not
	// decoded; StackNote then says why.
	Stack     []string
	StackNote string
	// Bisect is the bisection's summary paragraph (bisect-summary.txt),
	// "" for none.
	Bisect string
	// Output is what a standalone reproducer printed, line by line.
	Output []string
	// ReproCommand runs the cell again with the harness (fth repro).
	ReproCommand string
	// Attachments are the files sent with the report, by the names the
	// text gives them (config, console.log, the reproducer's files, the
	// fixes).
	Attachments []string
}

// Report is the mail's parts.
type Report struct {
	Subject string
	Body    string
	// Finding is the docs/findings.md finding the cell reproduced, nil
	// for a new failure; How says how it was told.
	Finding *known.Report
	How     known.How
}

// agentOptions is what the cell's agent ran with, read as the agent
// reads its arguments; the zero Options for a result without a request,
// or whose arguments this version of the agent would refuse.
func agentOptions(r *results.Result) options.Options {
	if r.Request == nil {
		return options.Options{}
	}
	a, err := options.NewArgs(r.Request.AgentArgs)
	if err != nil {
		return options.Options{}
	}
	return a.Options()
}

// NewCell is the Cell of r, its agent's options read once.
func NewCell(r results.Result) Cell {
	return Cell{Result: r, Agent: agentOptions(&r)}
}

// match tells the finding of docs/findings.md a cell reproduced, if any
// (known.Match), from what the cell recorded and its agent's options o.
func match(r *results.Result, o options.Options) (*known.Report, known.How) {
	h := r.Headline(true)
	repro, reproducer := o.Repro, o.Reproducer
	id := ""
	if h.Finding != nil {
		id = h.Finding.Known
	}
	f, how, ok := known.Match(id, repro, reproducer, plainTitle(r, h))
	if !ok {
		return nil, ""
	}
	return &f, how
}

// Compose writes the report of c.
func Compose(c Cell) Report {
	r := &c.Result
	h := r.Headline(true)
	title := plainTitle(r, h)
	var rep Report
	if c.Agent.Scenario == "" {
		// A Cell not made by NewCell.
		c.Agent = agentOptions(r)
	}
	rep.Finding, rep.How = match(r, c.Agent)
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	seen := seenOn(r)
	switch {
	case rep.Finding != nil && rep.How != known.ByTitle:
		f := rep.Finding
		rep.Subject = "[BUG] " + f.Subject
		p("Hello,\n\n")
		p("%s\n\n", wrap(fmt.Sprintf("This reports a bug seen on %s. Below: the cause as read from the source; what one run saw, on %s; how to reproduce it; and a fix.", seenOnAll(f, seen), seen), 72))
		if !f.Bug && f.Status != "" {
			p("Status: %s.\n\n", f.Status)
		}
		if f.Summary != "" {
			p("%s\n\n", strings.TrimSpace(f.Summary))
		}
	default:
		rep.Subject = "[BUG] " + subsystem(r, h) + ": " + title
		p("Hello,\n\n")
		p("%s\n\n", wrap(fmt.Sprintf("Stress-testing live patching of function entries (ftrace, BPF trampolines, kprobes, livepatch) on %s ended with the report below.", seen), 72))
		if rep.Finding != nil {
			p("%s\n\n", wrap(fmt.Sprintf("Its title is like that of an earlier report, %q; whether it is the same bug was not checked.", rep.Finding.Subject), 72))
		}
	}

	what(&b, c, h, title)
	kernel(&b, r)
	reproduce(&b, c, rep.Finding)
	if c.Bisect != "" {
		p("Bisection:\n\n%s\n\n", indent(wrap(strings.TrimSpace(c.Bisect), 70), "  "))
	}
	if f := rep.Finding; f != nil && rep.How != known.ByTitle {
		fixes(&b, f)
		p("This is finding %s of ftrace-harness's list of findings", f.Number)
		if len(f.Also) > 0 {
			p(" (with %s, the same bug)", strings.Join(f.Also, ", "))
		}
		if f.ID != "" {
			p(", known there as %s", f.ID)
		}
		p(".\n\n")
	}
	if len(c.Attachments) > 0 {
		p("Attached: %s.\n", strings.Join(c.Attachments, ", "))
	}
	rep.Body = b.String()
	return rep
}

// Write writes the report as a mail: headers, a blank line, the body.
func Write(w io.Writer, rep Report) error {
	_, err := fmt.Fprintf(w, "Subject: %s\n\n%s", rep.Subject, rep.Body)
	return err
}

// plainTitle is the headline's title without the harness's prefixes
// ("known <id>: ", "agent: ").
func plainTitle(r *results.Result, h results.Headline) string {
	t := h.Title
	if h.Finding != nil {
		t = h.Finding.Title
	}
	if t == "" {
		t = r.Reason
	}
	t = strings.TrimPrefix(t, "agent: ")
	if rest, ok := strings.CutPrefix(t, "hang: no output for "); ok {
		return "the kernel hangs: no console output for " + rest
	}
	if h.Finding == nil {
		if o, ok := results.FirstFailedOracle(r.Oracles); ok {
			if ft, _ := results.FailedOracle(r.Oracles); t == ft {
				return checkTitle(o, t)
			}
		}
	}
	return t
}

// checkTitle says a failed check of the harness's in the kernel's words.
func checkTitle(o event.Oracle, t string) string {
	switch {
	case o.Name == event.OracleExact && o.Function != "":
		return fmt.Sprintf("a BPF fentry program on %s counted %d of %d calls", o.Function, o.Got, o.Expected)
	case o.Name == event.OracleFuncIP && o.Function != "":
		return fmt.Sprintf("bpf_get_func_ip() in a program on %s returned %#x, not %#x", o.Function, o.Got, o.Expected)
	}
	if rest, ok := strings.CutPrefix(t, "oracle "); ok {
		return rest
	}
	return t
}

// seenOn is where this cell ran, in a maintainer's words.
func seenOn(r *results.Result) string {
	v := r.Kernel.Release
	if v == "" {
		v = r.Kernel.SourceVersion
	}
	s := "Linux " + orUnknown(v) + " (" + r.Arch
	if r.Board != nil {
		s += ", on a board"
	} else {
		s += ", QEMU"
		if r.Accel != "" {
			s += " " + accelWords(r.Accel)
		}
	}
	if r.CPUs > 0 {
		s += fmt.Sprintf(", %d CPUs", r.CPUs)
	}
	if r.PreemptModel != "" {
		s += ", preempt=" + r.PreemptModel
	}
	return s + ")"
}

func seenOnAll(f *known.Report, this string) string {
	if f.Seen == "" {
		return this
	}
	return f.Seen
}

func accelWords(a string) string {
	switch a {
	case "tcg-single":
		return "TCG, one thread"
	case "tcg-multi":
		return "TCG, a thread per CPU"
	case "kvm":
		return "KVM"
	}
	return a
}

func orUnknown(s string) string {
	if s == "" {
		return "(version not recorded)"
	}
	return s
}

// subsystems maps the function a report names to the prefix of a
// subject line, first match wins; the rest is "ftrace", which is what
// this harness exercises.
var subsystems = []struct {
	re     *regexp.Regexp
	prefix string
}{
	{regexp.MustCompile(`^(__)?bpf_|^bpf_trampoline_`), "bpf"},
	{regexp.MustCompile(`^(__)?klp_`), "livepatch"},
	{regexp.MustCompile(`kprobe|^rethook|^kretprobe`), "kprobes"},
	{regexp.MustCompile(`^fprobe|^fprobe_`), "fprobe"},
	{regexp.MustCompile(`^(smp_)?text_poke|^int3_`), "x86/alternatives"},
	{regexp.MustCompile(`^patch_|^aarch64_insn_`), "arm64/insn"},
}

func subsystem(r *results.Result, h results.Headline) string {
	fn := ""
	if h.Finding != nil {
		fn = h.Finding.Function
	}
	for _, s := range subsystems {
		if fn != "" && s.re.MatchString(fn) {
			return s.prefix
		}
	}
	return "ftrace"
}

// what says what went wrong: the kernel's report and its decoded stack,
// or the check that failed, or the hang, and the operation under way.
func what(b *strings.Builder, c Cell, h results.Headline, title string) {
	r := &c.Result
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	switch f := h.Finding; {
	case f != nil && f.Report != "":
		p("The kernel's report (%s):\n\n%s\n\n", title, strings.TrimRight(f.Report, "\n"))
		if len(c.Stack) > 0 {
			p("The call trace decoded to file:line:\n\n%s\n\n", indent(strings.Join(c.Stack, "\n"), "  "))
		} else if c.StackNote != "" {
			p("The call trace is not decoded: %s.\n\n", c.StackNote)
		}
	case f != nil && r.Hang != nil:
		p("The kernel stopped making progress: %s.\n\n", r.Hang.Title)
		if len(r.Hang.Evidence) > 0 {
			p("%s\n\n", indent(strings.Join(r.Hang.Evidence, "\n"), "  "))
		}
	case f != nil:
		p("What was seen: %s.\n\n", title)
		if f.Kind == "hang" && slices.Contains(c.Attachments, results.RegistersFile) {
			p("%s\n\n", wrap("The registers and stack words of every vCPU, read when the kernel went silent, are attached ("+results.RegistersFile+").", 72))
		}
	default:
		p("What was seen: %s.\n\n", title)
		if o, ok := results.FirstFailedOracle(r.Oracles); ok {
			if why := checkWords[o.Name]; why != "" {
				p("%s\n\n", wrap(why, 72))
			}
			if o.Msg != "" && o.Name != event.OracleReproducer {
				p("  %s\n\n", o.Msg)
			}
		}
		if len(c.Output) > 0 {
			p("The reproducer's output:\n\n%s\n\n", indent(strings.Join(c.Output, "\n"), "  "))
		}
	}
	if op := r.InFlight; op != nil {
		p("%s\n\n", wrap(fmt.Sprintf("Under way when it happened: %s.", opWords(*op)), 72))
	}
}

// checkWords says in the kernel's words what each check of the harness
// tests, for a failure that is a check's and not a kernel report.
var checkWords = map[event.OracleName]string{
	event.OracleExact:         "A BPF fentry program on the function counted its calls while the function was called a known number of times: every call must reach an attached program.",
	event.OracleFuncIP:        "A BPF program's bpf_get_func_ip() was compared with the kallsyms address of the function it is attached to, corrected by the offset measured at boot.",
	event.OracleDelivery:      "Several users of one callsite (ftrace_ops with different flags, kprobes, a kretprobe, an fprobe, a direct call, BPF fentry and fexit programs, the function tracer, a livepatch) were attached, detached and refiltered while kthreads called the function with sequence numbers: every call made while a user is attached must reach it, and none made while it is not.",
	event.OracleCallsiteOrder: "The writes to a CALL_OPS callsite were checked in order: a live branch must never meet the nop ops in its literal except on its way to a nop.",
	event.OracleReproducer:    "The reproducer's own check failed.",
}

// opWords says what an operation of the harness did.
func opWords(op event.Op) string {
	what := strings.ReplaceAll(op.Phase, "_", " ")
	if op.Function != "" {
		what += " " + op.Function
	}
	return what
}

// kernelOptions are the config symbols a report lists, by prefix, when
// the cell recorded them.
var kernelOptions = []string{
	"CONFIG_DYNAMIC_FTRACE", "CONFIG_FUNCTION_TRACER", "CONFIG_FUNCTION_GRAPH_TRACER", "CONFIG_HAVE_SINGLE_FTRACE_DIRECT_OPS",
	"CONFIG_KPROBES_ON_FTRACE", "CONFIG_FPROBE", "CONFIG_LIVEPATCH", "CONFIG_BPF_JIT", "CONFIG_PREEMPT", "CONFIG_PREEMPT_RCU",
	"CONFIG_PREEMPT_DYNAMIC", "CONFIG_X86_KERNEL_IBT", "CONFIG_VMAP_STACK", "CONFIG_KASAN", "CONFIG_LOCKDEP", "CONFIG_PROVE_LOCKING",
}

func kernel(b *strings.Builder, r *results.Result) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("Kernel: Linux %s, %s", orUnknown(r.Kernel.Release), r.Arch)
	if r.Kernel.Toolchain != "" {
		p(", built with %s", r.Kernel.Toolchain)
	}
	p(".\n")
	if len(r.Kernel.Patches) > 0 {
		p("Patches applied to the tree: %s.\n", strings.Join(r.Kernel.Patches, ", "))
	}
	var opts []string
	for k, v := range r.Kernel.Observed {
		if v == "" || v == "n" {
			continue
		}
		for _, pre := range kernelOptions {
			if k == pre || strings.HasPrefix(k, pre+"_") {
				opts = append(opts, k+"="+v)
				break
			}
		}
	}
	slices.Sort(opts)
	if len(opts) > 0 {
		p("Config options that matter:\n%s\n", indent(strings.Join(opts, "\n"), "  "))
	}
	if r.Board == nil {
		machine := "QEMU"
		if r.QEMU != "" {
			machine = r.QEMU
		}
		p("Machine: %s, %s, %d CPUs", machine, accelWords(r.Accel), r.CPUs)
		if r.Request != nil && r.Request.MemoryMB > 0 {
			p(", %d MiB", r.Request.MemoryMB)
		}
		p(".\n")
	}
	if cl := kernelCmdline(r.Cmdline); cl != "" {
		p("Kernel command line: %s\n", cl)
	}
	p("\n")
}

// kernelCmdline drops the harness's own parameters (fth.*) and the
// console setup.
func kernelCmdline(s string) string {
	var keep []string
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "fth.") || strings.HasPrefix(f, "console=") {
			continue
		}
		keep = append(keep, f)
	}
	return strings.Join(keep, " ")
}

func reproduce(b *strings.Builder, c Cell, f *known.Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("How to reproduce:\n\n")
	if f != nil && f.Run != "" {
		p("%s\n\n", indent(f.Run, "  "))
	}
	if c.ReproCommand != "" {
		p("  With ftrace-harness (builds the same kernel, boots it under QEMU and\n  runs the same steps):\n\n    %s\n\n", c.ReproCommand)
	}
}

func fixes(b *strings.Builder, f *known.Report) {
	if len(f.Fixes) == 0 {
		fmt.Fprintf(b, "No fix is written yet.\n\n")
		return
	}
	fmt.Fprintf(b, "Fix: %s is attached", f.Fixes[0])
	if len(f.Fixes) > 1 {
		fmt.Fprintf(b, " (also: %s)", strings.Join(f.Fixes[1:], ", "))
	}
	fmt.Fprintf(b, ".\n\n")
}

// wrap fills s to width columns.
func wrap(s string, width int) string {
	var out, line strings.Builder
	for _, w := range strings.Fields(s) {
		if line.Len() > 0 && line.Len()+1+len(w) > width {
			out.WriteString(line.String() + "\n")
			line.Reset()
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		line.WriteString(w)
	}
	out.WriteString(line.String())
	return out.String()
}

func indent(s, pre string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pre + l
		}
	}
	return strings.Join(lines, "\n")
}
