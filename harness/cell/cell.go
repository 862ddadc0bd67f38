// Package cell runs one matrix cell: boot a built kernel and initramfs, watch
// the console and the agent channel, enforce deadlines, and combine everything
// into a verdict written to the cell's directory as it happens.
package cell

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/progress"
	"github.com/ftrace-harness/fth/harness/target/qemu"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/event"
)

// Spec is everything a cell needs beyond the built artifacts.
type Spec struct {
	VM qemu.Config
	// AgentArgs become fth.<key>=<value> kernel parameters, which the agent reads.
	AgentArgs map[string]string
	// Deadline bounds the whole boot, scaled by the arch's TimeoutScale.
	Deadline time.Duration
	// Silence is the no-output watchdog: before the agent says hello, the
	// console must speak this often; after, the agent must (it reports
	// liveness every 2 s).
	Silence time.Duration
	// PauseAfter, if set, stops the VM over QMP that long after the agent's
	// hello: a host-side hang injection to prove the watchdog works.
	PauseAfter time.Duration
	// Progress, if set, shows the agent's long phases (attach, detach,
	// churn); nil logs a line every 5 s instead.
	Progress *progress.Reporter
}

// agentCmdline renders AgentArgs in a stable order, so repros are comparable.
func agentCmdline(args map[string]string) []string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("fth.%s=%s", k, args[k]))
	}
	return out
}

type outcome int

const (
	outExited outcome = iota
	outDone
	outHang
	outDeadline
	outInterrupted
	// outDead: the console showed a kernel panic and QEMU did not exit on its
	// own (a panic that cannot reboot, as riscv64 under QEMU 7.2 can't).
	outDead
	// outReset: the guest reset the machine before the agent reported done.
	// After a panic that is the reboot panic=-1 asks for; with nothing on the
	// console it is a reset the kernel never announced, such as an x86
	// triple fault.
	outReset
	// outHangReported: the console reported a hang (a hung task, an RCU or
	// workqueue stall, a lockup) and hangTail has passed since, while
	// something in the guest still talked, so neither the silence watchdog
	// nor done ended the cell.
	outHangReported
	// numOutcomes counts the outcomes above; it is none itself.
	numOutcomes
)

// String is the outcome as result.json's "ended" names it.
func (o outcome) String() string {
	switch o {
	case outExited:
		return "exited"
	case outDone:
		return "done"
	case outHang:
		return "silence"
	case outDeadline:
		return "deadline"
	case outInterrupted:
		return "interrupted"
	case outDead:
		return "panic"
	case outReset:
		return "reset"
	case outHangReported:
		return "hang-report"
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// hangTail is how long a cell goes on after the header of the console's
// first hang report, before the arch's timeout scale. A hang that stops only
// some tasks leaves the agent talking, and the cell would otherwise run to
// its deadline (30 minutes by default) with nothing more to learn: the
// report and its stacks arrive within seconds, and so do the NMI backtraces
// and task dumps a stall report asks for.
const hangTail = 60 * time.Second

// endsCell reports whether a finding of this kind ends the cell hangTail
// later. Oopses, WARNs and lockdep splats do not: the kernel goes on, and
// the rest of the run can still find more.
func endsCell(k console.Kind) bool {
	switch k {
	case console.KindHungTask, console.KindRCUStall, console.KindWorkqueueStall, console.KindSoftLockup, console.KindHardLockup:
		return true
	}
	return false
}

// resetGrace is how long the loop keeps reading after QEMU reports a guest
// reset: the agent's last events and the console's last lines may still be
// in flight, and a done among them makes the reset the agent's own orderly
// end rather than a finding.
const resetGrace = 2 * time.Second

// panicGrace is how long a panicked guest gets to reset (panic=-1, which
// QEMU turns into a stop) before the harness stops waiting: the report is complete
// by then, and the silence watchdog would waste minutes.
const panicGrace = 15 * time.Second

type lineMsg struct {
	agent bool
	text  string
}

// Run boots the VM described by spec and records everything in w. The returned
// error is an infrastructure error (QEMU would not start); kernel misbehaviour
// is a verdict, not an error.
func Run(ctx context.Context, log *slog.Logger, w *results.CellWriter, spec Spec) error {
	spec.VM.Cmdline = append(spec.VM.Cmdline, agentCmdline(spec.AgentArgs)...)
	scale := spec.VM.Arch.TimeoutScale
	deadline := time.Duration(float64(spec.Deadline) * scale)
	silence := time.Duration(float64(spec.Silence) * scale)
	_ = w.Update(func(r *results.Result) {
		r.Accel = string(spec.VM.Accel)
		r.CPUs = spec.VM.CPUs
		r.Cmdline = spec.VM.KernelCmdline()
		r.Repro = spec.VM.Repro()
	})

	conLog, err := results.CreateLineLog(w.Path("console.log"))
	if err != nil {
		return err
	}
	defer conLog.Close()
	evLog, err := results.CreateLineLog(w.Path("events.jsonl"))
	if err != nil {
		return err
	}
	defer evLog.Close()

	start := time.Now()
	vm, err := qemu.Start(ctx, log, spec.VM)
	if err != nil {
		return err
	}
	defer vm.Close()

	lines := make(chan lineMsg, 256)
	readersDone := make(chan struct{}, 2)
	go readLines(vm.Console(), false, lines, readersDone)
	go readLines(vm.Agent(), true, lines, readersDone)

	det := console.NewDetector()
	var dead, tail <-chan time.Time
	// The tail starts at a hang report's header, which the detector knows
	// long before the report ends: a hang report has no end marker, and in
	// a partial hang the console may print nothing after it for minutes.
	startTail := func(kinds []console.Kind) {
		for _, k := range kinds {
			if endsCell(k) {
				t := time.Duration(float64(hangTail) * scale)
				log.Info("the console reported a hang; the cell ends after its tail", "kind", k, "tail", t)
				tail = time.After(t)
				return
			}
		}
	}
	addFindings := func(fs []console.Finding) {
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			if f.Kind == console.KindPanic && dead == nil {
				dead = time.After(panicGrace)
			}
		}
		_ = w.Update(func(r *results.Result) {
			for _, f := range fs {
				log.Warn("kernel report", "title", f.Title, "line", f.StartLine)
				r.Findings = append(r.Findings, results.Finding{
					Kind: string(f.Kind), Title: f.Title, Function: f.Function,
					StartLine: f.StartLine, EndLine: f.EndLine, Report: f.Report, Stack: f.Stack,
				})
			}
		})
	}

	const keepOps = 5
	var (
		recentOps       []event.Op
		inFlight        *event.Op
		hello, done     bool
		lastOut         = time.Now()
		lastProgressLog time.Time
		pauseAt         <-chan time.Time
		guestReset      = vm.GuestReset()
		resetSettled    <-chan time.Time
		tick            = time.NewTicker(time.Second)
		overall         = time.After(deadline)
		res             outcome
	)
	defer tick.Stop()
loop:
	for {
		select {
		case m := <-lines:
			if !m.agent {
				lastOut = maybe(lastOut, !hello)
				_ = conLog.Line(m.text)
				addFindings(det.Line(m.text))
				if tail == nil {
					startTail(det.OpenKinds())
				}
				continue
			}
			lastOut = time.Now()
			_ = evLog.Line(m.text)
			var ev event.Event
			if err := json.Unmarshal([]byte(m.text), &ev); err != nil {
				log.Debug("agent: not an event", "line", m.text)
				continue
			}
			switch ev.Kind {
			case event.KindHello:
				hello = true
				boot := time.Since(start)
				log.Info("agent ready", "boot", boot.Round(time.Millisecond), "kernel", ev.Hello.KernelRelease, "preempt", ev.Hello.PreemptModel)
				_ = w.Update(func(r *results.Result) {
					r.Timings.BootToAgentSeconds = boot.Seconds()
					results.Apply(r, ev)
				})
				if spec.PauseAfter > 0 {
					pauseAt = time.After(spec.PauseAfter)
				}
			case event.KindProgress:
				if spec.Progress != nil {
					spec.Progress.Update(w.Result().Cell+" "+ev.Progress.Phase, ev.Progress.Done, ev.Progress.Total, "")
				} else if time.Since(lastProgressLog) > 5*time.Second {
					lastProgressLog = time.Now()
					log.Info("progress", "phase", ev.Progress.Phase, "done", ev.Progress.Done, "total", ev.Progress.Total)
				}
			case event.KindOp:
				if inFlight != nil {
					recentOps = append(recentOps, *inFlight)
					if len(recentOps) > keepOps {
						recentOps = recentOps[1:]
					}
				}
				inFlight = ev.Op
			case event.KindPhase:
				inFlight, recentOps = nil, nil
				p := ev.Phase
				log.Info("phase done", "phase", p.Name, "ok", p.Succeeded, "failed", p.Failed, "median", p.Latency.Median, "p99", p.Latency.P99, "wall", p.Wall)
				_ = w.Update(func(r *results.Result) { results.Apply(r, ev) })
			case event.KindOracle:
				if o := ev.Oracle; !o.OK && o.Skipped == "" {
					log.Warn("oracle failed", "oracle", o.Name, "function", o.Function, "expected", o.Expected, "got", o.Got, "msg", o.Msg)
				}
				_ = w.Update(func(r *results.Result) { results.Apply(r, ev) })
			case event.KindInventory:
				log.Info("inventory", "traceable", ev.Inventory.Traceable, "btf", ev.Inventory.WithBTF, "candidates", ev.Inventory.Candidates, "selected", ev.Inventory.Selected)
				_ = w.Update(func(r *results.Result) { results.Apply(r, ev) })
			case event.KindTransition, event.KindFeature, event.KindPreempt, event.KindHotSet, event.KindLiveness, event.KindBench:
				_ = w.Update(func(r *results.Result) { results.Apply(r, ev) })
			case event.KindLog:
				log.Info("agent: " + ev.Log)
			case event.KindDone:
				done = true
				_ = w.Update(func(r *results.Result) { results.Apply(r, ev) })
				res = outDone
				break loop
			}
		case <-readersDone:
			// The console closes when QEMU exits; the agent socket too.
			select {
			case <-vm.Exited():
				res = outExited
				break loop
			case <-time.After(2 * time.Second):
			}
		case <-guestReset:
			guestReset, resetSettled = nil, time.After(resetGrace)
		case <-resetSettled:
			log.Warn("the guest reset itself before the agent reported done; QEMU holds it paused for the register dump", "reason", vm.ShutdownReason())
			res = outReset
			break loop
		case <-dead:
			log.Warn("the guest panicked and did not reset", "grace", panicGrace)
			res = outDead
			break loop
		case <-tail:
			res = outHangReported
			break loop
		case <-pauseAt:
			log.Info("pausing the VM over QMP (hang injection)")
			if err := vm.Pause(ctx); err != nil {
				log.Warn("pause failed", "err", err)
			}
		case <-tick.C:
			if time.Since(lastOut) > silence {
				res = outHang
				break loop
			}
		case <-overall:
			res = outDeadline
			break loop
		case <-ctx.Done():
			res = outInterrupted
			break loop
		}
	}

	switch res {
	case outHang, outDeadline, outDead, outReset, outHangReported:
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		dump := vm.Diagnose(dctx)
		cancel()
		if err := os.WriteFile(w.Path("registers.txt"), []byte(dump), 0o644); err != nil {
			log.Warn("write register dump", "err", err)
		}
		_ = w.Update(func(r *results.Result) { r.Registers = "registers.txt" })
		vm.Kill()
	case outDone:
		// The agent restarts the guest after done, which QEMU turns into a
		// pause (see qemu.Config.Reboot); give the console a moment to deliver
		// any last report, then stop waiting.
		select {
		case <-vm.Exited():
		case <-vm.GuestReset():
		case <-time.After(10 * time.Second):
		}
	}
	tripleFault := res == outReset && vm.TripleFault() // Close removes QEMU's log
	shutdown := vm.ShutdownReason()
	vm.Close()
	drain(lines, conLog, evLog, det, addFindings)
	addFindings(det.Flush())

	elapsed := time.Since(start)
	return w.Update(func(r *results.Result) {
		r.Timings.GuestSeconds = elapsed.Seconds()
		r.Ended, r.Shutdown = res.String(), shutdown
		// A reset is a finding only when the console explains nothing: after
		// a panic it is just the reboot panic=-1 asked for.
		if res == outReset && len(r.Findings) == 0 {
			r.Findings = append(r.Findings, results.Finding{Kind: "reset", Title: silentResetTitle(tripleFault)})
		}
		r.Verdict, r.Reason = verdict(r, res, done, silence, deadline, vm.Stderr())
		if inFlight != nil && !done && r.Verdict != results.Pass {
			r.InFlight, r.RecentOps = inFlight, recentOps
			r.Reason += fmt.Sprintf(" (during %s #%d: %s)", inFlight.Phase, inFlight.Index, inFlight.Function)
		}
		if res == outHang {
			r.Findings = append(r.Findings, results.Finding{Kind: "hang", Title: fmt.Sprintf("hang: no output for %s", silence)})
			if r.Verdict == results.Fail && r.Reason == "" {
				r.Reason = r.Findings[0].Title
			}
		}
	})
}

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

func maybe(t time.Time, update bool) time.Time {
	if update {
		return time.Now()
	}
	return t
}

// verdict combines the console findings, how the boot ended, the agent's own
// view and liveness. The guest never decides alone.
func verdict(r *results.Result, res outcome, done bool, silence, deadline time.Duration, qemuStderr string) (results.Verdict, string) {
	switch {
	case len(r.Findings) > 0:
		return results.Fail, r.Findings[0].Title
	case res == outHang:
		return results.Fail, fmt.Sprintf("hang: no output for %s", silence)
	case res == outInterrupted:
		return results.Error, "interrupted"
	case res == outDeadline:
		return results.Error, fmt.Sprintf("cell deadline of %s passed while the guest was still talking", deadline)
	case !done:
		msg := "the guest stopped before the agent reported done, and the console shows no report"
		if s := strings.TrimSpace(qemuStderr); s != "" {
			msg += "; qemu stderr: " + s
		}
		return results.Error, msg
	case r.Liveness != nil && len(r.Liveness.Stalled) > 0:
		return results.Fail, fmt.Sprintf("liveness: %d hammer thread(s) stalled", len(r.Liveness.Stalled))
	}
	if o, ok := results.FailedOracle(r.Oracles); ok {
		return results.Fail, o
	}
	if r.AgentOK != nil && !*r.AgentOK {
		return results.Fail, "agent: " + r.AgentReason
	}
	return results.Pass, ""
}

func readLines(r io.Reader, agent bool, out chan<- lineMsg, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		out <- lineMsg{agent: agent, text: strings.TrimRight(sc.Text(), "\r")}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		out <- lineMsg{agent: false, text: fmt.Sprintf("fth: reading %s: %v", map[bool]string{true: "agent", false: "console"}[agent], err)}
	}
}

// drain records what the readers still hold after QEMU is gone.
func drain(lines <-chan lineMsg, conLog, evLog *results.LineLog, det *console.Detector, add func([]console.Finding)) {
	for {
		select {
		case m := <-lines:
			if m.agent {
				_ = evLog.Line(m.text)
			} else {
				_ = conLog.Line(m.text)
				add(det.Line(m.text))
			}
		case <-time.After(500 * time.Millisecond):
			return
		}
	}
}
