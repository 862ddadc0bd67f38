package results

import (
	"fmt"
	"strings"

	"github.com/ftrace-harness/fth/wire/event"
)

// Coverage is how much of one race target's window a run explored: a
// point is one instruction of the window raced against one action.
type Coverage struct {
	Target string `json:"target"`
	// Insns and Actions are the window's sizes; Points their product.
	Insns   int `json:"insns"`
	Actions int `json:"actions"`
	Points  int `json:"points"`
	// Explored counts the points where an injection held the task in
	// the target (any outcome but missed and not-preempted).
	Explored int `json:"explored"`
	// Outcomes counts each injected point's worst outcome (PointResult):
	// Explored and the not-preempted ones; Missed counts the injections that
	// missed.
	Outcomes map[string]int `json:"outcomes,omitempty"`
	Missed   int            `json:"missed,omitempty"`
	// Unreachable says why the target had no window.
	Unreachable string `json:"unreachable,omitempty"`
}

// outcomeRank orders outcomes from worst: a point keeps the worst seen.
// Not-preempted is last: it explored nothing (the agent tries such a point
// again), so any other outcome at the point says more.
var outcomeRank = map[string]int{
	event.InjCrashed:        5,
	event.InjFreedUnderTask: 4,
	event.InjWrongState:     3,
	event.InjReleased:       2, // held and let go, never judged: the agent stopped
	event.InjSurvived:       1,
	event.InjNotPreempted:   0,
}

// Point is one instruction of a window raced against one action.
type Point struct {
	Off    int
	Action string
}

// PointResult is what a point's injections came to: the worst outcome
// (crashed, then freed-under-task, released but never judged, survived,
// and not-preempted only when no injection there held the task) and how
// many were made there.
type PointResult struct {
	Outcome string
	N       int
}

// RacePoints gathers target's judged injections by point, and counts its
// missed ones (which injected nothing).
func (r *Result) RacePoints(target string) (map[Point]PointResult, int) {
	out := map[Point]PointResult{}
	missed := 0
	for _, in := range r.Injections {
		if in.Target != target {
			continue
		}
		if in.Outcome == event.InjMissed {
			missed++
			continue
		}
		// A release the kernel died after is already crashed
		// (AttributeInjection); one still released was never judged.
		o := in.Outcome
		p := Point{in.Offset, in.Action}
		pr := out[p]
		if pr.N == 0 || outcomeRank[o] > outcomeRank[pr.Outcome] {
			pr.Outcome = o
		}
		pr.N++
		out[p] = pr
	}
	return out, missed
}

// RaceCoverage counts the injections against their targets' windows, one
// Coverage per window, in the order the agent reported them.
func (r *Result) RaceCoverage() []Coverage {
	var out []Coverage
	for _, w := range r.Windows {
		c, _ := r.WindowCoverage(w)
		out = append(out, c)
	}
	return out
}

// WindowCoverage is one window's Coverage, and the points it counted.
func (r *Result) WindowCoverage(w event.RaceWindow) (Coverage, map[Point]PointResult) {
	c := Coverage{Target: w.Target, Insns: len(w.Insns), Actions: len(w.Actions), Outcomes: map[string]int{}, Unreachable: w.Unreachable}
	c.Points = c.Insns * c.Actions
	points, missed := r.RacePoints(w.Target)
	c.Missed = missed
	for _, pr := range points {
		c.Outcomes[pr.Outcome]++
		if pr.Outcome != event.InjNotPreempted {
			c.Explored++
		}
	}
	return c, points
}

// String is the coverage line a run prints: "trampoline: 12 of 46
// instruction×action points explored, 12 survived".
func (c Coverage) String() string {
	if c.Unreachable != "" {
		return fmt.Sprintf("%s: unreachable: %s", c.Target, c.Unreachable)
	}
	var parts []string
	for _, o := range []string{event.InjSurvived, event.InjCrashed, event.InjFreedUnderTask, event.InjWrongState, event.InjReleased, event.InjNotPreempted} {
		if n := c.Outcomes[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	if c.Missed > 0 {
		parts = append(parts, fmt.Sprintf("%d injection(s) missed", c.Missed))
	}
	actions := "actions"
	if c.Actions == 1 {
		actions = "action"
	}
	insns := "instructions"
	if c.Insns == 1 {
		insns = "instruction"
	}
	s := fmt.Sprintf("%s: %d of %d instruction×action points explored (%d %s × %d %s)", c.Target, c.Explored, c.Points, c.Insns, insns, c.Actions, actions)
	if len(parts) > 0 {
		s += ", " + strings.Join(parts, ", ")
	}
	return s
}
