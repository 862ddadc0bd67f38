package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/symbolize"
)

// triageFinding is the --json shape of a finding. Title, kind, count,
// first_line and last_line are the contract scripts rely on; the rest is
// there when the report says it.
type triageFinding struct {
	Title string `json:"title"`
	Kind  string `json:"kind"`
	// Count is how many reports of the log the finding stands for (the
	// same title again, and recursive faults); Recursive of them were
	// faults while the first was being printed.
	Count     int `json:"count"`
	Recursive int `json:"recursive,omitempty"`
	// GuiltyFrame is the function the title names: the first frame that
	// is not reporting, locking, allocator, helper or trampoline code.
	// Function is the same, under its older name.
	GuiltyFrame string `json:"guilty_frame,omitempty"`
	Function    string `json:"function,omitempty"`
	// ViaTrampoline is the first BPF or ftrace trampoline frame of the
	// report: it came through patched code.
	ViaTrampoline string `json:"via_trampoline,omitempty"`
	// CPU and PID are absent when the report does not say.
	CPU   *int   `json:"cpu,omitempty"`
	PID   *int   `json:"pid,omitempty"`
	Comm  string `json:"comm,omitempty"`
	Taint string `json:"taint,omitempty"`
	// FirstLine and LastLine bound Report, the report's lines of the log.
	FirstLine int      `json:"first_line"`
	LastLine  int      `json:"last_line"`
	Report    string   `json:"report"`
	Stack     []string `json:"stack,omitempty"`
	// Log names the console log, set only when several were given.
	Log string `json:"log,omitempty"`
	// Frames are the report's frames symbolized against --vmlinux.
	Frames []symbolize.Frame `json:"frames,omitempty"`
}

// triaged is one finding with where it came from.
type triaged struct {
	log    string
	f      console.Finding
	frames []symbolize.Frame
}

func cmdTriage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("triage")
	asJSON := fs.Bool("json", false, "print a JSON array of findings ([] when there are none); with several logs each finding has a \"log\"")
	vmlinux := fs.String("vmlinux", "", "symbolize each finding's stack against this vmlinux (file:line and inlined frames, like decode_stacktrace.sh); it must match each log's build id or Linux version line")
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth triage [flags] console.log... (flags may follow the logs)",
		Positional: true,
		About:      "Finds and titles every kernel report in each log, one finding per report (repeats and\nrecursive faults counted in the first). With several logs, findings with the same title\nare grouped: how often, and in which logs. Exit status: 0 no report, 1 reports found,\n2 an error (a vmlinux that is not the logs' kernel among them), 3 bad usage.",
	}); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: fth triage takes one or more console log paths (run 'fth triage -h')", errUsage)
	}
	var sym *symbolize.Symbolizer
	if *vmlinux != "" {
		var err error
		if sym, err = symbolize.Open(*vmlinux, symbolize.Options{}); err != nil {
			return fmt.Errorf("triage --vmlinux: %w", err)
		}
		defer sym.Close()
	}
	logs := fs.Args()
	var all []triaged
	clean := map[string]bool{}
	for _, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("triage: %w", err)
		}
		found := console.Parse(b)
		if len(found) == 0 {
			clean[path] = true
		}
		if sym != nil && len(found) > 0 {
			// A vmlinux of another build gives plausible, wrong file:line.
			what, err := sym.Check(string(b))
			if err != nil {
				return fmt.Errorf("triage %s: %w", path, err)
			}
			if what == "" {
				fmt.Fprintf(stderr, "fth triage: %s has no build id, Linux version or CPU line: cannot check that %s printed it\n", path, *vmlinux)
			}
		}
		for _, f := range found {
			t := triaged{log: path, f: f}
			if sym != nil {
				if t.frames, err = sym.Report(ctx, f.Report); err != nil {
					return fmt.Errorf("triage %s: %w", path, err)
				}
			}
			all = append(all, t)
		}
	}
	several := len(logs) > 1
	switch {
	case *asJSON:
		if err := printTriageJSON(stdout, all, several); err != nil {
			return err
		}
	case !several:
		printTriageText(stdout, all, sym != nil)
	default:
		printTriageGroups(stdout, logs, all, clean, sym != nil)
	}
	if len(all) > 0 {
		return fmt.Errorf("%w: %d kernel reports in %d of %d logs", errCellsFailed, len(all), len(logs)-len(clean), len(logs))
	}
	return nil
}

func printTriageJSON(w io.Writer, all []triaged, several bool) error {
	out := make([]triageFinding, 0, len(all))
	for _, t := range all {
		f := t.f
		tf := triageFinding{
			Title: f.Title, Kind: string(f.Kind), Count: f.Count, Recursive: f.Recursive,
			GuiltyFrame: f.Function, Function: f.Function, ViaTrampoline: f.Trampoline,
			CPU: knownCount(f.CPU), PID: knownCount(f.PID), Comm: f.Comm, Taint: f.Taint,
			FirstLine: f.StartLine, LastLine: f.EndLine, Report: f.Report, Stack: f.Stack, Frames: t.frames,
		}
		if several {
			tf.Log = t.log
		}
		out = append(out, tf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// knownCount is n, or nil for the -1 of a report that does not say.
func knownCount(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

func printTriageText(w io.Writer, all []triaged, symbolized bool) {
	if len(all) == 0 {
		fmt.Fprintln(w, "no kernel reports found")
		return
	}
	for _, t := range all {
		fmt.Fprintf(w, "%s (%s), lines %d-%d%s\n", t.f.Title, t.f.Kind, t.f.StartLine, t.f.EndLine, countNote(t.f))
		if d := details(t.f); d != "" {
			fmt.Fprintf(w, "  %s\n", d)
		}
		printStack(w, t, symbolized)
	}
}

// countNote says how many reports a finding groups, "" for one.
func countNote(f console.Finding) string {
	switch {
	case f.Count <= 1:
		return ""
	case f.Recursive > 0:
		return fmt.Sprintf(", %s (%d recursive faults)", times(f.Count), f.Recursive)
	}
	return ", " + times(f.Count)
}

// details is what the report says about where it happened.
func details(f console.Finding) string {
	var parts []string
	if c := f.Context(); c != "" {
		parts = append(parts, c)
	}
	if f.Trampoline != "" {
		parts = append(parts, "via trampoline "+f.Trampoline)
	}
	return strings.Join(parts, ", ")
}

// printStack prints the symbolized frames when there are any, else the
// function names the parser took from the call trace.
func printStack(w io.Writer, t triaged, symbolized bool) {
	if symbolized {
		for _, fr := range t.frames {
			for _, l := range fr.Lines() {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		return
	}
	for _, fn := range t.f.Stack {
		fmt.Fprintf(w, "    %s\n", fn)
	}
}

// printTriageGroups prints one entry per title, in order of first
// appearance: the same bug hit in many runs reads as one line with a count,
// and its stack is printed once, from its first occurrence.
func printTriageGroups(w io.Writer, logs []string, all []triaged, clean map[string]bool, symbolized bool) {
	var order []string
	groups := map[string][]triaged{}
	for _, t := range all {
		if _, ok := groups[t.f.Title]; !ok {
			order = append(order, t.f.Title)
		}
		groups[t.f.Title] = append(groups[t.f.Title], t)
	}
	for _, title := range order {
		g := groups[title]
		var inLogs []string
		lines := map[string][]string{}
		reports := 0
		for _, t := range g {
			reports += t.f.Count
			if _, ok := lines[t.log]; !ok {
				inLogs = append(inLogs, t.log)
			}
			lines[t.log] = append(lines[t.log], fmt.Sprintf("%d-%d", t.f.StartLine, t.f.EndLine))
		}
		fmt.Fprintf(w, "%s (%s): %s in %d of %d logs\n", title, g[0].f.Kind, times(reports), len(inLogs), len(logs))
		if d := details(g[0].f); d != "" {
			fmt.Fprintf(w, "  first: %s\n", d)
		}
		for _, l := range inLogs {
			fmt.Fprintf(w, "  %s: lines %s\n", l, strings.Join(lines[l], ", "))
		}
		printStack(w, g[0], symbolized)
	}
	var cleanLogs []string
	for _, l := range logs {
		if clean[l] {
			cleanLogs = append(cleanLogs, l)
		}
	}
	switch {
	case len(all) == 0:
		fmt.Fprintf(w, "no kernel reports found in %d logs\n", len(logs))
	case len(cleanLogs) > 0:
		fmt.Fprintf(w, "no kernel reports in: %s\n", strings.Join(cleanLogs, ", "))
	}
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
