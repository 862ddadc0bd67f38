package results

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// StageRecord is one stage of a campaign cell (event.Stages), as the host
// saw it start: from its stage event to the next one, or to the agent's
// done for the last.
type StageRecord struct {
	Name    string    `json:"name"`
	Skipped string    `json:"skipped,omitempty"`
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
	// Open is true until the stage has ended: a stage still open when the
	// cell ended is the one the guest died or hung in.
	Open bool `json:"open,omitempty"`
}

// startStage closes the stage in progress at t and opens the next.
func (r *Result) startStage(t time.Time, s event.Stage) {
	r.endStage(t)
	r.Stages = append(r.Stages, StageRecord{Name: s.Name, Skipped: s.Skipped, At: t, Open: s.Skipped == ""})
}

// endStage closes the stage in progress at t, if any.
func (r *Result) endStage(t time.Time) {
	if n := len(r.Stages); n > 0 && r.Stages[n-1].Open {
		st := &r.Stages[n-1]
		st.Open, st.Seconds = false, t.Sub(st.At).Seconds()
	}
}

// CurrentStage is the stage running now: the one a finding seen now
// belongs to; "" outside a campaign.
func (r *Result) CurrentStage() string {
	for i := len(r.Stages) - 1; i >= 0; i-- {
		if r.Stages[i].Skipped == "" {
			return r.Stages[i].Name
		}
	}
	return ""
}

// AddFindings appends fs, each marked with the stage it came in.
func (r *Result) AddFindings(fs ...Finding) {
	for _, f := range fs {
		if f.Stage == "" {
			f.Stage = r.CurrentStage()
		}
		r.Findings = append(r.Findings, f)
	}
}

// FailedStage names the stage a failed cell failed in: the headline
// finding's, the churn for an oracle (only the churn runs oracles), else
// the stage the cell ended in; "" outside a campaign or for a cell that
// did not fail.
func (r *Result) FailedStage() string {
	if r.Verdict != Fail || len(r.Stages) == 0 {
		return ""
	}
	if h := r.Headline(false); h.Finding != nil && h.Finding.Stage != "" {
		return h.Finding.Stage
	}
	if _, ok := FailedOracle(r.Oracles); ok {
		return event.StageChurn
	}
	return r.CurrentStage()
}

// StageSummary is one stage of a campaign cell in a run summary.
type StageSummary struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Skipped string  `json:"skipped,omitempty"`
	// What the stage did, in a line.
	Detail string `json:"detail,omitempty"`
	// Failed marks the stage the cell failed in.
	Failed bool `json:"failed,omitempty"`
}

// SummarizeStages gives each stage of r its line.
func SummarizeStages(r Result) []StageSummary {
	failed := r.FailedStage()
	var out []StageSummary
	for _, st := range r.Stages {
		s := StageSummary{Name: st.Name, Seconds: st.Seconds, Skipped: st.Skipped, Failed: st.Name == failed}
		if st.Skipped == "" {
			s.Detail = stageDetail(r, st.Name)
		}
		out = append(out, s)
	}
	return out
}

func stageDetail(r Result, name string) string {
	switch name {
	case event.StageStorm:
		// A campaign's storm attaches beside the churn: its own time is
		// the load and attach phases', not the stage's.
		if p := r.Phases["attach"]; p != nil {
			wall := p.Wall.Std()
			if l := r.Phases["load"]; l != nil {
				wall += l.Wall.Std()
			}
			return fmt.Sprintf("%d of %d attached in %.1f s, p50/p99 %.1f/%.1f ms", p.Succeeded, p.Attempted, wall.Seconds(), ms(p.Latency.Median.Std()), ms(p.Latency.P99.Std()))
		}
	case event.StageChurn:
		n := 0
		for _, t := range r.Transitions {
			n += t.Succeeded
		}
		checks, failures := 0, 0
		for _, o := range r.Oracles {
			checks += o.Checks
			failures += o.Failures
		}
		line := fmt.Sprintf("%d transitions, %d oracle checks, %d failed", n, checks, failures)
		if d := r.Delivery; d != nil && len(d.OrderGoal) > 0 {
			made := len(d.OrderGoal) - len(event.MissingOrders(d.OrderGoal, d.Orders))
			line += fmt.Sprintf("; registration orders %d of %d", made, len(d.OrderGoal))
		}
		return line
	case event.StageRace:
		count := map[string]int{}
		for _, in := range r.Injections {
			count[in.Outcome]++
		}
		var parts []string
		for o, n := range count {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
		sort.Strings(parts)
		return fmt.Sprintf("%d injections: %s", len(r.Injections), strings.Join(parts, ", "))
	case event.StageDetach:
		if p := r.Phases["detach"]; p != nil {
			return fmt.Sprintf("%d detached, p50 %.1f ms", p.Succeeded, ms(p.Latency.Median.Std()))
		}
	}
	return ""
}
