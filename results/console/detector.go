package console

import (
	"regexp"
	"strconv"
	"strings"
)

// Detector finds reports in a live stream, fed a line at a time, for live
// detection during a run. A finding is emitted once its report has ended
// (end marker seen, or the trace section finished, or a later unrelated line
// / N lines passed, or Flush was called).
//
// Reports of different printk contexts ("[  T123]", "[    C1]") are tracked
// separately, because CPUs print concurrently and their lines interleave.
// A Detector is not safe for concurrent use.
type Detector struct {
	n    int
	open []*report
	// buf holds the raw lines from bufFrom to n: those of open reports and
	// the last few, so a report can start at a banner printed before its
	// header.
	buf     []string
	bufFrom int
	// banners are recent "cut here" lines not yet claimed by a report.
	banners []consoleLine
	// booted is set once a kernel's first line went by; quiet says nothing
	// has explained a restart since (no report, no orderly restart), so
	// another boot would be an unexpected one.
	booted, quiet bool
	// last is the previous line as logged, for echo.
	last string
}

// report is one report being read.
type report struct {
	pat          *pattern
	ctx          string
	start        int
	header       int
	lastAccepted int
	gap          int
	inTrace      bool
	groups       map[string]string
	detailsDone  []bool
	ips          []string
	workqueue    string
	// lockAts are the lock sites lockdep named, in order; atNext says the
	// last line ended in "at:" and the site follows.
	lockAts []string
	atNext  bool
	// flow is the report's instruction pointers, frames, interrupt entries
	// and trace headers in log order, for a stall's guilty frame.
	flow  []flowItem
	stack stackTracker
	// who the report is about, -1 / "" until a line says.
	cpu, pid    int
	comm, taint string
	// cut is set when a new header in the same context ended the report.
	cut bool
}

// NewDetector returns a Detector at the start of a log.
func NewDetector() *Detector {
	return &Detector{bufFrom: 1}
}

// Line feeds the next line (without its newline) and returns the findings
// this line completed. Lines are numbered from 1.
func (d *Detector) Line(line string) []Finding {
	d.n++
	l := splitLine(d.n, line)
	d.buf = append(d.buf, l.raw)
	// A line printed twice with one timestamp is one message on two
	// consoles: powerpc's boot console and hvc0 both print until the
	// boot console is dropped, and a report header read twice is
	// neither two reports nor a report of its own second line.
	echo := l.raw == d.last && l.text != l.raw
	d.last = l.raw
	if echo {
		return nil
	}
	if rules.banner.MatchString(l.text) {
		d.banners = append(d.banners, l)
	}

	var done []Finding
	if f, ok := d.bootLine(l); ok {
		done = append(done, f)
	}
	// Reports that used up their line budget end before this line.
	for _, r := range append([]*report(nil), d.open...) {
		if l.num-r.start >= r.pat.maxLines {
			done = append(done, d.finish(r, r.lastAccepted))
		}
	}

	owner := d.owner(l.ctx)
	p, groups := rules.matchHeader(l.text)
	switch {
	case p != nil && owner != nil && owner.absorbs(l):
		owner.feed(l, true)
	case p != nil:
		done = append(done, d.startReport(l, p, groups)...)
	case owner != nil:
		if end, ok := owner.feed(l, false); ok {
			done = append(done, d.finish(owner, end))
		}
	case l.ctx != "" && len(d.open) > 0:
		// Another CPU's lines (an NMI backtrace requested by a stall
		// report) can belong to the latest report.
		d.open[len(d.open)-1].feedForeign(l)
	}

	d.trim()
	return done
}

// Flush ends the stream and returns the reports still open, in log order.
func (d *Detector) Flush() []Finding {
	var done []Finding
	for len(d.open) > 0 {
		r := d.open[0]
		done = append(done, d.finish(r, r.lastAccepted))
	}
	d.banners = nil
	d.trim()
	return done
}

// OpenKinds returns the kinds of the reports still being read, in log
// order. A report is known from its header on, long before it ends: a
// hang report, which has no end marker, may be the last thing the console
// prints for minutes.
func (d *Detector) OpenKinds() []Kind {
	kinds := make([]Kind, 0, len(d.open))
	for _, r := range d.open {
		kinds = append(kinds, r.pat.kind)
	}
	return kinds
}

// owner returns the open report of printk context ctx.
func (d *Detector) owner(ctx string) *report {
	for _, r := range d.open {
		if r.ctx == ctx {
			return r
		}
	}
	return nil
}

// startReport ends the open report of l's context and opens one at l.
func (d *Detector) startReport(l consoleLine, p *pattern, groups map[string]string) []Finding {
	start := l.num
	if b, ok := d.takeBanner(l); ok {
		start = b
	}
	// Earlier banners of this context precede this report; no later report
	// may start at them.
	kept := d.banners[:0]
	for _, b := range d.banners {
		if b.ctx != l.ctx || b.num > l.num {
			kept = append(kept, b)
		}
	}
	d.banners = kept
	var done []Finding
	if prev := d.owner(l.ctx); prev != nil {
		// A banner the previous report skipped belongs to this one.
		end := min(prev.lastAccepted, start-1)
		prev.cut = true
		done = append(done, d.finish(prev, end))
	}
	d.quiet = false
	r := &report{
		pat:         p,
		ctx:         l.ctx,
		start:       start,
		header:      l.num,
		groups:      groups,
		detailsDone: make([]bool, len(p.details)),
		stack:       newStackTracker(),
		cpu:         -1,
		pid:         -1,
	}
	d.open = append(d.open, r)
	r.feed(l, true)
	return done
}

// takeBanner returns the line of a banner of l's context printed just
// before l, and forgets it so no other report starts there.
func (d *Detector) takeBanner(l consoleLine) (int, bool) {
	for i := len(d.banners) - 1; i >= 0; i-- {
		b := d.banners[i]
		if b.ctx != l.ctx || l.num-b.num > bannerWindow || b.num < d.bufFrom {
			continue
		}
		d.banners = append(d.banners[:i], d.banners[i+1:]...)
		return b.num, true
	}
	return 0, false
}

// finish closes r at line end and builds its Finding.
func (d *Detector) finish(r *report, end int) Finding {
	for i, o := range d.open {
		if o == r {
			d.open = append(d.open[:i], d.open[i+1:]...)
			break
		}
	}
	// Banners inside the report cannot start a later one.
	kept := d.banners[:0]
	for _, b := range d.banners {
		if b.ctx != r.ctx || b.num > end {
			kept = append(kept, b)
		}
	}
	d.banners = kept

	fn := r.function()
	report := strings.Join(d.buf[r.start-d.bufFrom:end-d.bufFrom+1], "\n")
	kind, title := r.pat.kind, renderTitle(r.pat.title, r.groups, fn)
	if kind == KindAgentCrash {
		if t, ok := kernelCausedCrash(report); ok {
			kind, title = KindBadSyscallReturn, t
		}
	}
	return Finding{
		Kind:       kind,
		Title:      title,
		Function:   fn,
		StartLine:  r.start,
		EndLine:    end,
		Report:     report,
		Stack:      r.stack.stack(),
		Trampoline: r.trampoline(),
		CPU:        r.cpu,
		PID:        r.pid,
		Comm:       r.comm,
		Taint:      r.taint,
		Count:      1,
		tmpl:       r.pat.title,
		groups:     r.groups,
		ctx:        r.ctx,
		cut:        r.cut,
		complete:   len(r.ips) > 0 || len(r.stack.stack()) > 0,
	}
}

// bootLine watches for a kernel's first line. A second boot with neither
// a report nor an orderly restart since the first is a reset the kernel
// did not explain: a finding titled like the harness's own silent reset,
// quoting the lines before the new boot.
func (d *Detector) bootLine(l consoleLine) (Finding, bool) {
	if rules.orderly.MatchString(l.text) {
		d.quiet = false
		return Finding{}, false
	}
	if !rules.boot.MatchString(l.text) {
		return Finding{}, false
	}
	unexpected := d.booted && d.quiet && len(d.open) == 0
	d.booted, d.quiet = true, true
	if !unexpected {
		return Finding{}, false
	}
	start := max(l.num-bannerWindow, d.bufFrom)
	return Finding{
		Kind:      KindReset,
		Title:     ResetTitle,
		StartLine: start,
		EndLine:   l.num,
		Report:    strings.Join(d.buf[start-d.bufFrom:], "\n"),
		CPU:       -1,
		PID:       -1,
		Count:     1,
		tmpl:      ResetTitle,
		complete:  true,
	}, true
}

// trim drops buffered lines no open report or banner lookback needs.
func (d *Detector) trim() {
	keep := d.n - bannerWindow
	for _, r := range d.open {
		keep = min(keep, r.start)
	}
	if drop := keep - d.bufFrom; drop > 0 {
		d.buf = d.buf[drop:]
		d.bufFrom = keep
	}
	kept := d.banners[:0]
	for _, b := range d.banners {
		if d.n-b.num < bannerWindow {
			kept = append(kept, b)
		}
	}
	d.banners = kept
}

// absorbs reports whether header line l continues r.
func (r *report) absorbs(l consoleLine) bool {
	if l.num-r.header > absorbWindow {
		return false
	}
	for _, re := range r.pat.absorb {
		if re.MatchString(l.text) {
			return true
		}
	}
	return false
}

// feed handles a line of r's own context. It returns the report's last line
// and true when the report has ended.
func (r *report) feed(l consoleLine, accept bool) (int, bool) {
	if !accept && r.pat.end.MatchString(l.text) {
		r.lastAccepted = l.num
		return l.num, true
	}
	if !accept && rules.banner.MatchString(l.text) {
		// A banner introduces the next report, not this one.
		return 0, false
	}
	cls, f := classify(l.text)
	r.collect(l, cls, f)
	switch {
	case accept:
		r.lastAccepted = l.num
	case cls == classBlank:
	case cls == classOther:
		if r.pat.untilEnd {
			break
		}
		if r.inTrace {
			return r.lastAccepted, true
		}
		r.gap++
		if r.gap >= gapLimit {
			return r.lastAccepted, true
		}
	default:
		r.lastAccepted = l.num
		r.gap = 0
		if cls == classTraceHeader {
			r.inTrace = true
		}
	}
	return 0, false
}

// feedForeign handles a line of another printk context: it is kept if it
// looks like part of a report, for its instruction pointer.
func (r *report) feedForeign(l consoleLine) {
	cls, f := classify(l.text)
	if cls == classBlank || cls == classOther {
		return
	}
	r.lastAccepted = l.num
	if m := rules.ip.FindStringSubmatch(l.text); m != nil {
		r.ips = append(r.ips, cleanFunc(m[1]))
	}
	r.addFlow(cls, f, l.text)
}

// addFlow records what a stall's guilty frame is read from.
func (r *report) addFlow(cls lineClass, f frame, text string) {
	switch {
	case rules.stallEntry.MatchString(text):
		r.flow = append(r.flow, flowItem{kind: flowEntry})
	case cls == classTraceHeader:
		r.flow = append(r.flow, flowItem{kind: flowTrace})
	case cls == classFrame && !f.unreliable:
		r.flow = append(r.flow, flowItem{kind: flowFrame, fn: f.fn})
	default:
		if m := rules.ip.FindStringSubmatch(text); m != nil {
			r.flow = append(r.flow, flowItem{kind: flowIP, fn: cleanFunc(m[1])})
		}
	}
}

// collect extracts title material from a line of r's own context.
func (r *report) collect(l consoleLine, cls lineClass, f frame) {
	if l.num-r.header <= detailWindow {
		for i, re := range r.pat.details {
			if r.detailsDone[i] {
				continue
			}
			if m := re.FindStringSubmatch(l.text); m != nil {
				r.detailsDone[i] = true
				r.groups = namedGroups(re, m, r.groups)
			}
		}
	}
	if m := rules.ip.FindStringSubmatch(l.text); m != nil {
		r.ips = append(r.ips, cleanFunc(m[1]))
	}
	for _, re := range rules.who {
		if m := re.FindStringSubmatch(l.text); m != nil {
			r.setWho(re, m)
		}
	}
	if r.workqueue == "" {
		if m := rules.workqueue.FindStringSubmatch(l.text); m != nil {
			r.workqueue = cleanFunc(m[1])
		}
	}
	switch m := rules.lockAt.FindStringSubmatch(l.text); {
	case m != nil:
		r.lockAts = append(r.lockAts, cleanFunc(m[1]))
	case r.atNext:
		if m := rules.siteLine.FindStringSubmatch(l.text); m != nil {
			r.lockAts = append(r.lockAts, cleanFunc(m[1]))
		}
	}
	r.atNext = rules.lockAtNext.MatchString(l.text)
	r.addFlow(cls, f, l.text)
	r.stack.add(cls, f, l.text)
}

// setWho fills the CPU, PID, comm and taint a who-line names, keeping
// what an earlier line said.
func (r *report) setWho(re *regexp.Regexp, m []string) {
	for i, name := range re.SubexpNames() {
		v := m[i]
		switch {
		case name == "cpu" && r.cpu < 0 && v != "":
			r.cpu, _ = strconv.Atoi(v)
		case name == "pid" && r.pid < 0 && v != "":
			r.pid, _ = strconv.Atoi(v)
		case name == "comm" && r.comm == "" && v != "":
			r.comm = strings.TrimSpace(v)
		}
	}
	if r.taint == "" && (strings.Contains(m[0], "Tainted: ") || strings.Contains(m[0], "Not tainted")) {
		r.taint = "not tainted"
		if i := re.SubexpIndex("taint"); i >= 0 && m[i] != "" {
			r.taint = strings.ReplaceAll(m[i], " ", "")
		}
	}
}

// trampoline returns the first trampoline frame of the report: its
// instruction pointers, then its call trace.
func (r *report) trampoline() string {
	for _, fn := range append(append([]string(nil), r.ips...), r.stack.stack()...) {
		if rules.trampoline.MatchString(fn) {
			return fn
		}
	}
	return ""
}
