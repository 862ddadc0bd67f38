package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/wire/benchopts"
)

func TestParseOpsRunFixtures(t *testing.T) {
	tests := []struct {
		file string
		want OpsRun
		ok   bool
		ns   float64
	}{
		// Real records (see testdata/ftrace-ops/README.md), with the
		// unrelated record that preceded the first load.
		{"x86-kmsg-baseline.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 9725233, PerCallNs: 97}, true, 97.25233},
		{"x86-kmsg-relevant-1.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 18537707, PerCallNs: 185}, true, 185.37707},
		{"x86-kmsg-relevant-2.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 48171660, PerCallNs: 481}, true, 481.7166},
		{"x86-kmsg-relevant-1-irrelevant-10.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 15108319, PerCallNs: 151}, true, 151.08319},
		{"x86-kmsg-relevant-1-save-regs.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 17773478, PerCallNs: 177}, true, 177.73478},
		{"x86-dmesg-relevant-2.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 48171660, PerCallNs: 481}, true, 481.7166},
		// Edge cases no run here produced (see the README).
		{"kmsg-save-regs-unsupported.txt", OpsRun{Calls: 100000, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 4123456, PerCallNs: 41, NoSaveRegs: true}, true, 41.23456},
		// nr_function_calls=0: the module prints -1LL through %llu.
		{"kmsg-zero-calls.txt", OpsRun{Calls: 0, Tracee: "tracee_relevant [ftrace_ops]", TotalNs: 120, PerCallNs: 1<<64 - 1}, true, 0},
		{"kmsg-no-result.txt", OpsRun{}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "ftrace-ops", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			// As read from the file, and as the kmsg reader hands the
			// messages over: the result must not depend on the header.
			msgs := make([]string, len(lines))
			for i, l := range lines {
				msgs[i] = KmsgMessage(l)
			}
			for name, in := range map[string][]string{"raw": lines, "messages": msgs} {
				got, ok := ParseOpsRun(in)
				if ok && !strings.Contains(got.Line, "Attempted") {
					t.Errorf("%s: Line = %q, want the kernel's result line", name, got.Line)
				}
				got.Line = ""
				if ok != tt.ok || got != tt.want {
					t.Errorf("%s: ParseOpsRun = %+v, %v; want %+v, %v", name, got, ok, tt.want, tt.ok)
				}
				if d := got.NsPerCall() - tt.ns; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s: NsPerCall = %v, want %v", name, got.NsPerCall(), tt.ns)
				}
			}
		})
	}
}

func TestParseOpsLine(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want OpsRun
	}{
		{"ftrace_ops: Attempted 5 calls to tracee_relevant.isra.0 [ftrace_ops] in 50ns (10ns / call)", true,
			OpsRun{Calls: 5, Tracee: "tracee_relevant.isra.0 [ftrace_ops]", TotalNs: 50, PerCallNs: 10}},
		{"Attempted 100000 calls to 0xffffffffc0201000 in 7ns (0ns / call)", true,
			OpsRun{Calls: 100000, Tracee: "0xffffffffc0201000", TotalNs: 7, PerCallNs: 0}},
		{"ftrace_ops: registering:", false, OpsRun{}},
		{"Attempted calls to x in 5ns (1ns / call)", false, OpsRun{}},
		// %u cannot print more than 32 bits: such a line is not the module's.
		{"Attempted 4294967296 calls to x in 5ns (1ns / call)", false, OpsRun{}},
		{"", false, OpsRun{}},
	}
	for _, tt := range tests {
		got, ok := ParseOpsLine(tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseOpsLine(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

func TestKmsgMessage(t *testing.T) {
	for in, want := range map[string]string{
		"6,1520,41301822,-;ftrace_ops: hello\n":                            "ftrace_ops: hello",
		"6,1520,41301822,-,caller=T93;a;b\n SUBSYSTEM=x\n":                 "a;b",
		"no header; but a semicolon":                                       "no header; but a semicolon",
		"[   14.2] ftrace_ops: Attempted 1 calls to x in 1ns (1ns / call)": "[   14.2] ftrace_ops: Attempted 1 calls to x in 1ns (1ns / call)",
		"": "",
	} {
		if got := KmsgMessage(in); got != want {
			t.Errorf("KmsgMessage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpsParams(t *testing.T) {
	for _, tt := range []struct {
		p    benchopts.OpsPoint
		want string
	}{
		{benchopts.OpsPoint{}, "nr_function_calls=1000 nr_ops_relevant=0 nr_ops_irrelevant=0 save_regs=N"},
		{benchopts.OpsPoint{Relevant: 10, Irrelevant: 100, SaveRegs: true}, "nr_function_calls=1000 nr_ops_relevant=10 nr_ops_irrelevant=100 save_regs=Y"},
	} {
		if got := opsParams(1000, tt.p); got != tt.want {
			t.Errorf("opsParams(%v) = %q, want %q", tt.p, got, tt.want)
		}
	}
}
