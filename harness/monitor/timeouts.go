package monitor

import "time"

// Timeouts are every wait of one cell, the graces included, scaled once
// for how much slower than native the target runs: a cell under TCG
// (harness/arch's TimeoutScale) and a soak of a board emulated by fth
// boardvm get the same scaled waits from NewTimeouts.
type Timeouts struct {
	// Scale is the factor the waits were multiplied by.
	Scale float64
	// Deadline bounds the whole cell.
	Deadline time.Duration
	// Silence is the no-output watchdog: before the agent says hello any
	// output counts (the console of a booting kernel); after, only the
	// agent's, which reports liveness every 2 s.
	Silence time.Duration
	// HangTail is how long the cell goes on after the header of the first
	// hang report on the console (a hung task, an RCU or workqueue stall, a
	// lockup). A hang that stops only some tasks leaves the agent talking,
	// and the cell would otherwise run to its deadline with nothing more to
	// learn: the report's stacks and the backtraces it asks for come within
	// seconds.
	HangTail time.Duration
	// Graces are the waits for the host side of a guest that has already
	// done what it will do.
	Graces Graces
}

// DefaultHangTail is Timeouts.HangTail before scaling.
const DefaultHangTail = 60 * time.Second

// NewTimeouts scales a cell's deadline and silence watchdog, the default
// hang tail and the default graces by scale; a scale of 0 or less is 1
// (native speed, a board).
func NewTimeouts(scale float64, deadline, silence time.Duration) Timeouts {
	if scale <= 0 {
		scale = 1
	}
	s := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	g := DefaultGraces()
	for _, p := range g.all() {
		*p = s(*p)
	}
	return Timeouts{Scale: scale, Deadline: s(deadline), Silence: s(silence), HangTail: s(DefaultHangTail), Graces: g}
}

// Graces are the waits for the host side of a guest that has already done
// what it will do.
type Graces struct {
	// Reset is how long the monitor keeps reading after a reset: the
	// agent's last events and the console's last lines may still be in
	// flight, and a done among them makes the reset the agent's own
	// orderly end rather than a finding.
	Reset time.Duration
	// Panic is how long a panicked guest gets to reset (panic=-1) before
	// the monitor stops waiting: the report is complete by then, and the
	// silence watchdog would waste minutes.
	Panic time.Duration
	// Done is how long the monitor keeps reading after done, for a last
	// console report, before it stops waiting for the guest to go.
	Done time.Duration
	// Drain ends the read of what is left after Close once nothing came
	// for this long.
	Drain time.Duration
	// Finding is the tail after the first report with StopAtFinding.
	Finding time.Duration
	// Diagnose bounds the target's Diagnose, and each sysrq sent.
	Diagnose time.Duration
	// Sysrq bounds the read of the console's answer to Diagnose and to
	// each sysrq (a target.Sysrqer).
	Sysrq time.Duration
	// Quiet ends that read earlier once the console has been quiet this
	// long: the kernel prints a sysrq's answer at once.
	Quiet time.Duration
}

// DefaultGraces are the graces of a cell at native speed.
func DefaultGraces() Graces {
	return Graces{Reset: 2 * time.Second, Panic: 15 * time.Second, Done: 10 * time.Second, Drain: 500 * time.Millisecond,
		Finding: 15 * time.Second, Diagnose: 20 * time.Second, Sysrq: 20 * time.Second, Quiet: time.Second}
}

// all points at every grace, so scaling and defaults miss none.
func (g *Graces) all() []*time.Duration {
	return []*time.Duration{&g.Reset, &g.Panic, &g.Done, &g.Drain, &g.Finding, &g.Diagnose, &g.Sysrq, &g.Quiet}
}

// orDefault fills the graces left zero with the defaults at scale.
func (t Timeouts) orDefault() Timeouts {
	def := NewTimeouts(t.Scale, 0, 0).Graces
	d := def.all()
	for i, p := range t.Graces.all() {
		if *p <= 0 {
			*p = *d[i]
		}
	}
	return t
}
