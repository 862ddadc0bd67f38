package report

import (
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/wire/event"
)

// benchView is a cell's bench section. Every number arrives precomputed
// by the agent (medians, fastest runs, ratios, percentiles): the page only
// formats them.
type benchView struct {
	// TCGNote is set when the cell ran under TCG, whose nanoseconds are
	// an emulator's, not the hardware's.
	TCGNote string
	// FromEvents says the section came from events.jsonl, not result.json.
	FromEvents bool
	CPU        string
	Ops        *opsView
	Syscall    *syscallView
	Scaling    *scalingView
	Multi      *multiView
	MultiLive  *multiLiveView
	Wakeup     *wakeupView
	// Profiles say where the profiled attach and detach time went.
	Profiles []profileView
}

// partView is what every bench part shares: whether it ran, and if not why.
type partView struct {
	Ran     bool
	Skipped string
}

// part maps a part's Supported/Skipped pair; a part the agent left out
// altogether (nil) says so rather than showing an empty table.
func part(present, supported bool, skipped string) partView {
	switch {
	case !present:
		return partView{Skipped: "not in the bench report"}
	case !supported && skipped == "":
		return partView{Skipped: "not supported (no reason given)"}
	}
	return partView{Ran: supported, Skipped: skipped}
}

type opsView struct {
	partView
	Caption string
	Rows    []opsRow
}

type opsRow struct {
	Label, Relevant, Irrelevant, SaveRegs, Ns, BestNs, Ratio, BestRatio, Note string
	Baseline                                                                  bool
}

type syscallView struct {
	partView
	Caption string
	Rows    []syscallRow
}

type syscallRow struct {
	Name, Ns, BestNs, Ratio, BestRatio, Note string
}

type scalingView struct {
	partView
	Caption string
	Rows    []scalingRow
	// Seconds plots total attach/detach time against N, PerOp the
	// per-trampoline percentiles against N.
	Seconds, PerOp template.HTML
}

type scalingRow struct {
	N, Loaded, Attached, Detached                                       int
	LoadS, AttachS, DetachS, AttachP50, AttachP99, DetachP50, DetachP99 string
	AttachRatio, DetachRatio, Errnos                                    string
}

type multiView struct {
	partView
	Rows []multiRow
}

type multiRow struct {
	Link, N, AttachS, DetachS, AttachRatio, DetachRatio, Note string
	// Ran is false for a link kind that did not run; Note says why.
	Ran bool
}

// multiLiveView is the multilive part: per-link cost with a tracing_multi
// population of each size live.
type multiLiveView struct {
	partView
	Caption string
	Rows    []multiLiveRow
}

type multiLiveRow struct {
	Live, Grow, Refused, Attached, AttachP50, AttachP99, DetachP50, DetachP99 string
}

type wakeupView struct {
	partView
	Caption string
	Rows    []wakeupRow
	Plot    template.HTML
}

type wakeupRow struct {
	Name, Samples, Overruns, Min, P50, P90, P99, P999, Max string
	// Ratio marks the storm/quiet row, whose figures are factors.
	Ratio bool
}

// tcgNote is shown on bench sections of TCG cells only: on KVM or a board
// the nanoseconds are the hardware's.
func tcgNote(accel string) string {
	if !strings.HasPrefix(accel, "tcg") {
		return ""
	}
	return fmt.Sprintf("Accelerator %s: QEMU emulates the CPU, so absolute ns/call, seconds and µs here are not hardware numbers. "+
		"Read the ratios to this boot's own baseline, and the shape of the scaling curve; compare absolute figures only between runs of the same accelerator on the same host.", accel)
}

// buildBench turns result.json's bench section into tables and plots.
func buildBench(cell, accel string, b *event.Bench, fromEvents bool) (*benchView, error) {
	if b == nil {
		return nil, nil
	}
	v := &benchView{TCGNote: tcgNote(accel), FromEvents: fromEvents, CPU: fmt.Sprint(b.CPU)}
	if b.CPU < 0 {
		v.CPU = "not pinned (pinning failed)"
	}
	v.Ops = opsTable(b.Ops)
	v.Syscall = syscallTable(b.Syscall)
	v.Multi = multiTable(b.Multi)
	v.MultiLive = multiLiveTable(b.MultiLive)
	v.Profiles = profileViews(b)
	var err error
	if v.Scaling, err = scalingTable(cell, b.Scaling); err != nil {
		return nil, err
	}
	if v.Wakeup, err = wakeupTable(cell, b.Wakeup); err != nil {
		return nil, err
	}
	return v, nil
}

func opsTable(o *event.BenchOps) *opsView {
	v := &opsView{}
	if o == nil {
		v.partView = part(false, false, "")
		return v
	}
	v.partView = part(true, o.Supported, o.Skipped)
	v.Caption = fmt.Sprintf("%s, %d calls per load, %d loads per configuration", o.Module, o.Calls, o.Runs)
	if o.Baseline != nil {
		r := opsPoint(*o.Baseline)
		r.Label, r.Baseline = "baseline (no ops)", true
		v.Rows = append(v.Rows, r)
		if o.Baseline.Tracee != "" {
			v.Caption += ", timing " + o.Baseline.Tracee
		}
	}
	for _, p := range o.Points {
		v.Rows = append(v.Rows, opsPoint(p))
	}
	return v
}

func opsPoint(p event.BenchOpsPoint) opsRow {
	r := opsRow{
		Relevant: fmt.Sprint(p.Relevant), Irrelevant: fmt.Sprint(p.Irrelevant), SaveRegs: yesNo(p.SaveRegs),
		Ns: nsText(p.NsPerCall), BestNs: nsText(p.BestNs), Ratio: ratioText(p.Ratio), BestRatio: ratioText(p.BestRatio),
		Note: joinNonEmpty("; ", p.Note, p.Error),
	}
	if p.Error != "" {
		r.Ns, r.BestNs, r.Ratio, r.BestRatio = "–", "–", "–", "–"
	}
	return r
}

func syscallTable(s *event.BenchSyscall) *syscallView {
	v := &syscallView{}
	if s == nil {
		v.partView = part(false, false, "")
		return v
	}
	v.partView = part(true, s.Supported, s.Skipped)
	v.Caption = fmt.Sprintf("%s() from user space, entry function %s, %d calls per run, %d runs per state", s.Syscall, s.Function, s.Calls, s.Runs)
	for _, st := range s.States {
		r := syscallRow{Name: st.Name, Ns: nsText(st.NsPerCall), BestNs: nsText(st.BestNs), Ratio: ratioText(st.Ratio), BestRatio: ratioText(st.BestRatio), Note: st.Skipped}
		if st.Skipped != "" {
			r.Ns, r.BestNs, r.Ratio, r.BestRatio = "–", "–", "–", "–"
		}
		v.Rows = append(v.Rows, r)
	}
	return v
}

func scalingTable(cell string, s *event.BenchScaling) (*scalingView, error) {
	v := &scalingView{}
	if s == nil {
		v.partView = part(false, false, "")
		return v, nil
	}
	v.partView = part(true, s.Supported, s.Skipped)
	v.Caption = fmt.Sprintf("N fentry trampolines attached fresh and fully detached, each N in the same boot; %d candidate functions", s.Candidates)
	for _, p := range s.Points {
		v.Rows = append(v.Rows, scalingRow{
			N: p.N, Loaded: p.Loaded, Attached: p.Attached, Detached: p.Detached,
			LoadS: secText(p.LoadSeconds), AttachS: secText(p.AttachSeconds), DetachS: secText(p.DetachSeconds),
			AttachP50: msText(p.Attach.Median), AttachP99: msText(p.Attach.P99),
			DetachP50: msText(p.Detach.Median), DetachP99: msText(p.Detach.P99),
			AttachRatio: ratioText(p.AttachRatio), DetachRatio: ratioText(p.DetachRatio),
			Errnos: countsText(p.Errnos),
		})
	}
	for _, f := range []struct {
		make func(string, []event.BenchScalingPoint) (*figure, error)
		dst  *template.HTML
	}{{scalingFigure, &v.Seconds}, {perOpFigure, &v.PerOp}} {
		fig, err := f.make(cell, s.Points)
		if err != nil {
			return nil, fmt.Errorf("scaling plot: %w", err)
		}
		if *f.dst, err = fig.svg(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func multiTable(m *event.BenchMulti) *multiView {
	v := &multiView{}
	if m == nil {
		v.partView = part(false, false, "")
		return v
	}
	v.partView = part(true, m.Supported, m.Skipped)
	for _, l := range []struct {
		name string
		link event.BenchMultiLink
	}{{"tracing_multi", m.TracingMulti}, {"kprobe_multi", m.KprobeMulti}} {
		if !l.link.Supported {
			why := l.link.Skipped
			if l.link.Errno != "" {
				why = joinNonEmpty(": ", l.link.Errno, why)
			}
			v.Rows = append(v.Rows, multiRow{Link: l.name, Note: "not supported: " + orText(why, "no reason given")})
			continue
		}
		for _, p := range l.link.Points {
			r := multiRow{Link: l.name, N: fmt.Sprint(p.N), Ran: p.Error == "", Note: p.Error,
				AttachS: secText(p.AttachSeconds), DetachS: secText(p.DetachSeconds),
				AttachRatio: ratioText(p.AttachRatio), DetachRatio: ratioText(p.DetachRatio)}
			v.Rows = append(v.Rows, r)
		}
	}
	return v
}

// multiLiveTable is nil for a report written before the part existed, so
// that old reports gain no empty section.
func multiLiveTable(m *event.BenchMultiLive) *multiLiveView {
	if m == nil {
		return nil
	}
	v := &multiLiveView{partView: part(true, m.Supported, m.Skipped)}
	v.Caption = fmt.Sprintf("%d per-link trampolines attached and detached at each size, on functions outside the %s population", m.Samples, orText(m.Kind, "multi-function"))
	if m.TracingRefused != "" {
		v.Caption += " (tracing_multi refused: " + m.TracingRefused + ")"
	}
	if d := m.Detach; d != nil {
		v.Caption += fmt.Sprintf("; the population's detach at the end: %d of %d functions in %.2f s", d.Succeeded, d.Attempted, d.Wall.Std().Seconds())
	}
	for _, p := range m.Points {
		l := p.Link
		v.Rows = append(v.Rows, multiLiveRow{Live: fmt.Sprint(p.Live), Grow: secText(p.Grow.Wall.Std().Seconds()), Refused: fmt.Sprint(p.Grow.Failed),
			Attached:  fmt.Sprintf("%d of %d", l.Attached, l.N),
			AttachP50: msText(l.Attach.Median), AttachP99: msText(l.Attach.P99), DetachP50: msText(l.Detach.Median), DetachP99: msText(l.Detach.P99)})
	}
	return v
}

func wakeupTable(cell string, w *event.BenchWakeup) (*wakeupView, error) {
	v := &wakeupView{}
	if w == nil {
		v.partView = part(false, false, "")
		return v, nil
	}
	v.partView = part(true, w.Supported, w.Skipped)
	v.Caption = fmt.Sprintf("SCHED_FIFO priority %d thread sleeping to absolute %s deadlines for %s, quiet, then during an attach/detach storm (%d attaches, %d detaches, %d errors while measuring)",
		w.Priority, w.Period, w.For, w.StormAttaches, w.StormDetaches, w.StormErrors)
	for _, s := range []struct {
		name string
		sum  *event.WakeupSummary
	}{{"quiet", w.Quiet}, {"storm", w.Storm}} {
		if s.sum == nil {
			continue
		}
		p := s.sum.WakeupPercentiles
		v.Rows = append(v.Rows, wakeupRow{Name: s.name, Samples: fmt.Sprint(s.sum.Samples), Overruns: fmt.Sprint(s.sum.Overruns),
			Min: usText(p.Min), P50: usText(p.P50), P90: usText(p.P90), P99: usText(p.P99), P999: usText(p.P999), Max: usText(p.Max)})
	}
	if r := w.Ratio; r != nil {
		v.Rows = append(v.Rows, wakeupRow{Name: "storm / quiet", Ratio: true,
			Min: ratioText(r.Min), P50: ratioText(r.P50), P90: ratioText(r.P90), P99: ratioText(r.P99), P999: ratioText(r.P999), Max: ratioText(r.Max)})
	}
	fig, err := wakeupFigure(cell, w)
	if err != nil {
		return nil, fmt.Errorf("wakeup plot: %w", err)
	}
	if v.Plot, err = fig.svg(); err != nil {
		return nil, err
	}
	return v, nil
}

// nsText, usText, secText and ratioText format the agent's figures; 0 is
// "–" because the agent leaves a figure it has no value for at zero.
func nsText(v float64) string  { return nonZero(v, "%.1f") }
func usText(v float64) string  { return nonZero(v, "%.1f") }
func secText(v float64) string { return nonZero(v, "%.2f") }

func ratioText(v float64) string { return nonZero(v, "%.2f×") }

func nonZero(v float64, format string) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// countsText formats an errno (or any) count map, sorted by key.
func countsText(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(out, " ")
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
