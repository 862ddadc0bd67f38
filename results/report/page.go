package report

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"regexp"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

//go:embed templates/report.html.tmpl
var templateFS embed.FS

// page is parsed once; a template is immutable after parsing.
var page = template.Must(template.New("report.html.tmpl").ParseFS(templateFS, "templates/report.html.tmpl"))

// pageView is what the template renders.
type pageView struct {
	RunID, Dir, At string
	Counts         []countView
	Variants       []string
	Grid           []gridRow
	AttachBars     template.HTML
	DetachBars     template.HTML
	Cells          []cellView
	// Mutation is a mutation run's table (mutation.json), if there is one.
	Mutation *mutationView
	// Bisect is a bisection's steps (bisect.json), if there are any.
	Bisect *bisectView
}

type countView struct {
	Verdict string
	N       int
}

type gridRow struct {
	Arch  string
	Slots []slotView
}

// slotView is one heatmap cell; normally one run cell, none when the arch
// did not run the variant.
type slotView struct {
	Verdict string
	Cells   []cellLink
}

type cellLink struct {
	Anchor, Name, Verdict, Title string
	// Scenario is shown when it is not the default attach storm, so a
	// churn, bench or soak cell is told apart in the heatmap.
	Scenario string
}

var anchorUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func anchor(cell string) string { return "cell-" + anchorUnsafe.ReplaceAllString(cell, "_") }

// verdictOrder is the immutable order of the count badges.
var verdictOrder = [...]results.Verdict{results.Fail, results.Error, results.Running, results.Pass, results.Skip}

func buildPage(ctx context.Context, run *results.Run, opts Options, syms *symbolizers) (pageView, error) {
	v := pageView{RunID: run.ID, Dir: run.Dir}
	mut, err := readMutation(run.Dir)
	if err != nil {
		return v, err
	}
	v.Mutation = mut
	if v.Bisect, err = readBisect(run.Dir); err != nil {
		return v, err
	}
	if !run.At.IsZero() {
		v.At = run.At.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	counts := map[results.Verdict]int{}
	for _, c := range run.Cells {
		counts[c.Result.Verdict]++
	}
	for _, vd := range verdictOrder {
		if counts[vd] > 0 {
			v.Counts = append(v.Counts, countView{string(vd), counts[vd]})
		}
		delete(counts, vd)
	}
	for vd, n := range counts {
		v.Counts = append(v.Counts, countView{string(vd), n})
	}

	v.Variants = run.Variants()
	for _, a := range run.Arches() {
		row := gridRow{Arch: a}
		for _, va := range v.Variants {
			slot := slotView{}
			for _, c := range run.Cells {
				if c.Result.Arch == a && c.Variant == va {
					slot.Cells = append(slot.Cells, cellLink{Anchor: anchor(c.Result.Cell), Name: c.Result.Cell, Verdict: string(c.Result.Verdict), Title: c.Result.Title(), Scenario: shownScenario(c.Result)})
				}
			}
			slot.Verdict = worst(slot.Cells)
			row.Slots = append(row.Slots, slot)
		}
		v.Grid = append(v.Grid, row)
	}

	for _, ph := range []struct {
		name string
		dst  *template.HTML
	}{{"attach", &v.AttachBars}, {"detach", &v.DetachBars}} {
		fig, err := percentileBars(run, ph.name)
		if err != nil {
			return v, err
		}
		if *ph.dst, err = fig.svg(); err != nil {
			return v, err
		}
	}
	for _, c := range run.Cells {
		if err := ctx.Err(); err != nil {
			return v, fmt.Errorf("report %s: %w", run.Dir, err)
		}
		cv, err := buildCell(ctx, run, c, opts, syms)
		if err != nil {
			return v, fmt.Errorf("cell %s: %w", c.Result.Cell, err)
		}
		v.Cells = append(v.Cells, cv)
	}
	return v, nil
}

// shownScenario is how a heatmap slot names a cell's scenario: the storm,
// the default, goes unnamed; a board's soak says so.
func shownScenario(r results.Result) string {
	sc, err := event.ParseScenario(string(r.Scenario))
	if err != nil {
		return string(r.Scenario)
	}
	switch {
	case r.Board != nil:
		return "soak-" + string(sc)
	case sc == event.ScenarioStorm:
		return ""
	}
	return string(sc)
}

// worst picks the colour of a heatmap slot holding several cells.
func worst(cells []cellLink) string {
	for _, vd := range verdictOrder {
		for _, c := range cells {
			if c.Verdict == string(vd) {
				return c.Verdict
			}
		}
	}
	if len(cells) > 0 {
		return cells[0].Verdict
	}
	return "none"
}
