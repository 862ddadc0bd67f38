package report

import (
	"fmt"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// raceView is one race target's window as a table: an instruction per
// row, an action per column, each cell the point's outcome.
type raceView struct {
	// Accel is the accelerator every point of the cell ran under: a
	// window whose two CPUs must run truly at once (x86's INT3 steps)
	// says whether they did (tcg-multi, kvm) or took turns (tcg-single).
	Target, Symbol, Arch, Accel string
	// Line is the coverage line the run printed.
	Line    string
	Actions []string
	Rows    []raceRow
}

type raceRow struct {
	Off, Asm string
	Cells    []raceCell
}

// raceCell is one point: its worst outcome and how many injections were
// judged there; Outcome "" is a point not explored.
type raceCell struct {
	Outcome string
	N       int
	Bad     bool
}

func buildRace(r results.Result) []raceView {
	var out []raceView
	for _, w := range r.Windows {
		cov, points := r.WindowCoverage(w)
		v := raceView{Target: w.Target, Symbol: w.Symbol, Arch: w.Arch, Accel: r.Accel, Line: cov.String(), Actions: w.Actions}
		for _, in := range w.Insns {
			row := raceRow{Off: fmt.Sprintf("+%#x", in.Off), Asm: in.Asm}
			for _, a := range w.Actions {
				pr := points[results.Point{Off: in.Off, Action: a}]
				row.Cells = append(row.Cells, raceCell{Outcome: pr.Outcome, N: pr.N,
					Bad: pr.Outcome == event.InjCrashed || pr.Outcome == event.InjFreedUnderTask || pr.Outcome == event.InjWrongState})
			}
			v.Rows = append(v.Rows, row)
		}
		out = append(out, v)
	}
	return out
}
