package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/bisect"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/report"
)

func sampleBisect() bisect.Result {
	culprit := bisect.Revision{ID: strings.Repeat("9", 40), Subject: "bpf: free the image early"}
	parent := bisect.Revision{ID: strings.Repeat("8", 40), Subject: "ftrace: marker 8"}
	fail := bisect.Run{Outcome: bisect.Fail, Title: "Oops: int3 in bpf_trampoline_6442", Cell: "/o/b/001-999999999999-run1", Built: true, BuildSeconds: 61, GuestSeconds: 9}
	pass := bisect.Run{Outcome: bisect.Pass, Cell: "/o/b/003-888888888888-run1", GuestSeconds: 40}
	return bisect.Result{
		Verdict: bisect.Found, Culprit: &culprit, Candidate: &culprit, Confidence: 0.962, Rate: 0.8, Evidence: bisect.Evidence{Fail: 6},
		Parent: bisect.Evidence{Pass: 3}, Reference: 0.1,
		Kind: "Oops: int3 in bpf_trampoline_N", FirstTitle: fail.Title, Revert: true, Revisions: 16,
		Steps: []bisect.Step{
			{Role: bisect.RoleBadEnd, Target: bisect.Target{Rev: culprit}, Runs: []bisect.Run{fail, fail}, Verdict: bisect.Bad, Confidence: 0.995},
			{Role: bisect.RoleVerifyParent, Target: bisect.Target{Rev: parent}, Runs: []bisect.Run{pass, pass, pass}, Verdict: bisect.Good, Confidence: 0.962},
			{Role: bisect.RoleVerifyRevert, Target: bisect.Target{Rev: culprit, Revert: &culprit}, Runs: []bisect.Run{pass, {Outcome: bisect.Broken, Reason: "kernel build: error"}}, Verdict: bisect.Skip},
		},
		Policy: bisect.DefaultPolicy(),
	}
}

// The log line and the mail paragraph say what a maintainer needs: the
// culprit, how sure, how it was checked, what it cost, how to rerun it.
func TestBisectText(t *testing.T) {
	r := sampleBisect()
	sum := bisectSummaryText(r, "git -C ~/linux checkout 999999999999 && fth run --kernel-src ~/linux --arch x86_64")
	for _, want := range []string{`"Oops: int3 in bpf_trampoline_6442" (Oops: int3 in bpf_trampoline_N) first appears at 999999999999 "bpf: free the image early"`, "confidence 0.962", "the bad revision with it reverted passes", "fails 80% of runs (6 of 6)", "its parent passed 3, judged against a failure rate of 0.10", "16 revisions, 3 steps, 7 runs, 2 kernels built", "Reproduce: git -C ~/linux checkout"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	line := formatStep(r.Steps[2])
	for _, want := range []string{"verify-revert", "with 999999999999 reverted", "skip", "1 passed", "1 broken"} {
		if !strings.Contains(line, want) {
			t.Errorf("step line lacks %q: %s", want, line)
		}
	}
	r.Verdict, r.Reason, r.Culprit = bisect.Inconclusive, "confidence 0.71 is below the threshold 0.90", nil
	if sum := bisectSummaryText(r, ""); !strings.Contains(sum, "inconclusive") || !strings.Contains(sum, "below the threshold") || !strings.Contains(sum, `ended at 999999999999 "bpf: free the image early", which is not named the culprit`) {
		t.Errorf("inconclusive summary: %s", sum)
	}
	r.Candidate = nil
	if sum := bisectSummaryText(r, ""); strings.Contains(sum, "ended at") {
		t.Errorf("inconclusive summary without a candidate: %s", sum)
	}
}

// report.html of a bisection's run directory has its steps, with every run
// linked to its cell.
func TestBisectReportSection(t *testing.T) {
	dir := t.TempDir()
	r := sampleBisect()
	cell := filepath.Join(dir, "001-999999999999-run1")
	if err := os.Mkdir(cell, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(cell, results.ResultFile), results.Result{Cell: filepath.Base(cell), Arch: "x86_64", Verdict: results.Fail, Reason: "Oops"}); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(dir, results.BisectFile), r); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, results.BisectSummary), []byte(bisectSummaryText(r, "fth repro x")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, written, err := report.Write(context.Background(), dir, report.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(written.Report)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{"Bisection: culprit", "first appears at 999999999999", `<td>verify-parent</td><td>888888888888 ftrace: marker 8</td><td>good</td><td>0.962</td>`, `href="#cell-001-999999999999-run1"`, "with 999999999999 reverted"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// A revision is skipped for what it is (its kernel does not compile, or
// cannot be configured), never for what the machine did (a full disk, a
// failed copy): those end the bisection.
func TestRevisionsFault(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&kbuild.BuildError{Step: "make bzImage", Err: errors.New("exit status 2"), Tail: []string{"kernel/trace/ftrace.c:12: error: expected ';'"}}, true},
		{fmt.Errorf("kernel build: %w", &kbuild.BuildError{Step: "make bzImage", Tail: []string{"ld: final link failed: No space left on device"}}), false},
		{fmt.Errorf("kernel build: %w", kbuild.ErrConfigMismatch), true},
		{errors.New("kernel build: copy build directory /var/cache/fth/kernels/x/build: exit status 1"), false},
		{fmt.Errorf("boot: %w", runner.ErrInfra), false},
	} {
		if got := revisionsFault(tc.err); got != tc.want {
			t.Errorf("revisionsFault(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
