package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ftrace-harness/fth/results/console"
)

// triageFinding is the --json shape of a finding.
type triageFinding struct {
	Title     string   `json:"title"`
	Kind      string   `json:"kind"`
	Function  string   `json:"function,omitempty"`
	FirstLine int      `json:"first_line"`
	LastLine  int      `json:"last_line"`
	Stack     []string `json:"stack,omitempty"`
}

func cmdTriage(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("triage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON array of findings ([] when there are none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: triage takes one console log path", errUsage)
	}
	log, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("triage: %w", err)
	}
	findings := console.Parse(log)
	if *asJSON {
		out := make([]triageFinding, 0, len(findings))
		for _, f := range findings {
			out = append(out, triageFinding{Title: f.Title, Kind: string(f.Kind), Function: f.Function, FirstLine: f.StartLine, LastLine: f.EndLine, Stack: f.Stack})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(findings) == 0 {
		fmt.Fprintln(stdout, "no kernel reports found")
		return nil
	}
	for _, f := range findings {
		fmt.Fprintf(stdout, "%s (%s), lines %d-%d\n", f.Title, f.Kind, f.StartLine, f.EndLine)
		for _, fn := range f.Stack {
			fmt.Fprintf(stdout, "    %s\n", fn)
		}
	}
	return nil
}
