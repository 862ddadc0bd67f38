package report

import (
	"fmt"
	"strings"

	"github.com/ftrace-harness/fth/results/mutation"
)

// mutationView is a mutation run's table (results/mutation) as the page
// shows it: each row links to its cell.
type mutationView struct {
	Rows    []mutationRow
	Summary string
}

type mutationRow struct {
	mutation.Row
	Anchor string
}

// readMutation reads dir's mutation.json; none is no table.
func readMutation(dir string) (*mutationView, error) {
	t, err := mutation.Read(dir)
	if t == nil || err != nil {
		return nil, err
	}
	v := &mutationView{}
	for _, r := range t.Rows {
		v.Rows = append(v.Rows, mutationRow{Row: r, Anchor: anchor(r.Cell)})
	}
	n, d, _ := t.Summary()
	v.Summary = fmt.Sprintf("%d of %d mutants detected; each kernel ran the scenario for at most %.0f s with seed %d; the unmutated kernel ran it too and must pass", d, n, t.Budget, t.Seed)
	if nj := t.NotJudged(); len(nj) > 0 {
		v.Summary += fmt.Sprintf("; not judged, a harness error ended the cell: %s", strings.Join(nj, ", "))
	}
	return v, nil
}
