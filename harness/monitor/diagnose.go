package monitor

import (
	"context"
	"fmt"
	"os"

	"github.com/ftrace-harness/fth/harness/machine"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/hang"
)

// recentLines is how many console lines a run keeps in memory to explain a
// hang: the stall warnings before it and the sysrq output after it.
const recentLines = 4000

// sysrqKeys are what the monitor asks a stuck kernel, in order: the
// blocked tasks with their stacks (w), then every task and the runqueues
// (t, whose scheduler dump says what each CPU runs), twice: one runqueue
// snapshot could catch a passing moment.
var sysrqKeys = []byte{'w', 't', 't'}

// diagnose has a guest that stopped, got stuck or ran too long say what it
// can before it is killed, and only then explains a hang, so that the
// explanation sees all of it on any target. First, for a hang, the
// kernel's answer to sysrq from outside (a machine.Sysrqer: a VM's serial
// break), while the guest still runs; then the target's own evidence for
// the report the cell ended on (machine.Instance.Diagnose: a VM's registers
// and stacks, which stops its vCPUs, so it comes after the sysrq; a
// board's sysrq w over SSH and its agent's task stacks), with the console
// output it set off read back; then hang.Explain over the console's recent
// lines.
func (m *run) diagnose(ctx context.Context, out Outcome) {
	g := m.spec.Timeouts.Graces
	gone := false
	if out.hung() {
		gone = m.askKernel(ctx)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Diagnose)
	d := m.inst.Diagnose(dctx, m.endedOn(out))
	cancel()
	if d.File != "" {
		if err := os.WriteFile(m.w.Path(d.File), []byte(d.Text), 0o644); err != nil {
			m.log.Warn("write forensics", "file", d.File, "err", err)
		}
		m.update(func(r *results.Result) { r.Registers = d.File })
	}
	if d.Wait && !gone {
		m.read(ctx, until{max: g.Sysrq, quiet: g.Quiet, gone: true})
	}
	if out.hung() {
		m.explain()
	}
	m.inst.Kill()
}

// endedOn is the report the cell ended on, for Diagnose: the silence
// watchdog's and the deadline's hang have none on the console, and are
// named as the finding the silence will become; otherwise the cell's
// heading finding, or the report still open on the console (a hang
// report's tail, a panic's grace, start at its header), by its kind.
func (m *run) endedOn(out Outcome) *results.Finding {
	switch out {
	case EndSilence:
		return &results.Finding{Kind: console.KindHang, Title: fmt.Sprintf("hang: no output for %s", m.spec.Timeouts.Silence)}
	case EndDeadline:
		return &results.Finding{Kind: console.KindHang, Title: fmt.Sprintf("cell deadline of %s passed", m.spec.Timeouts.Deadline)}
	}
	r := m.w.Result()
	if f := r.Headline(m.spec.IncludeKnown).Finding; f != nil {
		c := *f
		return &c
	}
	if open := m.det.OpenKinds(); len(open) > 0 {
		return &results.Finding{Kind: open[0]}
	}
	return nil
}

// askKernel has a guest that stopped making progress say why: a target
// that can send sysrq from outside (a VM's serial break) gets w and t, and
// the console's answer to each is read before the next. A target that
// cannot leaves the explanation to its Diagnose and to what the console
// printed unasked. gone reports that the target went away meanwhile.
func (m *run) askKernel(ctx context.Context) (gone bool) {
	s, ok := m.inst.(machine.Sysrqer)
	if !ok {
		return false
	}
	g := m.spec.Timeouts.Graces
	for _, k := range sysrqKeys {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Diagnose)
		err := s.Sysrq(sctx, k)
		cancel()
		if err != nil {
			m.log.Warn("sysrq", "key", string(k), "err", err)
			return false
		}
		m.log.Info("asked the kernel with sysrq", "key", string(k))
		if _, gone := m.read(ctx, until{max: g.Sysrq, quiet: g.Quiet, gone: true}); gone {
			return true
		}
	}
	return false
}

// explain turns the console's recent lines, with any RCU-tasks stall
// warning and the sysrq answers among them, into an explanation (see
// hang.Explain).
func (m *run) explain() {
	e := hang.Explain(m.recent, m.spec.Harness)
	if e.Title != "" || len(e.Evidence) > 0 {
		m.explained = &e
		m.log.Info("hang explained", "title", e.Title, "kind", e.Kind, "evidence", len(e.Evidence))
		m.update(func(r *results.Result) { r.Hang = &e })
	}
}
