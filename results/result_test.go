package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// result.json must be readable after every update, and never half-written.
func TestCellWriterKeepsResultCurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cell")
	w, err := NewCellWriter(dir, Result{RunID: "r", Cell: "x86_64-x"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadResult(filepath.Join(dir, "result.json"))
	if err != nil || r.Verdict != Running || r.Schema != SchemaVersion {
		t.Fatalf("initial result = %+v, %v; want a running result", r, err)
	}
	err = w.Update(func(r *Result) {
		r.Phases = map[string]*event.Phase{"attach": {Name: "attach", Succeeded: 2000, Latency: event.Latency{Median: event.Duration(5 * time.Millisecond)}}}
		r.Verdict = Pass
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err = ReadResult(filepath.Join(dir, "result.json"))
	if err != nil || r.Verdict != Pass || r.Phases["attach"].Succeeded != 2000 {
		t.Fatalf("updated result = %+v, %v", r, err)
	}
	if got := r.Phases["attach"].Latency.Median.Std(); got != 5*time.Millisecond {
		t.Errorf("median round-trip = %s, want 5ms", got)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".result.json.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestLineLogAppendsAsItGoes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	l, err := CreateLineLog(p)
	if err != nil {
		t.Fatal(err)
	}
	l.Line("first")
	// Readable before Close: a killed harness leaves what was written.
	b, _ := os.ReadFile(p)
	if string(b) != "first\n" {
		t.Errorf("before close: %q", b)
	}
	l.Line("second")
	l.Close()
	b, _ = os.ReadFile(p)
	if string(b) != "first\nsecond\n" {
		t.Errorf("after close: %q", b)
	}
}

func TestSummaryTable(t *testing.T) {
	r := Result{Cell: "x86_64-direct-calls-full", Accel: "tcg-single", Verdict: Fail,
		Findings:   []Finding{{Title: "Oops: int3 in arch_scale_cpu_capacity"}},
		Phases:     map[string]*event.Phase{"attach": {Succeeded: 1234, Latency: event.Latency{Median: event.Duration(5 * time.Millisecond), P99: event.Duration(9300 * time.Microsecond)}}},
		Windows:    []event.RaceWindow{{Target: "opstramp", Actions: []string{"tracer-off"}, Insns: []event.WindowInsn{{Off: 0, Len: 7}, {Off: 7, Len: 5}}}},
		Injections: []event.Injection{{Seq: 1, Target: "opstramp", Offset: 0, Action: "tracer-off", Outcome: event.InjSurvived}},
	}
	s := Summary{Cells: []CellSummary{Summarize(r, "d")}}
	var b strings.Builder
	PrintTable(&b, s)
	for _, want := range []string{"x86_64-direct-calls-full", "fail", "1234", "5.0/9.3", "Oops: int3 in arch_scale_cpu_capacity",
		"x86_64-direct-calls-full, race coverage (tcg-single):\n  opstramp: 1 of 2 instruction×action points explored (2 instructions × 1 action), 1 survived"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestPreemptRefused(t *testing.T) {
	for _, tc := range []struct {
		asked, runs, want string
	}{
		{"none", "full", "none"},
		{"full", "full", ""},
		{"", "full", ""},
		{"lazy", "", ""},
	} {
		r := &Result{Request: &Request{Preempt: tc.asked}, PreemptModel: tc.runs}
		if got := r.PreemptRefused(); got != tc.want {
			t.Errorf("asked %q, runs %q: PreemptRefused() = %q, want %q", tc.asked, tc.runs, got, tc.want)
		}
	}
	if (&Result{PreemptModel: "full"}).PreemptRefused() != "" {
		t.Error("a result without its request refused nothing")
	}
}
