package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
)

// The kernel-version axis end to end: x86_64's default cell on Linux 7.3
// and on 6.12 in one matrix (6.12 is not asked for FPROBE, and says so),
// then fth compare --kernels between the two. A cold 6.12 build: make
// test-all.
func TestMatrixKernelVersions(t *testing.T) {
	requireAll(t)
	out := e2eOut(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fthBin, "matrix", "--kernel", "7.3,6.12", "--arches", "x86_64", "--n", "200", "--out", out, "--run-id", "r")
	cmd.Dir = "../.."
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fth matrix: %v\n%s", err, b)
	}
	for _, v := range []struct{ series, notAsked string }{{"7.3", ""}, {"6.12", "CONFIG_FPROBE=y"}} {
		cell := "x86_64-direct-calls-full-linux-" + v.series
		res, err := results.ReadResult(filepath.Join(out, "r", cell, "result.json"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", cell, err, b)
		}
		if res.Verdict != results.Pass || !strings.HasPrefix(res.Kernel.SourceVersion, v.series+".") {
			t.Errorf("%s: verdict %s (%s), kernel %s; want a pass on Linux %s", cell, res.Verdict, res.Reason, res.Kernel.SourceVersion, v.series)
		}
		got := strings.Join(res.Kernel.NotAsked, "; ")
		if (v.notAsked == "") != (got == "") || !strings.Contains(got, v.notAsked) {
			t.Errorf("%s: not_asked %q, want %q", cell, got, v.notAsked)
		}
		t.Logf("%s: Linux %s, attach p50 %s, %.0f s", cell, res.Kernel.SourceVersion, res.Phases["attach"].Latency.Median, res.Timings.TotalSeconds)
	}
	cmp := exec.CommandContext(ctx, fthBin, "compare", "--kernels", "6.12,7.3", filepath.Join(out, "r"))
	cmp.Dir = "../.."
	c, err := cmp.CombinedOutput()
	// Exit 1 is a regression between the versions: a result, shown, not a
	// harness failure.
	if err != nil && cmp.ProcessState.ExitCode() != 1 {
		t.Fatalf("fth compare --kernels: %v\n%s", err, c)
	}
	if !strings.Contains(string(c), "on Linux 6.12, candidate") || !strings.Contains(string(c), "x86_64-direct-calls-full") {
		t.Errorf("fth compare --kernels output:\n%s", c)
	}
	t.Logf("%s", c)
}
