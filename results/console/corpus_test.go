package console

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the TITLE/KIND/COUNT/VIA headers of testdata files from the parser's output")

// corpusCase is one testdata/<arch>/<case> file: a header of TITLE/KIND
// pairs, one per expected finding, each optionally followed by COUNT (how
// many reports the finding groups, when more than one) and VIA (its
// trampoline frame), a blank line, then a raw console log.
type corpusCase struct {
	path string
	want []expectation
	log  []byte
}

type expectation struct {
	Title string
	Kind  Kind
	Count int
	Via   string
}

func expect(f Finding) expectation {
	return expectation{Title: f.Title, Kind: f.Kind, Count: f.Count, Via: f.Trampoline}
}

func corpusFiles(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, m := range matches {
		// testdata/fuzz/ belongs to the fuzzer, testdata/syzkaller/ to
		// TestTitlesAgreeWithSyzkaller: its headers are syzkaller's titles.
		dir := filepath.Base(filepath.Dir(m))
		if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() && dir != "fuzz" && dir != syzkallerDir {
			files = append(files, m)
		}
	}
	if len(files) == 0 {
		t.Fatal("no testdata/<arch>/<case> files")
	}
	return files
}

func readCase(path string) (corpusCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return corpusCase{}, err
	}
	c := corpusCase{path: path}
	rest := data
	for {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		if !found {
			return c, fmt.Errorf("%s: header not terminated by a blank line", path)
		}
		rest = after
		if len(line) == 0 {
			break
		}
		key, value, ok := strings.Cut(string(line), ": ")
		switch {
		case !ok:
			return c, fmt.Errorf("%s: malformed header line %q", path, line)
		case key == "TITLE":
			c.want = append(c.want, expectation{Title: value, Count: 1})
		case key == "COUNT" || key == "VIA":
			if len(c.want) == 0 {
				return c, fmt.Errorf("%s: %s without its TITLE", path, key)
			}
			w := &c.want[len(c.want)-1]
			if key == "VIA" {
				w.Via = value
				break
			}
			n, err := strconv.Atoi(value)
			if err != nil || n < 2 {
				return c, fmt.Errorf("%s: COUNT %q: want a number above 1", path, value)
			}
			w.Count = n
		case key == "KIND":
			if len(c.want) == 0 || c.want[len(c.want)-1].Kind != "" {
				return c, fmt.Errorf("%s: KIND without its TITLE", path)
			}
			c.want[len(c.want)-1].Kind = Kind(value)
		default:
			return c, fmt.Errorf("%s: unknown header key %q", path, key)
		}
	}
	for _, w := range c.want {
		if w.Kind == "" {
			return c, fmt.Errorf("%s: TITLE %q without KIND", path, w.Title)
		}
	}
	c.log = rest
	return c, nil
}

func writeCase(path string, got []Finding, log []byte) error {
	var b bytes.Buffer
	for _, f := range got {
		fmt.Fprintf(&b, "TITLE: %s\nKIND: %s\n", f.Title, f.Kind)
		if f.Count > 1 {
			fmt.Fprintf(&b, "COUNT: %d\n", f.Count)
		}
		if f.Trampoline != "" {
			fmt.Fprintf(&b, "VIA: %s\n", f.Trampoline)
		}
	}
	b.WriteString("\n")
	b.Write(log)
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func TestCorpus(t *testing.T) {
	for _, path := range corpusFiles(t) {
		t.Run(filepath.ToSlash(strings.TrimPrefix(path, "testdata"+string(filepath.Separator))), func(t *testing.T) {
			c, err := readCase(path)
			if err != nil {
				t.Fatal(err)
			}
			got := Parse(c.log)
			checkInvariants(t, c.log, got)
			if *update {
				if err := writeCase(path, got, c.log); err != nil {
					t.Fatal(err)
				}
				return
			}
			var gotExp []expectation
			for _, f := range got {
				gotExp = append(gotExp, expect(f))
			}
			if !reflect.DeepEqual(gotExp, c.want) {
				t.Errorf("findings differ\ngot:\n%s\nwant:\n%s", formatExp(gotExp), formatExp(c.want))
				for _, f := range got {
					t.Logf("%d-%d %s [%s] stack=%v", f.StartLine, f.EndLine, f.Title, f.Kind, f.Stack)
				}
			}
		})
	}
}

func formatExp(es []expectation) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "  %s [%s] count=%d via=%q\n", e.Title, e.Kind, e.Count, e.Via)
	}
	return b.String()
}

// checkInvariants checks what must hold for any log: line numbers are in
// range and ordered, and Report is exactly those lines.
func checkInvariants(t *testing.T, log []byte, got []Finding) {
	t.Helper()
	lines := logLines(log)
	prevStart := 0
	for _, f := range got {
		if f.StartLine < 1 || f.StartLine > f.EndLine || f.EndLine > len(lines) {
			t.Errorf("%q: lines %d-%d out of range 1-%d", f.Title, f.StartLine, f.EndLine, len(lines))
			continue
		}
		if f.StartLine < prevStart {
			t.Errorf("%q: starts at %d, before the previous finding's %d", f.Title, f.StartLine, prevStart)
		}
		prevStart = f.StartLine
		want := strings.Join(lines[f.StartLine-1:f.EndLine], "\n")
		if f.Report != strings.ReplaceAll(want, "\r", "") {
			t.Errorf("%q: Report is not lines %d-%d", f.Title, f.StartLine, f.EndLine)
		}
		if f.Title == "" || f.Kind == "" {
			t.Errorf("finding at %d has no title or kind", f.StartLine)
		}
	}
}

func logLines(log []byte) []string {
	text := strings.TrimSuffix(string(log), "\n")
	if text == "" {
		return nil
	}
	return strings.Split(text, "\n")
}

// TestDetectorMatchesParse feeds every corpus log to a Detector a line at a
// time; live detection must find exactly what Parse finds.
func TestDetectorMatchesParse(t *testing.T) {
	endMarker := regexp.MustCompile(endTrace)
	for _, path := range corpusFiles(t) {
		c, err := readCase(path)
		if err != nil {
			t.Fatal(err)
		}
		want := Parse(c.log)
		d := NewDetector()
		var got []Finding
		lines := logLines(c.log)
		for i, line := range lines {
			for _, f := range d.Line(line) {
				// Live detection must not wait past an end marker, and
				// cannot know a report before its last line.
				if i+1 < f.EndLine {
					t.Errorf("%s: %q emitted at line %d, before its end %d", path, f.Title, i+1, f.EndLine)
				}
				if endMarker.MatchString(splitLine(0, lines[f.EndLine-1]).text) && i+1 != f.EndLine {
					t.Errorf("%s: %q ends with an end marker at %d but was emitted at %d", path, f.Title, f.EndLine, i+1)
				}
				got = append(got, f)
			}
		}
		got = append(got, d.Flush()...)
		sortFindings(got)
		got = group(got, lines)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Detector found %d reports, Parse %d, or they differ", path, len(got), len(want))
		}
	}
}

// A hang report has no end marker: in a real partial hang the console goes
// quiet after it, and the report ends only when another report or the
// line budget closes it. OpenKinds must name it from its header on, which
// is what starts the cell's tail.
func TestOpenKindsFromTheHeader(t *testing.T) {
	c, err := readCase(filepath.Join("testdata", "x86_64", "hung-task-dsleep-fth-7.3.4"))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDetector()
	header := -1
	for i, line := range logLines(c.log) {
		if fs := d.Line(line); len(fs) > 0 {
			t.Fatalf("line %d completed %q: the report must still be open at the end of this log", i+1, fs[0].Title)
		}
		open := d.OpenKinds()
		if strings.Contains(line, "blocked for more than") {
			header = i
		}
		if want := header >= 0; want != (len(open) == 1 && open[0] == KindHungTask) {
			t.Fatalf("line %d: open reports %v, want a hung-task from its header (line %d) on", i+1, open, header+1)
		}
	}
	if header < 0 {
		t.Fatal("the fixture has no hung-task header")
	}
	if fs := d.Flush(); len(fs) != 1 || fs[0].Kind != KindHungTask || len(d.OpenKinds()) != 0 {
		t.Errorf("Flush = %+v, then open %v; want the hung task, then nothing open", fs, d.OpenKinds())
	}
}

func sortFindings(fs []Finding) {
	for i := 1; i < len(fs); i++ {
		for j := i; j > 0 && fs[j].StartLine < fs[j-1].StartLine; j-- {
			fs[j], fs[j-1] = fs[j-1], fs[j]
		}
	}
}

// requiredReports are the report kinds the corpus must hold a fixture of
// (issue 15's list): each is a title prefix that some fixture's expected
// findings must start with.
var requiredReports = []string{
	"Internal error: ", "Unhandled fault: ", "Unable to handle kernel ", "Oops: illegal instruction", "BUG: Kernel NULL pointer dereference",
	"kernel BUG in ", "general protection fault", "PANIC: double fault", "Oops: divide error",
	ResetTitle, "bad unlock balance", "held lock freed", "still has locks held", "locking bug", "possible deadlock",
	"inconsistent lock state", "suspicious RCU usage", "trying to register non-static key",
	"BUG: using smp_processor_id() in preemptible code", "BUG: using __this_cpu_read() in preemptible code",
	"KCSAN: data-race", "KASAN: ", "memory leak", "ODEBUG: ", "refcount_t: ", "BUG: bad usercopy",
	"WARNING: kernel stack frame pointer has bad value", "INFO: rcu_tasks grace period stall", "INFO: rcu detected stall",
	"unregister_netdevice: waiting for", "WARNING in ", "kernel panic: ", "INFO: task hung", "BUG: soft lockup",
	"BUG: hard lockup", "BUG: workqueue lockup", "ftrace bug: ",
}

// cleanArches are the arches the harness runs; each needs report-free
// logs in the corpus, which must yield no finding. noCleanLog lists those
// that have none yet, and why; an arch leaves it once it has one.
var (
	cleanArches = []string{"x86_64", "arm64", "riscv64", "powerpc"}
	noCleanLog  = map[string]string{}
)

// TestCorpusCoverage checks that every required report kind has a
// fixture, and every arch its clean logs, and logs the fixture counts per
// kind and arch (go test -v -run TestCorpusCoverage) that README quotes.
func TestCorpusCoverage(t *testing.T) {
	counts := map[string]map[string]int{}
	clean := map[string]int{}
	var titles []string
	for _, path := range corpusFiles(t) {
		c, err := readCase(path)
		if err != nil {
			t.Fatal(err)
		}
		arch := filepath.Base(filepath.Dir(path))
		if len(c.want) == 0 {
			clean[arch]++
			continue
		}
		seen := map[Kind]bool{}
		for _, w := range c.want {
			titles = append(titles, w.Title)
			if !seen[w.Kind] {
				seen[w.Kind] = true
				if counts[string(w.Kind)] == nil {
					counts[string(w.Kind)] = map[string]int{}
				}
				counts[string(w.Kind)][arch]++
			}
		}
	}
	for _, prefix := range requiredReports {
		found := false
		for _, title := range titles {
			if strings.HasPrefix(title, prefix) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no fixture is titled %q...: add a real log of it under testdata/<arch>/", prefix)
		}
	}
	for _, arch := range cleanArches {
		_, excused := noCleanLog[arch]
		switch {
		case clean[arch] == 0 && !excused:
			t.Errorf("%s: no report-free log in testdata/%s", arch, arch)
		case clean[arch] > 0 && excused:
			t.Errorf("%s has clean logs now: drop it from noCleanLog", arch)
		}
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		t.Logf("%-12s x86_64=%d arm64=%d riscv64=%d powerpc=%d arm=%d", k, counts[k]["x86_64"], counts[k]["arm64"], counts[k]["riscv64"], counts[k]["powerpc"], counts[k]["arm"])
	}
	t.Logf("%-12s x86_64=%d arm64=%d riscv64=%d powerpc=%d arm=%d", "clean", clean["x86_64"], clean["arm64"], clean["riscv64"], clean["powerpc"], clean["arm"])
}
