// Package monitor runs one cell on any target: it reads the target's
// console and agent streams, finds kernel reports as they arrive, keeps the
// watchdogs (no output, overall deadline, the tail after a hang report, the
// grace after a panic or a reset), collects forensics before teardown, and
// writes the verdict and the result files as it goes. A QEMU VM and an SSH
// board are both machine.Instances; neither has a loop of its own.
package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/hang"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/event"
)

// Spec bounds one cell.
type Spec struct {
	// Timeouts are every wait of the cell, scaled by the caller for the
	// target (NewTimeouts); graces left zero get NewTimeouts' defaults.
	Timeouts Timeouts
	// PauseAfter, if set, pauses the target that long after the agent's
	// hello (a machine.Pauser only): a host-side hang, to prove the
	// watchdog works.
	PauseAfter time.Duration
	// Progress shows the agent's long phases; nil logs a line every 5 s.
	Progress *progress.Reporter
	// IncludeKnown counts the known findings (results/known) as failures,
	// for reproducing them; otherwise a failure that the known trigger in
	// flight explains is reported as known and passes.
	IncludeKnown bool
	// SurvivesPanic is set for targets that come back from a panic by
	// themselves and report it (a board reboots; machine.Rebooted): a
	// panic then does not end the cell after its grace (Graces.Panic).
	SurvivesPanic bool
	// StopAtFinding ends the cell Graces.Finding after the first kernel
	// report of any kind, as a hang report's tail does: for runs that ask
	// only whether the kernel fails (fth mutate), not what else it does
	// after an oops, which may be to limp on for the whole deadline.
	StopAtFinding bool
	// Harness names the harness's own threads in the guest, so that a
	// stall its real-time load caused is told from a kernel hang.
	Harness hang.Harness
}

// Outcome is how a cell's run ended; result.json's "ended" names it. The
// constants are End-prefixed because an outcome is the monitor's judgement,
// not the target event it may follow: a machine.Reset after the agent's done
// ends the cell EndDone.
type Outcome int

const (
	// EndExited: the target went away (QEMU exited, the agent process ended).
	EndExited Outcome = iota
	// EndDone: the agent reported done.
	EndDone
	// EndSilence: no output for Spec.Silence.
	EndSilence
	// EndDeadline: Spec.Deadline passed.
	EndDeadline
	// EndInterrupted: the context ended (Ctrl-C).
	EndInterrupted
	// EndPanic: the console showed a kernel panic and the guest neither reset
	// nor exited within Graces.Panic.
	EndPanic
	// EndReset: the guest reset the machine itself before done.
	EndReset
	// EndHangReport: a hang report's tail ran out while the guest still talked.
	EndHangReport
	// EndRebooted: a board rebooted and the target did not resume the agent.
	EndRebooted
	// EndUnreachable: a board did not come back.
	EndUnreachable
	// EndOracle: with StopAtFinding, the tail after an oracle's first
	// failure ran out; the kernel is still running.
	EndOracle
	// NumOutcomes counts the outcomes above; it is none itself.
	NumOutcomes
)

// outcomes is each outcome's facts, in one row: its name in result.json's
// "ended"; diagnosed, whether it leaves a guest worth examining before
// teardown (stopped, stuck, or still running when it should not be); hung,
// whether the guest stopped making progress, so that the kernel is asked
// why (sysrq) and the hang explained.
var outcomes = [NumOutcomes]struct {
	name            string
	diagnosed, hung bool
}{
	EndExited:      {name: "exited"},
	EndDone:        {name: "done"},
	EndSilence:     {name: "silence", diagnosed: true, hung: true},
	EndDeadline:    {name: "deadline", diagnosed: true, hung: true},
	EndInterrupted: {name: "interrupted"},
	EndPanic:       {name: "panic", diagnosed: true},
	EndReset:       {name: "reset", diagnosed: true},
	EndHangReport:  {name: "hang-report", diagnosed: true, hung: true},
	EndRebooted:    {name: "rebooted"},
	EndUnreachable: {name: "unreachable"},
	EndOracle:      {name: "oracle"},
}

// String is the outcome as result.json's "ended" names it.
func (o Outcome) String() string {
	if o >= 0 && o < NumOutcomes {
		return outcomes[o].name
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

func (o Outcome) diagnosed() bool { return o >= 0 && o < NumOutcomes && outcomes[o].diagnosed }

func (o Outcome) hung() bool { return o >= 0 && o < NumOutcomes && outcomes[o].hung }

// endsCell reports whether a finding of this kind ends the cell HangTail
// later. Oopses, WARNs and lockdep splats do not: the kernel goes on, and
// the rest of the run can still find more.
func endsCell(k console.Kind) bool { return k.Hang() }

// keepOps is how many completed operations result.json keeps before the
// one in flight.
const keepOps = 5

// FromConsole is a console finding as result.json records it; source is ""
// for the live console, or where a recovered report came from.
func FromConsole(source string, f console.Finding) results.Finding {
	return results.Finding{
		Source: source, Kind: f.Kind, Title: f.Title, Function: f.Function,
		StartLine: f.StartLine, EndLine: f.EndLine, Report: f.Report, Stack: f.Stack,
	}
}

// run is one cell's state while the monitor reads it.
type run struct {
	log  *slog.Logger
	w    *results.CellWriter
	inst machine.Instance
	spec Spec

	con, ev *results.LineLog
	det     *console.Detector

	start       time.Time
	hello, done bool
	// kernel is the release the agent reported, for known findings.
	kernel string
	// conLines counts the console lines given to the detector; opLine is
	// the count when the operation in flight began, so that only reports
	// that began after it are put down to it.
	conLines, opLine int
	lastOut          time.Time
	// waiting is set while a board is unreachable: no silence then.
	waiting         bool
	lastProgressLog time.Time
	recentOps       []event.Op
	inFlight        *event.Op

	tail, dead, resetSettled, pauseAt <-chan time.Time
	// tailOut is how the cell ends when tail runs out: EndOracle when a
	// failed oracle started it, EndHangReport when a console report did.
	tailOut Outcome
	// recent holds the last console lines, for explaining a hang.
	recent []string
	// explained is what the console said about a hang, once asked.
	explained *hang.Explanation
	// exitErr and stderr are the target's own account of an end (a failed
	// deploy, QEMU's stderr), quoted when the guest vanished without a
	// report.
	exitErr error
	stderr  string
}

// Run reads inst until the cell ends, then tears it down and writes the
// verdict into w. The error is for the harness's own failures (the result
// files could not be written); what the kernel did is the verdict.
func Run(ctx context.Context, log *slog.Logger, w *results.CellWriter, inst machine.Instance, spec Spec) error {
	con, err := results.CreateLineLog(w.Path(results.ConsoleLog))
	if err != nil {
		return err
	}
	defer con.Close()
	ev, err := results.CreateLineLog(w.Path(results.EventsFile))
	if err != nil {
		return err
	}
	defer ev.Close()
	spec.Timeouts = spec.Timeouts.orDefault()
	m := &run{log: log, w: w, inst: inst, spec: spec, con: con, ev: ev, det: console.NewDetector(), start: time.Now()}
	m.lastOut = m.start
	out, _ := m.read(ctx, untilCellEnds)
	if out.diagnosed() {
		m.diagnose(ctx, out)
	}
	m.teardown(ctx, out)
	return m.finish(out)
}

// until is when a read of the target's events ends, besides the stream
// closing. Every read applies what it reads through handle: the monitor
// has one reader, and a line read late (while draining, while waiting
// for forensics) counts as any other.
type until struct {
	// cell: the cell's own ends end the read, handle's and the watchdogs'
	// (the reset, panic and hang tail timers, silence, the deadline, the
	// context), and the hang injection's pause is due.
	cell bool
	// max bounds the read; quiet ends it once nothing came for that long.
	// Zero is no bound.
	max, quiet time.Duration
	// gone ends the read at an event saying the guest went away; it is
	// not applied, since the cell's outcome is decided. Without gone such
	// events are skipped (a drain after Close reads to the stream's end).
	gone bool
}

// untilCellEnds is the cell's own read, which decides its outcome.
var untilCellEnds = until{cell: true}

// read takes the target's events through handle until u ends it. out is
// what ended a cell read; gone says the target went away (or its stream
// closed) before u's bounds were reached.
func (m *run) read(ctx context.Context, u until) (out Outcome, gone bool) {
	events := m.inst.Events()
	var tick, overall, limit, quiet <-chan time.Time
	if u.cell {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		d := time.NewTimer(m.spec.Timeouts.Deadline)
		defer d.Stop()
		tick, overall = t.C, d.C
	}
	if u.max > 0 {
		t := time.NewTimer(u.max)
		defer t.Stop()
		limit = t.C
	}
	var quietT *time.Timer
	if u.quiet > 0 {
		quietT = time.NewTimer(u.quiet)
		defer quietT.Stop()
		quiet = quietT.C
	}
	for {
		// The cell's own timers are nil, and never fire, outside its read.
		var resetSettled, dead, tail, pauseAt <-chan time.Time
		var interrupted <-chan struct{}
		if u.cell {
			resetSettled, dead, tail, pauseAt, interrupted = m.resetSettled, m.dead, m.tail, m.pauseAt, ctx.Done()
		}
		select {
		case e, ok := <-events:
			if !ok {
				return EndExited, true
			}
			if !u.cell && goneKind(e.Kind) {
				if u.gone {
					return EndExited, true
				}
				continue
			}
			if quietT != nil {
				quietT.Reset(u.quiet)
			}
			if out, end := m.handle(e); end && u.cell {
				return out, out == EndExited
			}
		case <-resetSettled:
			m.log.Warn("the guest reset itself before the agent reported done; the target holds it for forensics")
			return EndReset, false
		case <-dead:
			m.log.Warn("the guest panicked and did not reset", "grace", m.spec.Timeouts.Graces.Panic)
			return EndPanic, false
		case <-tail:
			return m.tailOut, false
		case <-pauseAt:
			m.pauseAt = nil
			m.pause(ctx)
		case <-tick:
			if !m.waiting && time.Since(m.lastOut) > m.spec.Timeouts.Silence {
				return EndSilence, false
			}
		case <-overall:
			return EndDeadline, false
		case <-interrupted:
			return EndInterrupted, false
		case <-limit:
			return 0, false
		case <-quiet:
			return 0, false
		}
	}
}

// goneKind says an event of kind k is the guest going away.
func goneKind(k machine.Kind) bool {
	switch k {
	case machine.Exited, machine.Reset, machine.Rebooted, machine.Unreachable:
		return true
	}
	return false
}

// handle takes one event; end says it ended the cell with out.
func (m *run) handle(e machine.Event) (out Outcome, end bool) {
	switch e.Kind {
	case machine.Console:
		if !m.hello {
			m.lastOut = time.Now()
		}
		if e.History {
			_ = m.con.Line(e.Text)
			return 0, false
		}
		m.consoleLine(e.Text)
	case machine.Agent:
		m.lastOut = time.Now()
		return m.agentLine(e.Text)
	case machine.Exited:
		if e.Err != nil {
			m.log.Info("target exited", "err", e.Err)
			m.exitErr = e.Err
		}
		return EndExited, true
	case machine.Reset:
		if m.resetSettled == nil {
			m.resetSettled = time.After(m.spec.Timeouts.Graces.Reset)
		}
	case machine.Lost:
		m.log.Warn("lost the target; waiting for it to come back")
		m.waiting = true
	case machine.Back:
		m.log.Info("the target is back, same boot")
		m.waiting, m.lastOut = false, time.Now()
	case machine.Rebooted:
		m.waiting, m.lastOut = false, time.Now()
		return m.rebooted(e)
	case machine.Unreachable:
		m.addFindings(results.Finding{Source: "board", Kind: console.KindBoardLost, Title: "board unreachable after a lost connection"})
		m.log.Warn("the target did not come back", "err", e.Err)
		return EndUnreachable, true
	}
	return 0, false
}

// consoleLine records a kernel log line and what the detector makes of it.
func (m *run) consoleLine(line string) {
	_ = m.con.Line(line)
	m.conLines++
	if len(m.recent) >= recentLines {
		m.recent = append(m.recent[:0], m.recent[len(m.recent)-recentLines/2:]...)
	}
	m.recent = append(m.recent, line)
	m.addConsole(m.det.Line(line))
	if m.tail != nil && m.dead != nil {
		return
	}
	// Both clocks start at a report's header: a report has no end marker,
	// and after a panic or in a partial hang the console may print nothing
	// more for minutes.
	for _, k := range m.det.OpenKinds() {
		if m.tail == nil && m.spec.StopAtFinding {
			// The report's header is enough to stop on; the tail lets
			// its stack and what follows reach the log.
			m.log.Info("a kernel report began; the cell ends after its tail (stop at the first finding)", "kind", k, "tail", m.spec.Timeouts.Graces.Finding)
			m.tail, m.tailOut = time.After(m.spec.Timeouts.Graces.Finding), EndHangReport
		}
		if m.tail == nil && endsCell(k) {
			m.log.Info("the console reported a hang; the cell ends after its tail", "kind", k, "tail", m.spec.Timeouts.HangTail)
			m.tail, m.tailOut = time.After(m.spec.Timeouts.HangTail), EndHangReport
		}
		if m.dead == nil && k == console.KindPanic && !m.spec.SurvivesPanic {
			m.dead = time.After(m.spec.Timeouts.Graces.Panic)
		}
	}
}

// agentLine records one agent event and folds it into the result.
func (m *run) agentLine(line string) (Outcome, bool) {
	_ = m.ev.Line(line)
	var ev event.Event
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		m.log.Debug("agent: not an event", "line", line)
		return 0, false
	}
	switch ev.Kind {
	case event.KindHello:
		m.hello = true
		m.kernel = ev.Hello.KernelRelease
		boot := time.Since(m.start)
		m.log.Info("agent ready", "after", boot.Round(time.Millisecond), "kernel", ev.Hello.KernelRelease, "preempt", ev.Hello.PreemptModel)
		m.update(func(r *results.Result) {
			if r.Timings.BootToAgentSeconds == 0 {
				r.Timings.BootToAgentSeconds = boot.Seconds()
			}
			results.Apply(r, ev)
		})
		if m.spec.PauseAfter > 0 {
			m.pauseAt = time.After(m.spec.PauseAfter)
		}
	case event.KindProgress:
		if m.spec.Progress != nil {
			m.spec.Progress.Update(m.w.Result().Cell+" "+ev.Progress.Phase, ev.Progress.Done, ev.Progress.Total, "")
		} else if time.Since(m.lastProgressLog) > 5*time.Second {
			m.lastProgressLog = time.Now()
			m.log.Info("progress", "phase", ev.Progress.Phase, "done", ev.Progress.Done, "total", ev.Progress.Total)
		}
	case event.KindOp:
		if m.inFlight != nil {
			m.recentOps = append(m.recentOps, *m.inFlight)
			if len(m.recentOps) > keepOps {
				m.recentOps = m.recentOps[1:]
			}
		}
		m.inFlight, m.opLine = ev.Op, m.conLines
	case event.KindLog:
		m.log.Info("agent: " + ev.Log)
	default:
		switch ev.Kind {
		case event.KindPhase:
			m.inFlight, m.recentOps = nil, nil
			p := ev.Phase
			m.log.Info("phase done", "phase", p.Name, "ok", p.Succeeded, "failed", p.Failed, "median", p.Latency.Median, "p99", p.Latency.P99, "wall", p.Wall)
		case event.KindOracle:
			switch o := ev.Oracle; {
			case o.OK || o.Skipped != "":
			case o.Checks > 0:
				// A summary: its failures were logged one by one.
				m.log.Warn("oracle failed", "oracle", o.Name, "checks", o.Checks, "failures", o.Failures, "msg", o.Msg)
			default:
				m.log.Warn("oracle failed", "oracle", o.Name, "function", o.Function, "expected", o.Expected, "got", o.Got, "msg", o.Msg)
				m.oracleFailed()
			}
		case event.KindInventory:
			m.log.Info("inventory", "traceable", ev.Inventory.Traceable, "btf", ev.Inventory.WithBTF, "candidates", ev.Inventory.Candidates, "selected", ev.Inventory.Selected)
		}
		// Every other kind goes to result.json: results.Apply decides what
		// it keeps, so a new kind needs no change here.
		m.update(func(r *results.Result) { results.Apply(r, ev) })
		if ev.Kind == event.KindDone {
			m.done = true
			return EndDone, true
		}
	}
	return 0, false
}

// oracleFailed notes when an oracle first failed and, with StopAtFinding,
// ends the cell after the same tail a kernel report gets: a failed oracle
// decides the verdict as a report does, and the campaign's remaining
// stages would only add minutes to a cell already failed (an x86_64
// mutant the delivery oracle caught at 225 s ran on to 440 s).
func (m *run) oracleFailed() {
	at := time.Since(m.start).Seconds()
	m.update(func(r *results.Result) {
		if r.Timings.OracleFailedSeconds == 0 {
			r.Timings.OracleFailedSeconds = at
		}
	})
	if m.tail == nil && m.spec.StopAtFinding {
		m.log.Info("an oracle failed; the cell ends after its tail (stop at the first finding)", "tail", m.spec.Timeouts.Graces.Finding)
		m.tail, m.tailOut = time.After(m.spec.Timeouts.Graces.Finding), EndOracle
	}
}

// rebooted handles a board's new boot: the report still open in the old
// boot's log is closed and kept, what the target recovered is recorded,
// and the cell goes on only if the agent runs again.
func (m *run) rebooted(e machine.Event) (Outcome, bool) {
	m.log.Warn("the target rebooted", "boot_id", e.BootID, "resumed", e.Resumed)
	m.addConsole(m.det.Flush())
	m.det = console.NewDetector()
	m.tail, m.dead = nil, nil
	_ = m.con.Line(fmt.Sprintf("---- fth: rebooted (boot_id %s) ----", e.BootID))
	if len(e.Findings) > 0 {
		m.addFindings(e.Findings...)
	} else {
		m.addFindings(results.Finding{Source: "board", Kind: console.KindReboot, Title: "board rebooted during the soak (no pstore record)"})
	}
	if !e.Resumed {
		return EndRebooted, true
	}
	m.hello, m.done, m.inFlight, m.recentOps = false, false, nil, nil
	return 0, false
}

func (m *run) pause(ctx context.Context) {
	p, ok := m.inst.(machine.Pauser)
	if !ok {
		m.log.Warn("this target cannot be paused; the hang injection is skipped")
		return
	}
	m.log.Info("pausing the target (hang injection)")
	if err := p.Pause(ctx); err != nil {
		m.log.Warn("pause failed", "err", err)
	}
}

// addConsole records live console findings; a panic starts Graces.Panic.
func (m *run) addConsole(fs []console.Finding) {
	var rs []results.Finding
	for _, f := range fs {
		if f.Kind == console.KindPanic && m.dead == nil && !m.spec.SurvivesPanic {
			m.dead = time.After(m.spec.Timeouts.Graces.Panic)
		}
		rs = append(rs, FromConsole("", f))
	}
	m.addFindings(rs...)
}

func (m *run) addFindings(fs ...results.Finding) {
	if len(fs) == 0 {
		return
	}
	for _, f := range fs {
		m.log.Warn("kernel report", "title", f.Title, "source", f.Source, "line", f.StartLine)
	}
	m.update(func(r *results.Result) { r.AddFindings(fs...) })
}

func (m *run) update(f func(*results.Result)) { _ = m.w.Update(f) }

// teardown stops the target and reads what is still in flight.
func (m *run) teardown(ctx context.Context, out Outcome) {
	if out == EndDone {
		// The guest goes away after done (QEMU pauses on the agent's
		// reboot; a board's agent exits); a last report may still come.
		m.read(ctx, until{max: m.spec.Timeouts.Graces.Done, gone: true})
	}
	var shutdown string
	tripleFault := false
	if re, ok := m.inst.(machine.ResetExplainer); ok {
		shutdown = re.ShutdownReason()
		tripleFault = out == EndReset && re.TripleFault()
	}
	if s, ok := m.inst.(machine.Stderrer); ok {
		m.stderr = s.Stderr()
	}
	_ = m.inst.Close()
	// What the target still holds after Close.
	m.read(ctx, until{quiet: m.spec.Timeouts.Graces.Drain})
	m.addConsole(m.det.Flush())
	m.update(func(r *results.Result) {
		r.Ended, r.Shutdown = out.String(), shutdown
		// A reset is a finding only when the console explains nothing:
		// after a panic it is just the reboot panic=-1 asked for.
		if out == EndReset && len(r.Findings) == 0 {
			r.AddFindings(results.Finding{Kind: console.KindReset, Title: silentResetTitle(tripleFault)})
		}
		if out == EndSilence {
			f := results.Finding{Kind: console.KindHang, Title: fmt.Sprintf("hang: no output for %s", m.spec.Timeouts.Silence)}
			if e := m.explained; e != nil && e.Title != "" {
				f.Kind, f.Title = e.Kind, e.Title
				f.Report = fmt.Sprintf("no output for %s; the kernel, asked with sysrq, shows:\n%s", m.spec.Timeouts.Silence, strings.Join(e.Evidence, "\n"))
			}
			r.AddFindings(f)
		}
		if m.explained != nil {
			r.Hang = m.explained
		}
	})
}

// finish writes the verdict.
func (m *run) finish(out Outcome) error {
	elapsed := time.Since(m.start)
	return m.w.Update(func(r *results.Result) {
		r.Timings.GuestSeconds = elapsed.Seconds()
		// The operation in flight when the guest failed names a known
		// finding's trigger: the reports are that finding.
		if m.inFlight != nil && !m.done {
			if k, ok := known.Triggered(m.inFlight.Phase, m.inFlight.Function, m.kernel); ok {
				for i, f := range r.Findings {
					// A report that began before the trigger did is not
					// its doing; the harness's own findings have no line.
					if f.Source == "" && (f.StartLine == 0 || f.StartLine > m.opLine) {
						r.Findings[i].Known = k.ID
					}
				}
			}
		}
		// The kernel's stall reports of a stall the harness caused are
		// reported with the explanation, not counted as the kernel's.
		if e := m.explained; e != nil && e.Kind == console.KindHarnessInduced {
			for i, f := range r.Findings {
				if slices.Contains(stallKinds, f.Kind) {
					r.Findings[i].Induced = e.Title
				}
			}
		}
		// init exits when its child, the agent, dies, and the kernel
		// panics: after an agent crash (its own bug, or a syscall's
		// impossible return) that panic is the crash's.
		if i := slices.IndexFunc(r.Findings, func(f results.Finding) bool {
			return f.Kind == console.KindAgentCrash || f.Kind == console.KindBadSyscallReturn
		}); i >= 0 {
			for j := i + 1; j < len(r.Findings); j++ {
				if f := &r.Findings[j]; f.Kind == console.KindPanic && strings.Contains(f.Title, "Attempted to kill init") {
					f.Induced = r.Findings[i].Title
				}
			}
		}
		// A trap in freed trampoline memory is named after the image.
		results.AttributeFreedImage(r)
		// A kernel that died right after a race injection released its
		// task: the injection is the crash's, and names where it was.
		results.AttributeInjection(r)
		var why []string
		if m.exitErr != nil {
			why = append(why, m.exitErr.Error())
		}
		if s := strings.TrimSpace(m.stderr); s != "" {
			why = append(why, "target stderr: "+s)
		}
		r.Verdict, r.Reason = Verdict(r, out, m.done, m.spec, strings.Join(why, "; "))
		// A cell stopped after an oracle's failure was still running:
		// what it was doing then is not what failed.
		if m.inFlight != nil && !m.done && r.Verdict != results.Pass && out != EndOracle {
			r.InFlight, r.RecentOps = m.inFlight, m.recentOps
			r.Reason += fmt.Sprintf(" (during %s #%d: %s)", m.inFlight.Phase, m.inFlight.Index, m.inFlight.Function)
		}
	})
}

// stallKinds are the console reports a harness-induced stall explains; an
// oops or a WARN is never the harness's doing.
var stallKinds = []console.Kind{console.KindRCUStall, console.KindHungTask, console.KindWorkqueueStall, console.KindHang}

// silentResetTitle names a reset that left no report on the console. On
// x86 that is what a triple fault does (a fault while the double-fault
// handler runs, typically a blown stack), and QEMU's reset log says so;
// otherwise the kernel asked the machine for a reset without printing why.
func silentResetTitle(tripleFault bool) string {
	if tripleFault {
		return "reset: the guest reset with no console report (QEMU logged a triple fault)"
	}
	return "reset: the guest reset with no console report"
}

// Verdict combines the findings, how the cell ended, the agent's own view
// and liveness: the guest never decides alone. Findings come first, so a
// kernel report is a fail however the cell ended, on any target.
// why is the target's own account of how the guest ended, if any.
func Verdict(r *results.Result, out Outcome, done bool, spec Spec, why string) (results.Verdict, string) {
	// Only the headline's findings are read here: its step for a failure
	// that is not a finding looks at r.Verdict, which this decides.
	h := r.Headline(spec.IncludeKnown)
	switch {
	case h.Finding != nil && h.Counted:
		return results.Fail, h.Title
	case h.Finding != nil && h.Finding.HarnessCaused():
		// The harness starved the guest itself: the kernel was not tested
		// to the end, and did nothing wrong that the console shows.
		if h.Finding.Induced != "" {
			return results.Error, h.Finding.Induced
		}
		return results.Error, h.Finding.Title
	case h.Finding != nil:
		return results.Pass, fmt.Sprintf("known finding %s ended the run (%s), not counted: --include-known counts it", h.Finding.Known, h.Finding.Title)
	case out == EndSilence:
		return results.Fail, fmt.Sprintf("hang: no output for %s", spec.Timeouts.Silence)
	}
	// A failed oracle is the kernel's failure however the cell ended
	// after it: stopped on purpose (EndOracle), interrupted, out of time,
	// or the guest gone without a report.
	if o, ok := results.FailedOracle(r.Oracles); ok {
		return results.Fail, o
	}
	switch {
	case out == EndInterrupted:
		return results.Error, "interrupted"
	case out == EndDeadline:
		return results.Error, fmt.Sprintf("cell deadline of %s passed while the guest was still talking", spec.Timeouts.Deadline)
	case out == EndOracle:
		return results.Error, "the cell stopped on an oracle failure that result.json does not hold"
	case !done:
		msg := "the guest stopped before the agent reported done, and the console shows no report"
		if why != "" {
			msg += "; " + why
		}
		return results.Error, msg
	case r.Liveness != nil && len(r.Liveness.Stalled) > 0:
		return results.Fail, fmt.Sprintf("liveness: %d hammer thread(s) stalled", len(r.Liveness.Stalled))
	}
	switch {
	case r.AgentOK == nil || *r.AgentOK:
	case r.AgentUnjudged:
		return results.Error, "agent: " + r.AgentReason
	default:
		return results.Fail, "agent: " + r.AgentReason
	}
	return results.Pass, ""
}
