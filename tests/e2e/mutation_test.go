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

// x86MutationFloor is how many of x86_64's default mutants (mutants/*.patch
// marked Default) the default campaign must detect in make test, with the
// unmutated kernel passing the same campaign in the same run: the product's
// figure (README, What the default command finds) as a gate. No seed is
// pinned: each run draws one and mutation.json records it.
const x86MutationFloor = 0.8

// The harness finds real patching bugs: fth mutate, as a user runs it,
// builds an x86_64 kernel per default mutant, runs the default campaign
// on each and on the unmutated kernel, and must report the unmutated
// kernel clean and at least x86MutationFloor of the mutants detected.
func TestMutationX86(t *testing.T) {
	out := e2eOut(t)
	args := []string{"mutate", "--arches", "x86_64", "--out", out, "--run-id", "m"}
	r := runCell(t, 75*time.Minute, out, fthBin, args...)
	table := mutationTable(t, filepath.Join(out, "m"))
	ms, err := mutate.Load("../../mutants")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := mutate.Select(ms, nil, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1+len(defaults) {
		t.Fatalf("%d rows, want the unmutated kernel and %d default mutants: %+v", len(table.Rows), len(defaults), table.Rows)
	}
	for _, row := range table.Rows {
		switch {
		case row.Mutant == "":
			if row.Verdict != results.Pass || row.Detected {
				t.Errorf("the unmutated kernel: verdict %s (%s): it must pass, or no detection means anything", row.Verdict, row.Reason)
			}
		case !row.Detected:
			t.Logf("mutant %s not detected: verdict %s (%s)", row.Mutant, row.Verdict, row.Reason)
		default:
			t.Logf("mutant %s detected in %.1f s: %s", row.Mutant, row.Seconds, row.Title)
			if row.BuildSeconds > 300 {
				t.Errorf("mutant %s took %.0f s to build: a one-file patch must rebuild from the unmutated build directory", row.Mutant, row.BuildSeconds)
			}
		}
	}
	n, detected, median := table.Summary()
	t.Logf("the campaign detected %d of %d mutants, median %.1f s, seed %d", detected, n, median, table.Seed)
	if float64(detected) < x86MutationFloor*float64(n) {
		t.Errorf("the campaign detected %d of %d x86_64 mutants, below the floor of %.0f%%", detected, n, 100*x86MutationFloor)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
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
