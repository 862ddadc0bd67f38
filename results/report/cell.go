package report

import (
	"context"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strings"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// cellView is one cell's section of the page: its facts, phases, plots,
// findings and forensics.
type cellView struct {
	Anchor, Name, Arch, Variant, Verdict, Title, Reason string
	Facts                                               []fact
	Repro                                               string
	Links                                               []fact
	Phases                                              []phaseView
	LatencyPlot, ProgressPlot                           template.HTML
	Findings                                            []findingView
	Excerpt                                             *excerptView
	Registers                                           []string
	Notes                                               []string
	// Bench, Churn and Board are the scenario-specific sections; nil when
	// the cell has none of their records.
	Bench *benchView
	Churn *churnView
	Board *boardView
	// Stages are a campaign cell's stages, in order.
	Stages []results.StageSummary
	// Race is one table per race target's window (race.go).
	Race []raceView
}

type fact struct{ K, V string }

type phaseView struct {
	Name                             string
	Attempted, Succeeded, Failed     int
	Min, Median, P90, P99, Max, Wall string
	Errnos                           string
}

func buildCell(ctx context.Context, run *results.Run, c results.Cell, opts Options, syms *symbolizers) (cellView, error) {
	r := c.Result
	cv := cellView{
		Anchor: anchor(r.Cell), Name: r.Cell, Arch: r.Arch, Variant: c.Variant,
		Verdict: string(r.Verdict), Title: r.Title(), Reason: r.Reason, Repro: r.Repro,
	}
	if cv.Reason == cv.Title {
		cv.Reason = ""
	}
	add := func(k, v string) {
		if v != "" {
			cv.Facts = append(cv.Facts, fact{k, v})
		}
	}
	add("scenario", string(r.Scenario))
	add("kernel", strings.TrimSpace(r.Kernel.Release+" "+shortHash(r.Kernel.ConfigSHA256)))
	add("fragments", strings.Join(r.Kernel.Fragments, " + "))
	accel := r.Accel
	if r.AccelReason != "" {
		accel += " (" + r.AccelReason + ")"
	}
	add("accel", accel)
	if r.CPUs > 0 {
		add("vCPUs", fmt.Sprint(r.CPUs))
	}
	preempt := r.PreemptModel
	if asked := r.PreemptRefused(); asked != "" {
		preempt += fmt.Sprintf(" (preempt=%s asked: the kernel does not offer it)", asked)
	}
	add("preempt", preempt)
	add("seed", r.Seed)
	if r.Timings.TotalSeconds > 0 {
		add("total", fmt.Sprintf("%.1f s", r.Timings.TotalSeconds))
	}
	if r.Timings.BootToAgentSeconds > 0 {
		add("boot to agent", fmt.Sprintf("%.2f s", r.Timings.BootToAgentSeconds))
	}
	ended := r.Ended
	if r.Shutdown != "" {
		ended += " (QEMU: " + r.Shutdown + ")"
	}
	add("ended by", strings.TrimSpace(ended))
	if r.Liveness != nil {
		live := fmt.Sprintf("%d hammer threads", r.Liveness.Threads)
		if len(r.Liveness.Stalled) > 0 {
			live += fmt.Sprintf(", %d stalled", len(r.Liveness.Stalled))
		}
		add("liveness", live)
	}
	for _, f := range c.Files {
		cv.Links = append(cv.Links, fact{f, filepath.ToSlash(filepath.Join(c.Dir, f))})
	}
	if c.BadEvents > 0 {
		cv.Notes = append(cv.Notes, fmt.Sprintf("%d lines of events.jsonl did not parse (a harness killed mid-write leaves half a line)", c.BadEvents))
	}

	for _, name := range phaseOrder(r.Phases) {
		p := r.Phases[name]
		l := p.Latency
		cv.Phases = append(cv.Phases, phaseView{Name: name, Attempted: p.Attempted, Succeeded: p.Succeeded, Failed: p.Failed,
			Min: msText(l.Min), Median: msText(l.Median), P90: msText(l.P90), P99: msText(l.P99), Max: msText(l.Max), Wall: fmt.Sprintf("%.1f s", p.Wall.Std().Seconds()),
			Errnos: countsText(p.Errnos)})
	}
	var err error
	if cv.Bench, err = buildBench(r.Cell, r.Accel, r.Bench, c.BenchFromEvents); err != nil {
		return cv, fmt.Errorf("bench: %w", err)
	}
	cv.Churn = buildChurn(r)
	cv.Board = buildBoard(r.Board, c.Dir)
	cv.Stages = results.SummarizeStages(r)
	cv.Race = buildRace(r)
	if err := cellPlots(&cv, c); err != nil {
		return cv, err
	}

	limit := opts.ExcerptLines
	if limit <= 0 {
		limit = 40
	}
	sym, err := cellFindings(ctx, &cv, run, c, limit, syms)
	if err != nil {
		return cv, err
	}
	// Without a report to quote (a hang, an error, an agent that said no),
	// the end of the console is what a reader needs.
	if r.Verdict != results.Pass && r.Verdict != results.Skip && !hasReport(r) && hasFile(c, results.ConsoleLog) {
		lines, n, err := readLines(filepath.Join(run.Dir, c.Dir, results.ConsoleLog), -limit, -1)
		if err == nil && n > 0 {
			cv.Excerpt = &excerptView{Caption: fmt.Sprintf("last %d of %d console.log lines", len(lines), n), Lines: lines}
		}
	}
	if hasFile(c, results.RegistersFile) {
		if b, err := os.ReadFile(filepath.Join(run.Dir, c.Dir, results.RegistersFile)); err == nil {
			cv.Registers = registerLines(ctx, string(b), sym)
		}
	}
	return cv, nil
}

// cellPlots draws a cell's latency and progress plots.
func cellPlots(cv *cellView, c results.Cell) error {
	var err error
	if cv.LatencyPlot, err = latencyFigure(c.Result.Cell, c.Result.Phases).svg(); err != nil {
		return err
	}
	// A bench's progress restarts at every N of its scaling curve, which
	// draws a saw, not progress; the scaling table has the same per N.
	if c.Result.Bench != nil {
		return nil
	}
	progress, err := progressFigure(c)
	if err != nil {
		return err
	}
	cv.ProgressPlot, err = progress.svg()
	return err
}

// msText formats a latency in milliseconds with two decimals: result.json's
// float milliseconds come back as 16.399999ms otherwise.
func msText(d event.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func hasFile(c results.Cell, name string) bool {
	for _, f := range c.Files {
		if f == name {
			return true
		}
	}
	return false
}

func hasReport(r results.Result) bool {
	for _, f := range r.Findings {
		if f.Report != "" {
			return true
		}
	}
	return false
}

func shortHash(h string) string {
	if len(h) > 12 {
		return "config " + h[:12]
	}
	return h
}

type excerptView struct {
	Caption string
	Lines   []string
	// More counts the lines left out, which are in the file In.
	More int
	In   string
}
