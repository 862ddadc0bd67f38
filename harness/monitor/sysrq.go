package monitor

import (
	"context"
	"time"

	"github.com/ftrace-harness/fth/harness/target"
	"github.com/ftrace-harness/fth/results"
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

// sysrqQuiet ends the read of one sysrq's output: the kernel prints it at
// once, from the UART's interrupt.
const sysrqQuiet = time.Second

// askKernel has a guest that stopped making progress say why, before it is
// killed: a target that can send sysrq from outside (a VM's serial break)
// gets w and t, and the console's answer, with any RCU-tasks stall warning
// before it, is turned into an explanation (see hang.Explain). A target
// that cannot leaves the explanation to what the console printed unasked.
func (m *run) askKernel(ctx context.Context) {
	s, ok := m.inst.(target.Sysrqer)
	if ok {
		for _, k := range sysrqKeys {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := s.Sysrq(sctx, k)
			cancel()
			if err != nil {
				m.log.Warn("sysrq", "key", string(k), "err", err)
				break
			}
			m.log.Info("asked the kernel with sysrq", "key", string(k))
			if m.readQuiet(sysrqQuiet, m.spec.Graces.Sysrq) {
				break
			}
		}
	}
	e := hang.Explain(m.recent, m.spec.Harness)
	if e.Title != "" || len(e.Evidence) > 0 {
		m.explained = &e
		m.log.Info("hang explained", "title", e.Title, "kind", e.Kind, "evidence", len(e.Evidence))
		m.update(func(r *results.Result) { r.Hang = &e })
	}
}

// readQuiet reads events until the console has said nothing for quiet, or
// max passed; gone reports that the target went away meanwhile.
func (m *run) readQuiet(quiet, max time.Duration) (gone bool) {
	deadline := time.After(max)
	for {
		select {
		case e, ok := <-m.inst.Events():
			if !ok {
				return true
			}
			switch e.Kind {
			case target.Exited, target.Reset, target.Rebooted, target.Unreachable:
				return true
			}
			m.handle(e)
		case <-time.After(quiet):
			return false
		case <-deadline:
			return false
		}
	}
}
