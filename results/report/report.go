package report

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/event"
	"github.com/ftrace-harness/fth/results/junit"
	"github.com/ftrace-harness/fth/results/symbolize"
)

//go:embed templates/report.html.tmpl
var templateFS embed.FS

// page is parsed once; a template is immutable after parsing.
var page = template.Must(template.New("report.html.tmpl").ParseFS(templateFS, "templates/report.html.tmpl"))

// Options tunes a report. The zero value makes a report without
// symbolized stacks.
type Options struct {
	// Vmlinux symbolizes every cell's stacks against this file; a file
	// that cannot be opened is an error.
	Vmlinux string
	// AutoVmlinux symbolizes each cell against its own kernel.vmlinux from
	// result.json when that file exists (on the machine that built it);
	// where it does not, the page says so.
	AutoVmlinux bool
	// ExcerptLines bounds each log excerpt; 0 means 40.
	ExcerptLines int
}

// Written names the files Write produced.
type Written struct {
	// Report, JUnit and Summary are the paths of report.html, junit.xml
	// and summary.json.
	Report, JUnit, Summary string
}

// Write loads the run directory dir and writes report.html, junit.xml and a
// summary.json rebuilt from the cells into it. Each file is replaced
// atomically, so a CI step or a browser never reads half of one.
func Write(ctx context.Context, dir string, opts Options) (*results.Run, Written, error) {
	run, err := results.LoadRun(ctx, dir)
	if err != nil {
		return nil, Written{}, err
	}
	out := Written{
		Report:  filepath.Join(dir, results.ReportFile),
		JUnit:   filepath.Join(dir, results.JUnitFile),
		Summary: filepath.Join(dir, results.SummaryFile),
	}
	var b bytes.Buffer
	if err := Render(ctx, &b, run, opts); err != nil {
		return run, Written{}, err
	}
	if err := atomicfile.Write(out.Report, b.Bytes()); err != nil {
		return run, Written{}, fmt.Errorf("write %s: %w", out.Report, err)
	}
	if err := junit.WriteFile(out.JUnit, junit.FromResults(run.ID, run.Results())); err != nil {
		return run, Written{}, err
	}
	if err := results.WriteSummary(dir, run.Summary()); err != nil {
		return run, Written{}, fmt.Errorf("write %s: %w", out.Summary, err)
	}
	return run, out, nil
}

// Render writes the HTML page for run.
func Render(ctx context.Context, w io.Writer, run *results.Run, opts Options) error {
	syms := &symbolizers{opts: opts, open: map[string]*symbolize.Symbolizer{}, failed: map[string]error{}}
	defer syms.close()
	if opts.Vmlinux != "" {
		if _, err := syms.get(opts.Vmlinux); err != nil {
			return fmt.Errorf("report --vmlinux: %w", err)
		}
	}
	v, err := buildPage(ctx, run, opts, syms)
	if err != nil {
		return err
	}
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("render report for %s: %w", run.Dir, err)
	}
	return nil
}

// symbolizers opens each vmlinux once per report.
type symbolizers struct {
	opts   Options
	open   map[string]*symbolize.Symbolizer
	failed map[string]error
}

func (s *symbolizers) get(path string) (*symbolize.Symbolizer, error) {
	if sym, ok := s.open[path]; ok {
		return sym, nil
	}
	if err, ok := s.failed[path]; ok {
		return nil, err
	}
	sym, err := symbolize.Open(path, symbolize.Options{})
	if err != nil {
		s.failed[path] = err
		return nil, err
	}
	s.open[path] = sym
	return sym, nil
}

// forCell picks the symbolizer for a cell, or says why there is none ("" when
// symbolization was not asked for).
func (s *symbolizers) forCell(r results.Result) (*symbolize.Symbolizer, string) {
	path := s.opts.Vmlinux
	if path == "" {
		if !s.opts.AutoVmlinux {
			return nil, ""
		}
		path = r.Kernel.Vmlinux
		if path == "" {
			return nil, "stacks not symbolized: result.json names no vmlinux"
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Sprintf("stacks not symbolized: %s is not on this machine (pass --vmlinux)", path)
		}
	}
	sym, err := s.get(path)
	if err != nil {
		return nil, "stacks not symbolized: " + err.Error()
	}
	return sym, ""
}

func (s *symbolizers) close() {
	for _, sym := range s.open {
		sym.Close()
	}
}

// pageView is what the template renders.
type pageView struct {
	RunID, Dir, At string
	Counts         []countView
	Variants       []string
	Grid           []gridRow
	AttachBars     template.HTML
	DetachBars     template.HTML
	Cells          []cellView
	// Mutation is a mutation run's table (mutation.json), if there is one.
	Mutation *mutationView
	// Bisect is a bisection's steps (bisect.json), if there are any.
	Bisect *bisectView
}

// mutationView is mutation.json as the page shows it. The file is the
// harness's (harness/mutate.Table); the report reads only what it shows.
type mutationView struct {
	Seed    int64         `json:"seed"`
	Budget  float64       `json:"budget_seconds"`
	Rows    []mutationRow `json:"rows"`
	Summary string        `json:"-"`
}

type mutationRow struct {
	Mutant   string  `json:"mutant"`
	Class    string  `json:"class"`
	Arch     string  `json:"arch"`
	Detected bool    `json:"detected"`
	Seconds  float64 `json:"seconds"`
	Title    string  `json:"title"`
	Verdict  string  `json:"verdict"`
	Reason   string  `json:"reason"`
	Cell     string  `json:"cell"`
	Anchor   string  `json:"-"`
}

// readMutation reads dir's mutation.json; none is no table.
func readMutation(dir string) (*mutationView, error) {
	b, err := os.ReadFile(filepath.Join(dir, results.MutationFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m mutationView
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", results.MutationFile, err)
	}
	// mutate.Table.Summary's count, of the rows' own Detected: results
	// does not import the harness.
	n, d := 0, 0
	for i := range m.Rows {
		m.Rows[i].Anchor = anchor(m.Rows[i].Cell)
		if m.Rows[i].Mutant != "" {
			n++
			if m.Rows[i].Detected {
				d++
			}
		}
	}
	m.Summary = fmt.Sprintf("%d of %d mutants detected; each kernel ran the scenario for at most %.0f s with seed %d; the unmutated kernel ran it too and must pass", d, n, m.Budget, m.Seed)
	return &m, nil
}

type countView struct {
	Verdict string
	N       int
}

type gridRow struct {
	Arch  string
	Slots []slotView
}

// slotView is one heatmap cell; normally one run cell, none when the arch
// did not run the variant.
type slotView struct {
	Verdict string
	Cells   []cellLink
}

type cellLink struct {
	Anchor, Name, Verdict, Title string
	// Scenario is shown when it is not the default attach storm, so a
	// churn, bench or soak cell is told apart in the heatmap.
	Scenario string
}

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

type excerptView struct {
	Caption string
	Lines   []string
	// More counts the lines left out, which are in the file In.
	More int
	In   string
}

var anchorUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func anchor(cell string) string { return "cell-" + anchorUnsafe.ReplaceAllString(cell, "_") }

// verdictOrder is the immutable order of the count badges.
var verdictOrder = [...]results.Verdict{results.Fail, results.Error, results.Running, results.Pass, results.Skip}

func buildPage(ctx context.Context, run *results.Run, opts Options, syms *symbolizers) (pageView, error) {
	v := pageView{RunID: run.ID, Dir: run.Dir}
	mut, err := readMutation(run.Dir)
	if err != nil {
		return v, err
	}
	v.Mutation = mut
	if v.Bisect, err = readBisect(run.Dir); err != nil {
		return v, err
	}
	if !run.At.IsZero() {
		v.At = run.At.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	counts := map[results.Verdict]int{}
	for _, c := range run.Cells {
		counts[c.Result.Verdict]++
	}
	for _, vd := range verdictOrder {
		if counts[vd] > 0 {
			v.Counts = append(v.Counts, countView{string(vd), counts[vd]})
		}
		delete(counts, vd)
	}
	for vd, n := range counts {
		v.Counts = append(v.Counts, countView{string(vd), n})
	}

	v.Variants = run.Variants()
	for _, a := range run.Arches() {
		row := gridRow{Arch: a}
		for _, va := range v.Variants {
			slot := slotView{}
			for _, c := range run.Cells {
				if c.Result.Arch == a && c.Variant == va {
					slot.Cells = append(slot.Cells, cellLink{Anchor: anchor(c.Result.Cell), Name: c.Result.Cell, Verdict: string(c.Result.Verdict), Title: c.Result.Title(), Scenario: shownScenario(c.Result)})
				}
			}
			slot.Verdict = worst(slot.Cells)
			row.Slots = append(row.Slots, slot)
		}
		v.Grid = append(v.Grid, row)
	}

	for _, ph := range []struct {
		name string
		dst  *template.HTML
	}{{"attach", &v.AttachBars}, {"detach", &v.DetachBars}} {
		fig, err := percentileBars(run, ph.name)
		if err != nil {
			return v, err
		}
		if *ph.dst, err = fig.svg(); err != nil {
			return v, err
		}
	}
	for _, c := range run.Cells {
		if err := ctx.Err(); err != nil {
			return v, fmt.Errorf("report %s: %w", run.Dir, err)
		}
		cv, err := buildCell(ctx, run, c, opts, syms)
		if err != nil {
			return v, fmt.Errorf("cell %s: %w", c.Result.Cell, err)
		}
		v.Cells = append(v.Cells, cv)
	}
	return v, nil
}

// shownScenario is how a heatmap slot names a cell's scenario: the storm,
// the default, goes unnamed; a board's soak says so.
func shownScenario(r results.Result) string {
	sc, err := event.ParseScenario(string(r.Scenario))
	if err != nil {
		return string(r.Scenario)
	}
	switch {
	case r.Board != nil:
		return "soak-" + string(sc)
	case sc == event.ScenarioStorm:
		return ""
	}
	return string(sc)
}

// worst picks the colour of a heatmap slot holding several cells.
func worst(cells []cellLink) string {
	for _, vd := range verdictOrder {
		for _, c := range cells {
			if c.Verdict == string(vd) {
				return c.Verdict
			}
		}
	}
	if len(cells) > 0 {
		return cells[0].Verdict
	}
	return "none"
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
	add("preempt", r.PreemptModel)
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
					return cv, err
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

// registerLines names where each vCPU was when registers.txt was taken,
// and which words on top of each vCPU's stack point into kernel text: the
// return addresses of the frames below, or leftovers (like the kernel's own
// "? func" lines, they are candidates, not a verified unwind).
func registerLines(ctx context.Context, dump string, sym *symbolize.Symbolizer) []string {
	var out []string
	cpu, stack := "", ""
	for _, line := range strings.Split(dump, "\n") {
		if strings.HasPrefix(line, "CPU#") {
			cpu, stack = strings.TrimSpace(line), ""
			continue
		}
		// "stack of CPU#0 at ffffc90000013e58:" (harness/target/qemu's stackHeader), then
		// "+0x008 ffffffff81234567" lines.
		if rest, ok := strings.CutPrefix(line, "stack of "); ok {
			stack, _, _ = strings.Cut(rest, " ")
			continue
		}
		if stack != "" {
			if l, ok := stackLine(ctx, stack, line, sym); ok {
				out = append(out, l)
			}
			continue
		}
		refs := symbolize.Parse(line)
		if len(refs) == 0 || !refs[0].Register {
			continue
		}
		text := cpu + " " + refs[0].Text
		if sym != nil {
			frames, err := sym.Report(ctx, line)
			if err == nil && len(frames) > 0 {
				text += ": " + strings.Join(frames[0].Lines(), " ← ")
			}
		}
		out = append(out, strings.TrimSpace(text))
	}
	return out
}

// stackLine symbolizes one stack word, if it points into kernel text.
// Without a vmlinux nothing tells code from data, so no word is shown.
func stackLine(ctx context.Context, cpu, line string, sym *symbolize.Symbolizer) (string, bool) {
	f := strings.Fields(line)
	if sym == nil || len(f) != 2 || !strings.HasPrefix(f[0], "+") {
		return "", false
	}
	// As a call trace line, the word is read as a return address: its
	// call is the instruction before it.
	frames, err := sym.Report(ctx, "[<"+f[1]+">]")
	if err != nil || len(frames) == 0 || frames[0].Func == "" || frames[0].Err == symbolize.ErrNotInText.Error() {
		return "", false
	}
	return cpu + " stack " + f[0] + " " + f[1] + ": " + strings.Join(frames[0].Lines(), " ← "), true
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
