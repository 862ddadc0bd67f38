package results

import (
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/ftrace-harness/fth/internal/atomicfile"
)

// CellSummary is one row of a run summary.
type CellSummary struct {
	Cell    string  `json:"cell"`
	Arch    string  `json:"arch"`
	Accel   string  `json:"accel"`
	Verdict Verdict `json:"verdict"`
	Title   string  `json:"title,omitempty"`
	// Attached and AttachMedianMS summarise the attach phase.
	Attached       int     `json:"attached"`
	AttachMedianMS float64 `json:"attach_median_ms"`
	AttachP99MS    float64 `json:"attach_p99_ms"`
	DetachMedianMS float64 `json:"detach_median_ms"`
	TotalSeconds   float64 `json:"total_seconds"`
	Dir            string  `json:"dir"`
	// Stages are a campaign cell's stages.
	Stages []StageSummary `json:"stages,omitempty"`
	// RaceCoverage is how much of each race target's window the
	// injections explored.
	RaceCoverage []Coverage `json:"race_coverage,omitempty"`
}

// Summary is a run's summary.json.
type Summary struct {
	Schema int           `json:"schema"`
	RunID  string        `json:"run_id"`
	At     time.Time     `json:"at"`
	Cells  []CellSummary `json:"cells"`
}

// Summarize condenses a cell result into a summary row.
func Summarize(r Result, dir string) CellSummary {
	s := CellSummary{Cell: r.Cell, Arch: r.Arch, Accel: r.Accel, Verdict: r.Verdict, Title: r.Title(), TotalSeconds: r.Timings.TotalSeconds, Dir: dir}
	if p := r.Phases["attach"]; p != nil {
		s.Attached = p.Succeeded
		s.AttachMedianMS = ms(p.Latency.Median.Std())
		s.AttachP99MS = ms(p.Latency.P99.Std())
	}
	if p := r.Phases["detach"]; p != nil {
		s.DetachMedianMS = ms(p.Latency.Median.Std())
	}
	s.Stages = SummarizeStages(r)
	s.RaceCoverage = r.RaceCoverage()
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteSummary writes summary.json into runDir.
func WriteSummary(runDir string, s Summary) error {
	s.Schema = SchemaVersion
	return atomicfile.WriteJSON(filepath.Join(runDir, SummaryFile), s)
}

// PrintTable writes the short table a developer reads at the end of a run.
func PrintTable(w io.Writer, s Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CELL\tACCEL\tVERDICT\tATTACHED\tATTACH p50/p99 ms\tDETACH p50 ms\tTIME\tTITLE")
	for _, c := range s.Cells {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f/%.1f\t%.1f\t%.0fs\t%s\n", c.Cell, c.Accel, c.Verdict, c.Attached, c.AttachMedianMS, c.AttachP99MS, c.DetachMedianMS, c.TotalSeconds, c.Title)
	}
	tw.Flush()
	for _, c := range s.Cells {
		if len(c.Stages) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, stage by stage:\n", c.Cell)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  STAGE\tTIME\tWHAT")
		for _, st := range c.Stages {
			what := st.Detail
			if st.Skipped != "" {
				what = "skipped: " + st.Skipped
			}
			if st.Failed {
				what += "  <- " + string(c.Verdict) + ": " + c.Title
			}
			fmt.Fprintf(tw, "  %s\t%.0fs\t%s\n", st.Name, st.Seconds, what)
		}
		tw.Flush()
	}
	for _, c := range s.Cells {
		if len(c.RaceCoverage) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s, race coverage (%s):\n", c.Cell, c.Accel)
		for _, cov := range c.RaceCoverage {
			fmt.Fprintf(w, "  %s\n", cov)
		}
	}
}
