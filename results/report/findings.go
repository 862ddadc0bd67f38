package report

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/symbolize"
)

type findingView struct {
	// Source is where the report came from when not the console:
	// "pstore" (kept across a board's reboot) or "board" (the soak's own
	// observation).
	Source             string
	Title, Kind, Lines string
	// Count is how many reports of the cell have this title (repeats and
	// recursive faults, which the console records one by one).
	Count int
	// Guilty is the function the title names; Via the trampoline frame the
	// report came through; Where the CPU, task and taint it names.
	Guilty, Via, Where string
	Stack              []string
	Symbolized         bool
	Excerpt            *excerptView
}

// reportDetails reads what a recorded report says about itself (guilty
// frame, trampoline, CPU, task, taint) by parsing its excerpt again:
// result.json keeps the report's lines, and the parser is the one place
// that knows how to read them.
func reportDetails(f results.Finding) (guilty, via, where string) {
	if f.Report == "" {
		return f.Function, "", ""
	}
	found := console.Parse([]byte(f.Report))
	if len(found) == 0 {
		return f.Function, "", ""
	}
	c := found[0]
	for _, g := range found {
		if g.Title == f.Title {
			c = g
			break
		}
	}
	guilty = f.Function
	if guilty == "" {
		guilty = c.Function
	}
	return guilty, c.Trampoline, c.Context()
}

// cellFindings adds a cell's findings to cv, one entry per title, with
// their excerpts and (given a symbolizer that matches the cell's kernel)
// symbolized stacks. It returns the symbolizer it used, nil for none, for
// the cell's registers.
func cellFindings(ctx context.Context, cv *cellView, run *results.Run, c results.Cell, limit int, syms *symbolizers) (*symbolize.Symbolizer, error) {
	r := c.Result
	sym, note := syms.forCell(r)
	if sym != nil && len(r.Findings) > 0 && hasFile(c, results.ConsoleLog) {
		// Another build's vmlinux would give wrong file:line: say so
		// instead of symbolizing.
		if log, err := os.ReadFile(filepath.Join(run.Dir, c.Dir, results.ConsoleLog)); err == nil {
			if _, err := sym.Check(string(log)); errors.Is(err, symbolize.ErrMismatch) {
				sym, note = nil, "stacks not symbolized: "+err.Error()
			}
		}
	}
	if note != "" && (len(r.Findings) > 0 || hasFile(c, results.RegistersFile)) {
		cv.Notes = append(cv.Notes, note)
	}
	seen := map[string]int{}
	for _, f := range r.Findings {
		// The console records every report as it comes; the page shows one
		// entry per title, with how many there were.
		key := f.Source + "\x00" + f.Title
		if i, ok := seen[key]; ok {
			cv.Findings[i].Count++
			continue
		}
		seen[key] = len(cv.Findings)
		fv := findingView{Source: f.Source, Title: f.Title, Kind: string(f.Kind), Stack: f.Stack, Count: 1}
		fv.Guilty, fv.Via, fv.Where = reportDetails(f)
		in := findingFile(f, r.Board)
		if f.StartLine > 0 {
			fv.Lines = fmt.Sprintf("%s lines %d–%d", in, f.StartLine, f.EndLine)
		}
		if f.Report != "" {
			lines := strings.Split(f.Report, "\n")
			fv.Excerpt = &excerptView{Caption: fv.Lines, Lines: lines[:min(len(lines), limit)], More: max(len(lines)-limit, 0), In: in}
			if sym != nil {
				frames, err := sym.Report(ctx, f.Report)
				if err != nil {
					return nil, err
				}
				if len(frames) > 0 {
					fv.Stack, fv.Symbolized = nil, true
					for _, fr := range frames {
						fv.Stack = append(fv.Stack, fr.Lines()...)
					}
				}
			}
		}
		cv.Findings = append(cv.Findings, fv)
	}
	return sym, nil
}

// findingFile names the file a finding's line numbers count in: the
// console, except for a report parsed from a pstore record, whose lines
// count in that record (named when the board kept just one).
func findingFile(f results.Finding, b *results.Board) string {
	if f.Source != "pstore" {
		return results.ConsoleLog
	}
	if b != nil && len(b.Pstore) == 1 {
		return b.Pstore[0]
	}
	return "the pstore record"
}
