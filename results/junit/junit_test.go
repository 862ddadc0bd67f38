package junit

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
)

var update = flag.Bool("update", false, "rewrite testdata/*.xml from the writer's output")

func run() []results.Result {
	start := time.Date(2026, 11, 21, 7, 19, 34, 0, time.UTC)
	return []results.Result{
		{Cell: "x86_64-direct-calls-full", Arch: "x86_64", Verdict: results.Pass, Timings: results.Timings{TotalSeconds: 95.25}, StartedAt: start.Add(time.Minute)},
		{
			Cell: "x86_64-lockdep", Arch: "x86_64", Verdict: results.Fail, Reason: "console: Oops: int3 in up_read",
			Repro:     "qemu-system-x86_64 -machine q35",
			Timings:   results.Timings{TotalSeconds: 203.5},
			StartedAt: start,
			Findings: []results.Finding{
				// The escape byte is what a serial console really prints; XML
				// cannot carry it.
				{Kind: "oops", Title: "Oops: int3 in up_read", Report: "[  192.569781] Oops: int3: 0000 [#1] SMP\n[  192.571608] RIP: 0010:up_read+0x1/0xc0 <1f> & \x1b[0m ]]> end"},
				{Kind: "panic", Title: "kernel panic: Fatal exception in interrupt", Report: "second"},
			},
		},
		{Cell: "arm64-call-ops-full", Arch: "arm64", Verdict: results.Fail, Reason: "hang: no agent output for 2m0s", Timings: results.Timings{TotalSeconds: 150}},
		{Cell: "riscv64-rt", Arch: "riscv64", Verdict: results.Skip, Reason: "riscv64 cannot select PREEMPT_RT"},
		{Cell: "ppc64le-direct-calls-full", Arch: "ppc64le", Verdict: results.Error, Reason: "deadline 45m0s passed before the agent finished", Timings: results.Timings{TotalSeconds: 2700}},
		{Cell: "arm64-kasan", Arch: "arm64", Verdict: results.Running},
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name  string
		cells []results.Result
	}{
		{"mixed", run()},
		{"empty", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Write(&b, FromResults("nightly-42", tt.cells)); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".xml")
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("junit.xml differs from %s (run with -update if the change is intended):\n%s", golden, b.String())
			}
		})
	}
}

// Counts must agree with the cases, and the output must parse back: a CI
// reader that rejects the file shows nothing at all.
func TestCountsAndRoundTrip(t *testing.T) {
	doc := FromResults("r", run())
	s := doc.Suites[0]
	want := map[string]int{"tests": 6, "failures": 2, "errors": 2, "skipped": 1}
	got := map[string]int{"tests": s.Tests, "failures": s.Failures, "errors": s.Errors, "skipped": s.Skipped}
	for k, v := range want {
		if got[k] != v || (k == "tests" && doc.Tests != v) {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if float64(s.Time) != 95.25+203.5+150+2700 {
		t.Errorf("time = %v", s.Time)
	}
	var b bytes.Buffer
	if err := Write(&b, doc); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Body    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("output does not parse: %v", err)
	}
	f := back.Suites[0].Cases[1].Failure
	if f == nil || f.Message != "Oops: int3 in up_read" || !bytes.Contains([]byte(f.Body), []byte("RIP: 0010:up_read+0x1/0xc0 <1f> & \uFFFD[0m ]]> end")) {
		t.Errorf("failure = %+v; want the first finding's title and report", f)
	}
}

func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteFile(p, FromResults("r", run())); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "junit.xml"), Testsuites{}); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
