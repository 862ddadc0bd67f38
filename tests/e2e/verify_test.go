package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVerifyFindings runs `fth verify` as `make verify-findings` does:
// every finding's standalone reproducer (its module and run.sh alone, no
// workload of the harness's and no debugger), 5 runs each of the kernel
// without the fix, with the fix and the control. The unfixed kernel must
// fail with the finding's title in at least 4 of 5 runs, the others pass
// every time; fth verify exits 1 otherwise. About an hour on x86_64 for
// Findings 1, 8, 9, 10 and 14 (ten patched builds, 75 boots): make
// test-all.
func TestVerifyFindings(t *testing.T) {
	requireAll(t)
	out := e2eOut(t)
	r := runCell(t, 150*time.Minute, out, fthBin, "verify", "--out", out, "--run-id", "r")
	if r.exit != 0 {
		t.Fatalf("fth verify exited %d:\n%s", r.exit, r.stdout)
	}
	recs := readVerify(t, filepath.Join(out, "r"))
	if len(recs) == 0 {
		t.Fatal("verify.json holds no finding")
	}
	for _, rec := range recs {
		if len(rec.Counts) != 3 || rec.Counts[0].Runs != 5 {
			t.Errorf("finding %s: %+v, want three cases of 5 runs", rec.Finding, rec.Counts)
		}
		rep, err := os.ReadFile(repoPath(rec.Report))
		if err != nil || !strings.HasPrefix(string(rep), "Subject: [BUG] ") {
			t.Errorf("finding %s: mail report %s: %v", rec.Finding, rec.Report, err)
		}
	}
}

// TestVerifyOneFinding is make test's end-to-end run of a standalone
// reproducer as a maintainer would run it: Finding 8's (a module, a
// program of raw bpf() calls and run.sh; no timing, so one run of each
// case judges it), once on the kernel without the fix (it must fail with
// the finding's title, and its mail report be written), once with the
// fix and once as its control (both must pass). One patched build and
// three short boots.
func TestVerifyOneFinding(t *testing.T) {
	out := e2eOut(t)
	r := runCell(t, 30*time.Minute, out, fthBin, "verify", "--findings", "8", "--runs", "1", "--out", out, "--run-id", "r")
	if r.exit != 0 {
		t.Fatalf("fth verify exited %d:\n%s", r.exit, r.stdout)
	}
	if !strings.Contains(r.stdout, "8 x86_64 unfixed 1/1 fixed 1/1 control 1/1 ") {
		t.Errorf("want the line \"8 x86_64 unfixed 1/1 fixed 1/1 control 1/1 <report>\", got:\n%s", r.stdout)
	}
	recs := readVerify(t, filepath.Join(out, "r"))
	if len(recs) != 1 || recs[0].Finding != "8" {
		t.Fatalf("verify.json: %+v, want Finding 8's record", recs)
	}
	rep, err := os.ReadFile(repoPath(recs[0].Report))
	if err != nil || !strings.HasPrefix(string(rep), "Subject: [BUG] ftrace: ") {
		t.Errorf("mail report %s: %v", recs[0].Report, err)
	}
}

// repoPath is a path fth printed, which is relative to the repository
// (where the tests run it) unless --out made it absolute.
func repoPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join("../..", p)
}

// verifyRecord is what the tests read of a verify.json record.
type verifyRecord struct {
	Finding string `json:"finding"`
	Report  string `json:"report"`
	Counts  []struct {
		AsExpected int `json:"as_expected"`
		Runs       int `json:"runs"`
	} `json:"counts"`
}

// readVerify reads the verify.json fth verify wrote in runDir.
func readVerify(t *testing.T, runDir string) []verifyRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "verify.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []verifyRecord
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	return recs
}
