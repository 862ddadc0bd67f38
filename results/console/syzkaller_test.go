package console

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// syzkallerDir holds the syzkaller-agreement corpus: a sample of syzkaller's
// own Linux report tests (testdata/SOURCES.md), imported by
// scripts/syzkaller-titles.sh. Each file is "SYZKALLER-TITLE: <title>", a
// blank line, then the log as syzkaller's report_test.go reads it.
const syzkallerDir = "syzkaller"

// The floors (issue 27, item 5). They are what the parser must
// reach, not what it happens to reach.
const (
	detectionFloor = 0.98
	agreementFloor = 0.80
)

type syzkallerCase struct {
	name  string
	title string
	log   []byte
}

func readSyzkallerCases(t *testing.T) []syzkallerCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", syzkallerDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	// In syzkaller's numeric order, so the list of disagreements reads
	// like its testdata directory.
	sort.Slice(paths, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(paths[i]))
		b, _ := strconv.Atoi(filepath.Base(paths[j]))
		return a < b
	})
	var cases []syzkallerCase
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		header, log, ok := bytes.Cut(data, []byte("\n\n"))
		title, isTitle := strings.CutPrefix(string(header), "SYZKALLER-TITLE: ")
		if !ok || !isTitle || title == "" || strings.Contains(title, "\n") {
			t.Fatalf("%s: want a single \"SYZKALLER-TITLE: <title>\" line, a blank line, then the log", p)
		}
		cases = append(cases, syzkallerCase{name: filepath.Base(p), title: title, log: log})
	}
	if len(cases) == 0 {
		t.Fatalf("no testdata/%s/<N> files: run scripts/syzkaller-titles.sh", syzkallerDir)
	}
	return cases
}

// titleFunction is the function a "<what> in <function>" title names: the
// text after its last " in ", compiler clone suffixes stripped the way the
// parser strips them from frames, "" for a title without one ("lost
// connection to test machine", "kernel panic: Attempted to kill init!").
// The same rule reads both syzkaller's titles and ours, so KCSAN's
// "f / g" and Rust's "<T>::f" compare whole.
func titleFunction(title string) string {
	i := strings.LastIndex(title, " in ")
	if i < 0 {
		return ""
	}
	fn := strings.TrimSpace(title[i+len(" in "):])
	parts := strings.Split(fn, " / ")
	for j, p := range parts {
		parts[j] = cleanFunc(p)
	}
	return strings.Join(parts, " / ")
}

// headline is the finding that heads a cell with these findings: the
// first one the harness did not cause itself (Kind.HarnessCaused),
// results.Result.Headline's first rule for a log with no known or induced
// marks. A log of the harness's own agent crashing is no kernel report.
func headline(found []Finding) (Finding, bool) {
	for _, f := range found {
		if !f.Kind.HarnessCaused() {
			return f, true
		}
	}
	return Finding{}, false
}

// TestTitlesAgreeWithSyzkaller measures the parser against syzkaller's
// titling on syzkaller's own report corpus (issue 27, item 5):
//
//   - detection: of the logs syzkaller titles, how many give us a headline
//     finding at all;
//   - agreement: of the logs whose syzkaller title names a function
//     (titleFunction), how many have a headline whose title names the
//     same function. A log we miss counts against agreement too. Titles
//     without a function are left out of agreement's denominator (they
//     still count for detection).
//
// go test ./results/console -run TestTitlesAgreeWithSyzkaller -v lists
// every miss and disagreement.
func TestTitlesAgreeWithSyzkaller(t *testing.T) {
	cases := readSyzkallerCases(t)
	detected, withFunc, agreed := 0, 0, 0
	var misses, disagreements []string
	for _, c := range cases {
		h, ok := headline(Parse(c.log))
		if ok {
			detected++
		} else {
			misses = append(misses, fmt.Sprintf("%s: no finding; syzkaller: %q", c.name, c.title))
		}
		want := titleFunction(c.title)
		if want == "" {
			continue
		}
		withFunc++
		if got := titleFunction(h.Title); ok && got == want {
			agreed++
		} else if ok {
			disagreements = append(disagreements, fmt.Sprintf("%s: %q names %q; syzkaller: %q names %q", c.name, h.Title, got, c.title, want))
		}
	}
	for _, m := range misses {
		t.Log("miss " + m)
	}
	for _, d := range disagreements {
		t.Log("disagree " + d)
	}
	t.Logf("detection %d of %d (%.1f%%), agreement %d of %d (%.1f%%)",
		detected, len(cases), 100*float64(detected)/float64(len(cases)),
		agreed, withFunc, 100*float64(agreed)/float64(withFunc))
	if float64(detected) < detectionFloor*float64(len(cases)) {
		t.Errorf("detection %d of %d is below the floor of %.0f%%", detected, len(cases), 100*detectionFloor)
	}
	if float64(agreed) < agreementFloor*float64(withFunc) {
		t.Errorf("agreement %d of %d is below the floor of %.0f%%", agreed, withFunc, 100*agreementFloor)
	}
}
