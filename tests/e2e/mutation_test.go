package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/mutate"
	"github.com/ftrace-harness/fth/results"
)

// makeTestMutants are the x86_64 mutants `make test` must see detected, with
// the unmutated kernel passing the same scenario in the same run. No seed
// is pinned: each run draws one and mutation.json records it.
var makeTestMutants = []string{"bpf-tramp-free-now", "x86-int3-steps-reordered"}

// The harness finds real patching bugs: fth mutate builds x86_64 kernels
// with BPF trampoline images freed at once and with the INT3 patching
// steps reordered, runs the mutation churn on each and on the unmutated
// kernel, and must report both mutants detected and the unmutated kernel
// clean. (Measured: 11.5 s and 5.8 s from boot; `make mutation` has the
// whole set.)
func TestMutationX86(t *testing.T) {
	out := e2eOut(t)
	args := []string{"mutate", "--arches", "x86_64", "--mutants", joinComma(makeTestMutants), "--require-detected", "--out", out, "--run-id", "m"}
	r := runCell(t, 60*time.Minute, out, fthBin, args...)
	table := mutationTable(t, filepath.Join(out, "m"))
	if len(table.Rows) != 1+len(makeTestMutants) {
		t.Fatalf("%d rows, want the unmutated kernel and %d mutants: %+v", len(table.Rows), len(makeTestMutants), table.Rows)
	}
	for _, row := range table.Rows {
		switch {
		case row.Mutant == "":
			if row.Verdict != results.Pass || row.Detected {
				t.Errorf("the unmutated kernel: verdict %s (%s): it must pass, or no detection means anything", row.Verdict, row.Reason)
			}
		case !row.Detected:
			t.Errorf("mutant %s not detected: verdict %s (%s)", row.Mutant, row.Verdict, row.Reason)
		default:
			t.Logf("mutant %s detected in %.1f s: %s", row.Mutant, row.Seconds, row.Title)
			if row.BuildSeconds > 300 {
				t.Errorf("mutant %s took %.0f s to build: a one-file patch must rebuild from the unmutated build directory", row.Mutant, row.BuildSeconds)
			}
		}
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
	t.Logf("seed %d", table.Seed)
}

// mutationTable reads the mutation.json of the run in dir.
func mutationTable(t *testing.T, dir string) mutate.Table {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, results.MutationFile))
	if err != nil {
		t.Fatalf("no mutation table: %v", err)
	}
	var table mutate.Table
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	return table
}

func joinComma(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}
