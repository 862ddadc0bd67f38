package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results"
)

// realRun copies one of results/report's real run directories.
func realRun(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "..", "results", "report", "testdata", name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestReportCommand(t *testing.T) {
	dir := realRun(t, "tcg-multi-1")
	md := filepath.Join(t.TempDir(), "step-summary.md")
	os.WriteFile(md, []byte("earlier step\n"), 0o644)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"report", "--vmlinux", "none", "--markdown", md, dir}, &out, &out); err != nil {
		t.Fatalf("report: %v\n%s", err, out.String())
	}
	for _, f := range []string{"report.html", "junit.xml", "summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
		if !strings.Contains(out.String(), filepath.Join(dir, f)) {
			t.Errorf("output does not name %s:\n%s", f, out.String())
		}
	}
	if !strings.Contains(out.String(), "x86_64-direct-calls-full  tcg-multi  fail") {
		t.Errorf("output has no summary table:\n%s", out.String())
	}
	b, _ := os.ReadFile(md)
	if !strings.HasPrefix(string(b), "earlier step\n### fth run `tcg-multi-1`: 1 fail\n") {
		t.Errorf("markdown was not appended:\n%s", b)
	}
}

// TestReportMail writes the mail report of a real failed cell: the text
// on stdout and in <cell>/mail/report.txt, its attachments beside it; a
// run directory, a passing cell and --bisect without --mail are refused.
func TestReportMail(t *testing.T) {
	cell := filepath.Join(realRun(t, "tcg-multi-1"), "x86_64-direct-calls-full")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"report", "--mail", "--vmlinux", "none", cell}, &out, &out); err != nil {
		t.Fatalf("report --mail: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "Subject: [BUG] ftrace: Oops: int3 in __do_sys_newuname\n") {
		t.Errorf("stdout does not start with the subject:\n%s", out.String())
	}
	b, err := os.ReadFile(filepath.Join(cell, "mail", "report.txt"))
	if err != nil || !strings.Contains(out.String(), string(b)) {
		t.Errorf("report.txt: %v, or not what was printed", err)
	}
	if _, err := os.Stat(filepath.Join(cell, "mail", "console.log")); err != nil {
		t.Errorf("console.log not attached: %v", err)
	}
	pass := filepath.Join(realRun(t, "tcg-single-1"), "x86_64-direct-calls-full")
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"report", "--mail", filepath.Dir(cell)}, true, "not a cell directory"},
		{[]string{"report", "--bisect", "x", filepath.Dir(cell)}, true, "--bisect goes with --mail"},
		{[]string{"report", "--mail", pass}, false, "nothing to report"},
	} {
		err := run(context.Background(), tc.args, &out, &out)
		if err == nil || errors.Is(err, errUsage) != tc.usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q (usage %v)", tc.args, err, tc.want, tc.usage)
		}
	}
}

func TestReportAndCompareUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"report"}, "one run directory"},
		{[]string{"report", "a", "b"}, "one run directory"},
		{[]string{"report", "--excerpt", "0", "a"}, "--excerpt"},
		{[]string{"compare", "a"}, "two run directories"},
		{[]string{"compare", "--min-samples", "0", "a", "b"}, "--min-samples"},
		{[]string{"compare", "--wakeup-factor", "0.5", "a", "b"}, "--wakeup-factor"},
		{[]string{"compare", "--ratio-growth", "-1", "a", "b"}, "--ratio-growth"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, &out, &out)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error about %q", err, tt.want)
			}
		})
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"report", filepath.Join(t.TempDir(), "missing")}, &out, &out)
	if err == nil || errors.Is(err, errUsage) || exitCode(err, &out) != exitError {
		t.Errorf("missing run dir: err = %v, want an error (exit 2)", err)
	}
}

// plantedBench copies the churn-bench run with the bench cell's attach at
// N=10000 twice as slow: superlinear growth that fth compare must flag.
func plantedBench(t *testing.T) string {
	t.Helper()
	dir := realRun(t, "churn-bench")
	path := filepath.Join(dir, "x86_64-bench", "result.json")
	r, err := results.ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Bench.Scaling.Points[5].AttachSeconds *= 2
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompareCommand(t *testing.T) {
	pass, fail := realRun(t, "tcg-single-1"), realRun(t, "tcg-multi-1")
	churnBench, planted := realRun(t, "churn-bench"), plantedBench(t)
	tests := []struct {
		name     string
		a, b     string
		exit     int
		contains string
	}{
		{"same run: no regression", pass, pass, exitPass, "0 regressions in 0 of 1 cells"},
		{"the real MTTCG oops regresses", pass, fail, exitFail, "REGRESSION pass→fail: Oops: int3 in __do_sys_newuname"},
		{"the fix is a note", fail, pass, exitPass, "fail→pass: Oops: int3 in __do_sys_newuname gone"},
		{"churn, bench and board against themselves", churnBench, churnBench, exitPass, "0 regressions in 0 of 3 cells"},
		{"superlinear attach at N=10000", churnBench, planted, exitFail, "REGRESSION scaling N=10000 attach 186.44 s→372.88 s (+100%, limit 279.66 s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), []string{"compare", tt.a, tt.b}, &out, &out)
			if got := exitCode(err, &out); got != tt.exit || !strings.Contains(out.String(), tt.contains) {
				t.Errorf("exit %d (err %v), want %d; output:\n%s", got, err, tt.exit, out.String())
			}
		})
	}
}

// versionRun is one matrix run over two kernel series, as `fth matrix
// --kernel 6.12,7.3` writes it: the real failing tcg-multi cell stands in
// for 6.12's, the real passing tcg-single cell for 7.3's.
func versionRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "versions")
	for _, c := range []struct{ from, series, version string }{{"tcg-multi-1", "6.12", "6.12.117"}, {"tcg-single-1", "7.3", "7.3.4"}} {
		src := filepath.Join(realRun(t, c.from), "x86_64-direct-calls-full", "result.json")
		r, err := results.ReadResult(src)
		if err != nil {
			t.Fatal(err)
		}
		r.Cell += "-linux-" + c.series
		r.Kernel.SourceVersion = c.version
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		cell := filepath.Join(dir, r.Cell)
		if err := os.MkdirAll(cell, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cell, "result.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCompareKernels(t *testing.T) {
	dir := versionRun(t)
	single := realRun(t, "tcg-single-1")
	for _, tt := range []struct {
		name     string
		args     []string
		exit     int
		contains []string
	}{
		{"6.12 to 7.3: the oops is gone", []string{"--kernels", "6.12,7.3", dir}, exitPass, []string{"on Linux 6.12, candidate", "on Linux 7.3", "fail→pass: Oops: int3 in __do_sys_newuname gone"}},
		{"7.3 to 6.12: a regression", []string{"--kernels", "7.3,6.12", dir, dir}, exitFail, []string{"REGRESSION pass→fail: Oops: int3 in __do_sys_newuname"}},
		{"two one-version runs say their versions", []string{single, single}, exitPass, []string{"on Linux 7.3.4"}},
		{"a series no cell ran", []string{"--kernels", "6.1,7.3", dir}, exitError, []string{"0 baseline cells ran Linux 6.1"}},
		{"one series", []string{"--kernels", "7.3", dir}, exitUsage, []string{"want two Debian kernel series"}},
		{"three directories", []string{"--kernels", "6.12,7.3", dir, dir, dir}, exitUsage, []string{"two run directories"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), append([]string{"compare"}, tt.args...), &out, &out)
			got := exitCode(err, &out)
			for _, c := range tt.contains {
				if !strings.Contains(out.String(), c) && (err == nil || !strings.Contains(err.Error(), c)) {
					t.Errorf("output and error lack %q (err %v):\n%s", c, err, out.String())
				}
			}
			if got != tt.exit {
				t.Errorf("exit %d (err %v), want %d", got, err, tt.exit)
			}
		})
	}
}
