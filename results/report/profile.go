package report

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/ftrace-harness/fth/wire/event"
)

// profileView is one profiled operation of the bench: a stacked bar of its
// wall time by kind of cost, and its largest cost centres.
type profileView struct {
	What    string
	Sum     string
	AddsUp  bool
	Bar     template.HTML
	Legend  []profileSeg
	Centres []profileRow
	Error   string
}

type profileSeg struct {
	Key, Name, Colour, Seconds, Share string
}

type profileRow struct {
	Name, Key, Seconds, Off, Share string
}

// profileColours gives each kind of cost one colour on every page.
var profileColours = map[string]string{
	"rcu": "#4e79a7", "text": "#f28e2b", "ftrace": "#e15759", "jit": "#76b7b2",
	"btf": "#59a14f", "mem": "#edc948", "locks": "#b07aa1", "irq": "#ff9da7",
	"preempted": "#9c755f", "user": "#bab0ac", "other": "#d3d3d3",
}

// centresShown is how many cost centres a profile's table lists.
const centresShown = 5

// profileViews lists the bench's profiles in the order they ran.
func profileViews(b *event.Bench) []profileView {
	var out []profileView
	add := func(what string, p *event.Profile) {
		if p != nil {
			out = append(out, newProfileView(what, p))
		}
	}
	if s := b.Scaling; s != nil {
		for _, p := range s.Points {
			add(fmt.Sprintf("attach of %d trampolines", p.N), p.AttachProfile)
			add(fmt.Sprintf("detach of %d trampolines", p.N), p.DetachProfile)
		}
	}
	if m := b.MultiLive; m != nil {
		for _, p := range m.Points {
			add(fmt.Sprintf("attach of %d per-link trampolines with %d live through %s", p.Link.N, p.Live, m.Kind), p.Link.AttachProfile)
			add(fmt.Sprintf("detach of %d per-link trampolines with %d live through %s", p.Link.N, p.Live, m.Kind), p.Link.DetachProfile)
		}
	}
	if m := b.Multi; m != nil {
		for _, l := range []struct {
			name string
			link event.BenchMultiLink
		}{{"tracing_multi", m.TracingMulti}, {"kprobe_multi", m.KprobeMulti}} {
			for _, p := range l.link.Points {
				add(fmt.Sprintf("%s attach over %d functions", l.name, p.N), p.AttachProfile)
				add(fmt.Sprintf("%s detach over %d functions", l.name, p.N), p.DetachProfile)
			}
		}
	}
	return out
}

func newProfileView(what string, p *event.Profile) profileView {
	v := profileView{
		What:   what,
		AddsUp: p.AddsUp,
		Error:  p.Error,
		Sum: fmt.Sprintf("wall %.2f s = on-CPU %.2f s + off-CPU %.2f s; coverage %.3f (margin ±%.0f%%); %d samples every %d µs, %d switches",
			p.WallSeconds, p.OnCPUSeconds, p.OffCPUSeconds, p.Coverage, 100*p.Margin, p.Samples, p.PeriodMicros, p.Switches),
	}
	if p.Lost > 0 {
		v.Sum += fmt.Sprintf("; %d records lost", p.Lost)
	}
	var bar strings.Builder
	bar.WriteString(`<div class="profile-bar">`)
	for _, c := range p.Costs {
		col := profileColours[c.Key]
		if col == "" {
			col = profileColours["other"]
		}
		seg := profileSeg{Key: c.Key, Name: c.Name, Colour: col, Seconds: fmt.Sprintf("%.2f", c.Seconds), Share: fmt.Sprintf("%.1f%%", 100*c.Share)}
		v.Legend = append(v.Legend, seg)
		fmt.Fprintf(&bar, `<span style="width:%.2f%%;background:%s" title="%s"></span>`, 100*c.Share, col,
			template.HTMLEscapeString(fmt.Sprintf("%s: %s s (%s)", c.Name, seg.Seconds, seg.Share)))
	}
	bar.WriteString(`</div>`)
	v.Bar = template.HTML(bar.String())
	for i, c := range p.Centres {
		if i == centresShown {
			break
		}
		v.Centres = append(v.Centres, profileRow{Name: c.Name, Key: c.Key, Seconds: fmt.Sprintf("%.2f", c.Seconds),
			Off: fmt.Sprintf("%.2f", c.OffCPUSeconds), Share: fmt.Sprintf("%.1f%%", 100*c.Share)})
	}
	return v
}
