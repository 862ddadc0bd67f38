package junit

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
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
		// A churn cell that failed on the console while an oracle failed
		// too (the shapes of the real sabotage runs).
		{
			Cell: "x86_64-churn", Arch: "x86_64", Verdict: results.Fail, Reason: "INFO: rcu detected stall in cpu_stop_should_run", Timings: results.Timings{TotalSeconds: 88},
			Findings: []results.Finding{{Kind: "rcu-stall", Title: "INFO: rcu detected stall in cpu_stop_should_run", Report: "[   55.454778] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:"}},
			Oracles: []event.Oracle{
				{Name: event.OracleCalibration, Function: "__do_sys_getppid", Expected: 0xffffffff810796c0, Got: 0xffffffff810796c0, OK: true, Checks: 1},
				{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Got: 999, Msg: "1000 calls, 999 hits (-1); recursion misses 0"},
				{Name: event.OracleFuncIP, OK: true, Checks: 25},
				{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Checks: 3, Failures: 1},
			},
		},
		// A board soak whose panic rebooted the board; pstore kept it (the
		// real e2e board soak).
		{
			Cell: "board-127.0.0.1-41803", Arch: "x86_64", Verdict: results.Fail, Reason: "kernel panic: sysrq triggered crash", Timings: results.Timings{TotalSeconds: 91.2},
			Findings: []results.Finding{{Source: "pstore", Kind: "panic", Title: "kernel panic: sysrq triggered crash", Report: "<0>[   79.170327] Kernel panic - not syncing: sysrq triggered crash"}},
			Board: &results.Board{
				Target: "ssh://root@127.0.0.1:41803", Uname: "x86_64", Release: "7.3.4",
				BootIDs:    []string{"b4f2c01a-b6d3-42bb-b7f3-aa8a57fb7761", "197087a0-544c-42b2-827a-b4b8e979be52"},
				Reconnects: []results.Reconnect{{At: 90.18, Rebooted: true, Back: true, Tries: 1, Waited: 0.44}},
				Pstore:     []string{"pstore/dmesg-ramoops-0"},
			},
		},
	}
}

// A guest that died before the oracle summaries: its first failed check
// stands in, and a board that never came back is named.
func TestExtrasWithoutSummaries(t *testing.T) {
	r := results.Result{Cell: "board-192.0.2.7-22", Verdict: results.Fail, Reason: "board unreachable after a lost connection",
		Oracles: []event.Oracle{
			{Name: event.OracleFuncIP, Function: "__task_pid_nr_ns", Expected: 0xffffffff81085990, Got: 0xffffffff81085950, Msg: "fentry: 7047 of 7047 hits saw bpf_get_func_ip 0xffffffff81085950, want 0xffffffff81085990"},
			{Name: event.OracleFuncIP, Function: "seq_read_iter", Expected: 0xffffffff812b7320, Got: 0xffffffff812b72e0},
		},
		Board: &results.Board{Target: "ssh://root@192.0.2.7:22", BootIDs: []string{"a"}, Reconnects: []results.Reconnect{{At: 300, Tries: 8, Waited: 120, Err: "dial: no route to host"}}},
	}
	f := FromResults("r", []results.Result{r}).Suites[0].Cases[0].Failure
	wantMsg := "board unreachable after a lost connection; oracle func-ip on __task_pid_nr_ns: fentry: 7047 of 7047 hits saw bpf_get_func_ip 0xffffffff81085950, want 0xffffffff81085990; board ssh://root@192.0.2.7:22 unreachable after a lost connection at 300 s"
	if f == nil || f.Message != wantMsg {
		t.Fatalf("failure = %+v\nwant message %q", f, wantMsg)
	}
	for _, want := range []string{"oracle func-ip on seq_read_iter: expected 0xffffffff812b7320, got 0xffffffff812b72e0", "connection lost at 300.0 s: rebooted false, back false after 8 tries, 120.0 s: dial: no route to host"} {
		if !strings.Contains(f.Body, want) {
			t.Errorf("body lacks %q:\n%s", want, f.Body)
		}
	}
}

// A failure's type and body are its headline's: an induced stall ahead
// of the oops the cell failed on is not the kernel's.
func TestFailureIsTheHeadline(t *testing.T) {
	r := results.Result{Cell: "x86_64-race", Verdict: results.Fail, Reason: "Oops: int3 in up_read",
		Findings: []results.Finding{
			{Kind: "rcu-stall", Title: "INFO: rcu_tasks detected stalls", Report: "stall", Induced: "the agent's spinners starved rcu_tasks"},
			{Kind: "oops", Title: "Oops: int3 in up_read", Report: "oops"},
		},
	}
	f := FromResults("r", []results.Result{r}).Suites[0].Cases[0].Failure
	if f == nil || f.Message != "Oops: int3 in up_read" || f.Type != "oops" || f.Body != "oops" {
		t.Fatalf("failure = %+v; want the oops's title, kind and report", f)
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
	want := map[string]int{"tests": 8, "failures": 4, "errors": 2, "skipped": 1}
	got := map[string]int{"tests": s.Tests, "failures": s.Failures, "errors": s.Errors, "skipped": s.Skipped}
	for k, v := range want {
		if got[k] != v || (k == "tests" && doc.Tests != v) {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	if float64(s.Time) != 95.25+203.5+150+2700+88+91.2 {
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
