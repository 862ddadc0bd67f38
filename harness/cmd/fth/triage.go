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

// triageFinding is the --json shape of a finding. Title, kind, first_line
// and last_line are the contract scripts rely on; the rest is optional.
type triageFinding struct {
	Title     string   `json:"title"`
	Kind      string   `json:"kind"`
	Function  string   `json:"function,omitempty"`
	FirstLine int      `json:"first_line"`
	LastLine  int      `json:"last_line"`
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
	vmlinux := fs.String("vmlinux", "", "symbolize each finding's stack against this vmlinux (file:line and inlined frames, like decode_stacktrace.sh)")
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth triage [flags] console.log... (flags may follow the logs)",
		Positional: true,
		About:      "Finds and titles every kernel report in each log. With several logs, findings\nwith the same title are grouped: how often, and in which logs.",
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
	if *asJSON {
		return printTriageJSON(stdout, all, several)
	}
	if !several {
		printTriageText(stdout, all, sym != nil)
		return nil
	}
	printTriageGroups(stdout, logs, all, clean, sym != nil)
	return nil
}

func printTriageJSON(w io.Writer, all []triaged, several bool) error {
	out := make([]triageFinding, 0, len(all))
	for _, t := range all {
		f := t.f
		tf := triageFinding{Title: f.Title, Kind: string(f.Kind), Function: f.Function, FirstLine: f.StartLine, LastLine: f.EndLine, Stack: f.Stack, Frames: t.frames}
		if several {
			tf.Log = t.log
		}
		out = append(out, tf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printTriageText(w io.Writer, all []triaged, symbolized bool) {
	if len(all) == 0 {
		fmt.Fprintln(w, "no kernel reports found")
		return
	}
	for _, t := range all {
		fmt.Fprintf(w, "%s (%s), lines %d-%d\n", t.f.Title, t.f.Kind, t.f.StartLine, t.f.EndLine)
		printStack(w, t, symbolized)
	}
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
		for _, t := range g {
			if _, ok := lines[t.log]; !ok {
				inLogs = append(inLogs, t.log)
			}
			lines[t.log] = append(lines[t.log], fmt.Sprintf("%d-%d", t.f.StartLine, t.f.EndLine))
		}
		fmt.Fprintf(w, "%s (%s): %s in %d of %d logs\n", title, g[0].f.Kind, times(len(g)), len(inLogs), len(logs))
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
