package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/mutate"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/mutation"
)

// The floors are how many of an arch's default mutants (mutants/*.patch
// marked Default) the default campaign must detect, with the unmutated
// kernel passing the same campaign in the same run: the product's figure
// (README, What the default command finds) as a gate, each named from a
// measurement there. No seed is pinned: each run draws one and
// mutation.json records it.
const (
	// x86MutationFloor: measured 11 of 11 (seeds 1846748025, 484098865,
	// 1884598257, 1473444995), then 15 of 15 with four mutants of new
	// classes (seed 1835743233): 12 of 15 must be detected. On a machine
	// with TCG at half that speed: 12 of 15 (seed 333371689), then 14 of
	// 15 once the churn finished its delivery opening (seeds 50929725,
	// 815439233). 17 of 17 with the two excluded-delivery mutants and the
	// storm beside the churn (seed 153614667), then 16 of 17 (seed
	// 1505865481: the unlocked detach escaped): 14 of 17 must be detected.
	x86MutationFloor = 0.8
	// riscv64MutationFloor: measured 5 of 5 under QEMU 11.1 (seeds
	// 459041729, 92614105, 260797883, 415183005), then 7 of 8 with the new
	// mutants (seed 1166409709: the unlocked detach escaped); 7 of 8.
	riscv64MutationFloor = 0.8
	// arm64MutationFloor: measured 6 of 6 (seeds 296848637, 1785609755,
	// 1033219925, 1279011053), then 8 of 9 with the new mutants (seed
	// 1738378205, under load: the filter-change mutant escaped); 8 of 9.
	arm64MutationFloor = 0.83
)

// The harness finds real patching bugs: fth mutate, as a user runs it,
// builds an x86_64 kernel per default mutant, runs the default campaign
// on each and on the unmutated kernel, and must report the unmutated
// kernel clean and at least x86MutationFloor of the mutants detected.
// Two cells at once: each tcg-single guest keeps one host core busy, and
// 16 campaigns one after another take over an hour on a slow 2-core
// machine (4.5 minutes each measured on 2026-11-28's).
func TestMutationX86(t *testing.T) {
	mutationFloor(t, "x86_64", x86MutationFloor, 75*time.Minute, "--parallel", "2")
}

// The same on riscv64, under make test-all: a riscv64 campaign takes about
// 8 minutes under tcg-single, five of them would not fit CI's budget.
func TestMutationRISCV64(t *testing.T) {
	requireAll(t)
	mutationFloor(t, "riscv64", riscv64MutationFloor, 120*time.Minute)
}

// The same on arm64, under make test-all: a cold arm64 build and five
// campaigns of about 3.5 minutes each.
func TestMutationARM64(t *testing.T) {
	requireAll(t)
	mutationFloor(t, "arm64", arm64MutationFloor, 120*time.Minute)
}

func mutationFloor(t *testing.T, a arch.Name, floor float64, timeout time.Duration, flags ...string) {
	t.Helper()
	out := e2eOut(t)
	args := append([]string{"mutate", "--arches", string(a), "--out", out, "--run-id", "m"}, flags...)
	r := runCell(t, timeout, out, fthBin, args...)
	table := mutationTable(t, filepath.Join(out, "m"))
	ms, err := mutate.Load("../../mutants")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := mutate.Select(ms, nil, a)
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
	// The delivery oracle's class must show in the figure: a call lost
	// while another user's transition is in flight, which nothing else
	// sees (issue 26).
	silent, silentCaught := 0, 0
	for _, m := range defaults {
		if m.Class != mutate.TransientMisdelivery {
			continue
		}
		silent++
		for _, row := range table.Rows {
			if row.Mutant == m.Name && row.Detected {
				silentCaught++
			}
		}
	}
	if silent > 0 && silentCaught == 0 {
		t.Errorf("none of the %d %s mutants of class %s detected", silent, a, mutate.TransientMisdelivery)
	}
	n, detected, median := table.Summary()
	t.Logf("the campaign detected %d of %d %s mutants, median %.1f s, seed %d", detected, n, a, median, table.Seed)
	if float64(detected) < floor*float64(n) {
		t.Errorf("the campaign detected %d of %d %s mutants, below the floor of %.0f%%", detected, n, a, 100*floor)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
}

// mutationTable reads the mutation.json of the run in dir.
func mutationTable(t *testing.T, dir string) mutation.Table {
	t.Helper()
	table, err := mutation.Read(dir)
	if err != nil || table == nil {
		t.Fatalf("no mutation table: %v", err)
	}
	return *table
}

// TestMutationExcludedDelivery: the list function's per-ops rules
// (ftrace_ops_test(): the filter hash, the notrace hash) each broken by a
// mutant, against the default campaign, two cells at a time, as fth
// mutate runs the default set. The unmutated kernel must pass, and a
// mutant that is caught must be caught as a misdelivered call to a user
// its filter or notrace hash excludes. Detection itself is not required
// yet: the delivery walk reaches ops-notrace beside a shared
// fth_deliver_other only in some runs (caught in 1 of 2 measured runs,
// docs/mutation.md), until the opening makes that order. make test-all.
func TestMutationExcludedDelivery(t *testing.T) {
	requireAll(t)
	out := e2eOut(t)
	r := runCell(t, 40*time.Minute, out, fthBin, "mutate", "--arches", "x86_64", "--parallel", "2",
		"--mutants", "ftrace-ops-test-ignores-notrace,ftrace-ops-test-ignores-filter", "--out", out, "--run-id", "m")
	if r.exit != 0 {
		t.Fatalf("fth mutate exited %d (the unmutated kernel must pass):\n%s", r.exit, r.stdout)
	}
	table := mutationTable(t, filepath.Join(out, "m"))
	for _, row := range table.Rows {
		switch {
		case row.Mutant == "":
		case row.Detected && !strings.HasPrefix(row.Title, "misdelivered call: "):
			t.Errorf("%s caught by %q, want a misdelivered call", row.Mutant, row.Title)
		case row.Detected:
			t.Logf("%s caught in %.1f s: %s", row.Mutant, row.Seconds, row.Title)
		default:
			t.Logf("%s not caught in this run", row.Mutant)
		}
	}
}
