package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ftrace-harness/fth/results"
)

// bisectView is bisect.json as the page shows it. The file is the
// harness's (harness/bisect.Result); the report reads only what it shows.
type bisectView struct {
	Verdict    string  `json:"verdict"`
	Reason     string  `json:"reason"`
	Confidence float64 `json:"confidence"`
	Rate       float64 `json:"rate"`
	Kind       string  `json:"kind"`
	FirstTitle string  `json:"first_title"`
	Culprit    *struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
	} `json:"culprit"`
	Steps []struct {
		Role   string `json:"role"`
		Target struct {
			Rev struct {
				ID      string `json:"id"`
				Subject string `json:"subject"`
			} `json:"rev"`
			Revert *struct {
				ID string `json:"id"`
			} `json:"revert"`
		} `json:"target"`
		Verdict    string  `json:"verdict"`
		Confidence float64 `json:"confidence"`
		Runs       []struct {
			Outcome      string  `json:"outcome"`
			Title        string  `json:"title"`
			Cell         string  `json:"cell"`
			BuildSeconds float64 `json:"build_seconds"`
			GuestSeconds float64 `json:"guest_seconds"`
		} `json:"runs"`
	} `json:"steps"`
	// Summary is bisect-summary.txt (written at the end); Rows the
	// steps, one line each.
	Summary string      `json:"-"`
	Rows    []bisectRow `json:"-"`
}

type bisectRow struct {
	Role, Revision, Verdict string
	Confidence              float64
	Runs                    []bisectRun
	BuildSeconds            float64
	GuestSeconds            float64
}

type bisectRun struct{ Outcome, Title, Anchor string }

// readBisect reads dir's bisect.json; none is no section.
func readBisect(dir string) (*bisectView, error) {
	b, err := os.ReadFile(filepath.Join(dir, results.BisectFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v bisectView
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", results.BisectFile, err)
	}
	if s, err := os.ReadFile(filepath.Join(dir, results.BisectSummary)); err == nil {
		v.Summary = strings.TrimSpace(string(s))
	} else {
		v.Summary = "the bisection has not ended: its steps so far"
	}
	for _, st := range v.Steps {
		rev := st.Target.Rev.ID
		if len(rev) == 40 {
			rev = rev[:12]
		}
		if st.Target.Rev.Subject != "" {
			rev += " " + st.Target.Rev.Subject
		}
		if st.Target.Revert != nil {
			rev += fmt.Sprintf(" with %.12s reverted", st.Target.Revert.ID)
		}
		row := bisectRow{Role: st.Role, Revision: rev, Verdict: st.Verdict, Confidence: st.Confidence}
		for _, r := range st.Runs {
			row.BuildSeconds += r.BuildSeconds
			row.GuestSeconds += r.GuestSeconds
			row.Runs = append(row.Runs, bisectRun{Outcome: r.Outcome, Title: r.Title, Anchor: anchor(filepath.Base(r.Cell))})
		}
		v.Rows = append(v.Rows, row)
	}
	return &v, nil
}
