package results

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

func TestStages(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	stage := func(s int, name, skipped string) event.Event {
		return event.Event{Time: at(s), Kind: event.KindStage, Stage: &event.Stage{Name: name, Skipped: skipped}}
	}
	oops := Finding{Kind: "oops", Title: "Oops: int3 in bpf_trampoline_6442"}
	exactFail := event.Oracle{Name: event.OracleExact, Function: "__x64_sys_getppid", Expected: 1000, Got: 0}

	for _, tc := range []struct {
		name string
		// steps run in order: an event, or a finding seen at that point.
		steps       []any
		verdict     Verdict
		wantStages  []StageRecord
		wantFailed  string
		wantFinding string // the finding's stage
	}{
		{
			name:    "a clean campaign",
			steps:   []any{stage(0, event.StageStorm, ""), stage(30, event.StageChurn, ""), stage(100, event.StageRace, ""), stage(140, event.StageDetach, ""), event.Event{Time: at(143), Kind: event.KindDone, Done: &event.Done{OK: true}}},
			verdict: Pass,
			wantStages: []StageRecord{
				{Name: event.StageStorm, At: at(0), Seconds: 30}, {Name: event.StageChurn, At: at(30), Seconds: 70},
				{Name: event.StageRace, At: at(100), Seconds: 40}, {Name: event.StageDetach, At: at(140), Seconds: 3},
			},
		},
		{
			name:    "an oops in the race stage is the race's",
			steps:   []any{stage(0, event.StageStorm, ""), stage(30, event.StageChurn, ""), stage(100, event.StageRace, ""), oops},
			verdict: Fail,
			wantStages: []StageRecord{
				{Name: event.StageStorm, At: at(0), Seconds: 30}, {Name: event.StageChurn, At: at(30), Seconds: 70},
				{Name: event.StageRace, At: at(100), Open: true},
			},
			wantFailed: event.StageRace, wantFinding: event.StageRace,
		},
		{
			name:    "a skipped race: an oops after it is the detach's",
			steps:   []any{stage(0, event.StageStorm, ""), stage(30, event.StageChurn, ""), stage(100, event.StageRace, "no race port"), stage(100, event.StageDetach, ""), oops},
			verdict: Fail,
			wantStages: []StageRecord{
				{Name: event.StageStorm, At: at(0), Seconds: 30}, {Name: event.StageChurn, At: at(30), Seconds: 70},
				{Name: event.StageRace, Skipped: "no race port", At: at(100)}, {Name: event.StageDetach, At: at(100), Open: true},
			},
			wantFailed: event.StageDetach, wantFinding: event.StageDetach,
		},
		{
			name: "an oracle failure is the churn's, whenever the cell ends",
			steps: []any{stage(0, event.StageStorm, ""), stage(30, event.StageChurn, ""), event.Event{Time: at(60), Kind: event.KindOracle, Oracle: &exactFail},
				stage(100, event.StageRace, ""), stage(140, event.StageDetach, ""), event.Event{Time: at(143), Kind: event.KindDone, Done: &event.Done{}}},
			verdict: Fail,
			wantStages: []StageRecord{
				{Name: event.StageStorm, At: at(0), Seconds: 30}, {Name: event.StageChurn, At: at(30), Seconds: 70},
				{Name: event.StageRace, At: at(100), Seconds: 40}, {Name: event.StageDetach, At: at(140), Seconds: 3},
			},
			wantFailed: event.StageChurn,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			for _, s := range tc.steps {
				switch s := s.(type) {
				case event.Event:
					Apply(&r, s)
				case Finding:
					r.AddFindings(s)
				}
			}
			r.Verdict = tc.verdict
			if len(r.Stages) != len(tc.wantStages) {
				t.Fatalf("stages = %+v, want %+v", r.Stages, tc.wantStages)
			}
			for i := range r.Stages {
				if r.Stages[i] != tc.wantStages[i] {
					t.Errorf("stage %d = %+v, want %+v", i, r.Stages[i], tc.wantStages[i])
				}
			}
			if got := r.FailedStage(); got != tc.wantFailed {
				t.Errorf("FailedStage() = %q, want %q", got, tc.wantFailed)
			}
			if tc.wantFinding != "" && r.Findings[0].Stage != tc.wantFinding {
				t.Errorf("finding stage = %q, want %q", r.Findings[0].Stage, tc.wantFinding)
			}
			// The table names the stage a failed cell failed in, once.
			var b bytes.Buffer
			PrintTable(&b, Summary{Cells: []CellSummary{Summarize(r, "")}})
			if n := strings.Count(b.String(), "<- fail"); (tc.wantFailed != "") != (n == 1) || n > 1 {
				t.Errorf("table marks %d failed stages, want it to mark %q:\n%s", n, tc.wantFailed, b.String())
			}
		})
	}
}

// The churn's stage line says how many registration orders the delivery
// churn made, of those its users could make; none without a goal.
func TestChurnStageOrders(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    *event.Delivery
		want string
	}{
		{"no delivery", nil, "0 transitions, 0 oracle checks, 0 failed"},
		{"no direct user", &event.Delivery{}, "0 transitions, 0 oracle checks, 0 failed"},
		{"one of two", &event.Delivery{OrderGoal: []string{"direct, then kprobe", "kprobe, then direct"}, Orders: map[string]int{"direct, then kprobe": 2}},
			"0 transitions, 0 oracle checks, 0 failed; registration orders 1 of 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stageDetail(Result{Delivery: tc.d}, event.StageChurn); got != tc.want {
				t.Errorf("stageDetail = %q, want %q", got, tc.want)
			}
		})
	}
}
