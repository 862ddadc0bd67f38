// Package mutation is a mutation run's table, mutation.json: one row per
// mutant (and the unmutated kernel) with whether the run detected it, and
// the count of detections. harness/mutate writes it; the report reads it.
// The schema and its count live here once, below both.
package mutation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
)

// Class is the kind of patching bug a mutant puts in; harness/mutate
// names the classes.
type Class string

// Row is one line of a mutation table: a mutant (or the unmutated kernel,
// Mutant "") on one arch.
type Row struct {
	Mutant string `json:"mutant"`
	Class  Class  `json:"class,omitempty"`
	Arch   string `json:"arch"`
	// Detected: the cell failed on the kernel's own failure (see
	// harness/mutate.Judge). For the unmutated kernel it must be false.
	Detected bool `json:"detected"`
	// Seconds is the time to detection: the kernel's own time stamp of the
	// heading report (seconds since boot), or the guest's run time for a
	// failure without one (a hang, an oracle); 0 when nothing was detected.
	Seconds float64         `json:"seconds,omitempty"`
	Title   string          `json:"title,omitempty"`
	Verdict results.Verdict `json:"verdict"`
	Reason  string          `json:"reason,omitempty"`
	// BuildSeconds is the patched kernel's build time (0 from the cache).
	BuildSeconds float64 `json:"build_seconds"`
	Cell         string  `json:"cell"`
	Seed         string  `json:"seed,omitempty"`
}

// Table is a mutation run: mutation.json in the run directory.
type Table struct {
	RunID string `json:"run_id"`
	// Seed is shared by every cell, so each kernel ran the same plan.
	Seed   int64   `json:"seed"`
	Budget float64 `json:"budget_seconds"`
	Rows   []Row   `json:"rows"`
}

// judged says whether r's cell ran to a verdict on the kernel: a harness
// error (a build that failed, a guest that never booted) neither detects
// nor lets a mutant escape.
func (r Row) judged() bool { return r.Verdict != results.Error }

// Summary counts the mutant rows judged (not the unmutated kernels, not
// the cells a harness error ended: NotJudged).
func (t Table) Summary() (mutants, detected int, median float64) {
	var secs []float64
	for _, r := range t.Rows {
		if r.Mutant == "" || !r.judged() {
			continue
		}
		mutants++
		if r.Detected {
			detected++
			secs = append(secs, r.Seconds)
		}
	}
	if len(secs) > 0 {
		slices.Sort(secs)
		median = secs[len(secs)/2]
		if len(secs)%2 == 0 {
			median = (secs[len(secs)/2-1] + secs[len(secs)/2]) / 2
		}
	}
	return mutants, detected, median
}

// NotJudged lists the mutants ("name on arch") whose cell ended in a
// harness error.
func (t Table) NotJudged() []string {
	var out []string
	for _, r := range t.Rows {
		if r.Mutant != "" && !r.judged() {
			out = append(out, r.Mutant+" on "+r.Arch)
		}
	}
	return out
}

// Print writes the table for a terminal.
func (t Table) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MUTANT\tARCH\tDETECTED\tSECONDS\tTITLE")
	for _, r := range t.Rows {
		name, det := r.Mutant, "no"
		if name == "" {
			name = "(unmutated)"
		}
		if r.Detected {
			det = "yes"
		} else if !r.judged() {
			det = "error"
		}
		secs, title := "-", r.Title
		if r.Detected {
			secs = fmt.Sprintf("%.1f", r.Seconds)
		}
		if title == "" {
			title = string(r.Verdict)
			if r.Reason != "" && r.Verdict != results.Pass {
				title += ": " + r.Reason
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.Arch, det, secs, title)
	}
	tw.Flush()
	n, d, med := t.Summary()
	if n > 0 {
		fmt.Fprintf(w, "\n%d of %d mutants detected (%.0f%%), median time to detect %.1f s, budget %.0f s each, seed %d\n", d, n, 100*float64(d)/float64(n), med, t.Budget, t.Seed)
	}
	if nj := t.NotJudged(); len(nj) > 0 {
		fmt.Fprintf(w, "%d mutant(s) not judged, a harness error ended the cell (neither detected nor escaped, not in the score): %s\n", len(nj), strings.Join(nj, ", "))
	}
}

// Err says why the run does not stand: an unmutated kernel that did not
// pass, or (with requireAll) a mutant that was not detected.
func (t Table) Err(requireAll bool) error {
	var bad, missed []string
	for _, r := range t.Rows {
		switch {
		case r.Mutant == "" && (r.Detected || r.Verdict != results.Pass):
			bad = append(bad, fmt.Sprintf("%s: %s %s", r.Arch, r.Verdict, r.Reason))
		case r.Mutant != "" && !r.Detected && r.judged():
			missed = append(missed, r.Mutant+" on "+r.Arch)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w (%s): no detection in this run can be told from noise", ErrControlFailed, strings.Join(bad, "; "))
	}
	if nj := t.NotJudged(); len(nj) > 0 {
		return fmt.Errorf("%w: %s", ErrNotJudged, strings.Join(nj, ", "))
	}
	if requireAll && len(missed) > 0 {
		return fmt.Errorf("%w: %s", ErrUndetected, strings.Join(missed, ", "))
	}
	return nil
}

// ErrControlFailed: the unmutated kernel failed the mutation scenario.
var ErrControlFailed = errors.New("the unmutated kernel failed the mutation scenario")

// ErrNotJudged: a mutant's cell ended in a harness error, so the run's
// score is incomplete.
var ErrNotJudged = errors.New("mutants not judged (harness errors)")

// ErrUndetected: a mutant got through and the run required every one caught.
var ErrUndetected = errors.New("mutants not detected")

// Write replaces runDir's mutation.json atomically, so a run interrupted
// between cells keeps a whole table of what it measured.
func Write(runDir string, t Table) error {
	path := filepath.Join(runDir, results.MutationFile)
	if err := atomicfile.WriteJSON(path, t); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Read reads runDir's mutation.json; a run without one (not a mutation
// run) is nil and no error.
func Read(runDir string) (*Table, error) {
	path := filepath.Join(runDir, results.MutationFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mutation table: %w", err)
	}
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &t, nil
}
