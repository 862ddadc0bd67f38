// Package report turns a run directory (out/runs/<run-id>/) into what people
// and CI read: report.html, a self-contained page (inline SVG plots, inline
// CSS, no scripts) with a verdict heatmap of arch × variant, every cell's
// findings, stacks and log excerpts, its latency plots, and what its
// scenario recorded (the churn's transitions, oracles, features and
// preemption switching; the bench's tables and plots; the board of a soak);
// junit.xml for CI test views; and a refreshed summary.json.
//
// Everything comes from the files the harness leaves in each cell directory
// (result.json, events.jsonl, console.log, registers.txt), so a report can be
// made long after the run, on another machine, from a CI artifact.
package report

import (
	"os"
	"strings"
)

// readLines returns lines [from, to] (1-based, inclusive) of a file, and how
// many lines it has. Negative numbers count from the end: -1 is the last.
func readLines(path string, from, to int) ([]string, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	n := len(lines)
	if from < 0 {
		from = n + 1 + from
	}
	if to < 0 {
		to = n + 1 + to
	}
	from, to = max(from, 1), min(to, n)
	if from > to {
		return nil, n, nil
	}
	return lines[from-1 : to], n, nil
}
