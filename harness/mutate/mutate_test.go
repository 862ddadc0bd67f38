package mutate

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
)

func mutantsDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "mutants")
}

// Every mutant the project ships parses, and the set covers what the
// signal issue asks for: every class, at least 8 mutants, over x86_64,
// arm64 and riscv64.
func TestShippedMutants(t *testing.T) {
	ms, err := Load(mutantsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	classes := map[Class]int{}
	arches := map[arch.Name]int{}
	for _, m := range ms {
		classes[m.Class]++
		for _, a := range m.Arches {
			arches[a]++
		}
		if !strings.Contains(string(m.Patch), "MUTANT "+m.Name) {
			t.Errorf("%s: the patch has no comment naming the mutant (MUTANT %s), so a crash's source line would not show it", m.Name, m.Name)
		}
	}
	if len(ms) < 8 {
		t.Errorf("%d mutants, want at least 8", len(ms))
	}
	for _, c := range Classes {
		if classes[c] == 0 {
			t.Errorf("no mutant of class %s", c)
		}
	}
	for _, a := range []arch.Name{arch.X86_64, arch.ARM64, arch.RISCV64} {
		if arches[a] == 0 {
			t.Errorf("no mutant for %s", a)
		}
	}
}

// Every shipped mutant applies to the kernel tree the cache holds (make
// deps unpacks it); without one the test says so and skips.
func TestShippedMutantsApply(t *testing.T) {
	src := os.Getenv("KERNEL_SRC")
	if src == "" {
		src = "/var/cache/fth/src/linux-source-7.3"
	}
	if _, err := os.Stat(filepath.Join(src, "Makefile")); err != nil {
		t.Skipf("no kernel tree at %s (make deps unpacks one)", src)
	}
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) is not installed")
	}
	ms, err := Load(mutantsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		out, err := exec.Command("patch", "-p1", "--dry-run", "--batch", "-d", src, "-i", filepath.Join(mutantsDir(t), m.Name+".patch")).CombinedOutput()
		if err != nil {
			t.Errorf("%s does not apply to %s: %v\n%s", m.Name, src, err, out)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	diff := "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n"
	ok := "Mutant: m\nClass: patch-unsynchronised\nArches: x86_64\nWhy: because\n\n"
	cases := map[string]struct{ name, text, want string }{
		"name mismatch":  {"n", ok + diff, "must agree"},
		"unknown class":  {"m", strings.Replace(ok, "patch-unsynchronised", "bogus", 1) + diff, "Class"},
		"unknown arch":   {"m", strings.Replace(ok, "x86_64", "vax", 1) + diff, "Arches"},
		"no why":         {"m", strings.Replace(ok, "Why: because\n", "", 1) + diff, "no Why"},
		"unknown header": {"m", ok + "Colour: red\n" + diff, "unknown header"},
		"bad agent":      {"m", ok + "Agent: churn\n" + diff, "key=value"},
		"not a diff":     {"m", ok, "unified diff"},
		"bad name":       {"M_1", ok + diff, "lower-case"},
		"unknown needs":  {"m", ok + "Needs: fpga\n" + diff, "want kvm"},
		"kvm default":    {"m", ok + "Needs: kvm\nDefault: true\n" + diff, "every TCG score"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(c.name, []byte(c.text))
			if err == nil || !errors.Is(err, ErrBadMutant) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrBadMutant saying %q", err, c.want)
			}
		})
	}
	m, err := Parse("m", []byte(ok+"Agent: churn=30s hot=4\nFragments: debug/lockdep\n"+diff))
	if err != nil || m.Agent["churn"] != "30s" || m.Agent["hot"] != "4" || m.Fragments[0] != "debug/lockdep" || m.Default || m.Needs != "" {
		t.Fatalf("Parse = %+v, %v", m, err)
	}
	if m, err := Parse("m", []byte(ok+"Needs: kvm\n"+diff)); err != nil || m.Needs != NeedsKVM {
		t.Fatalf("Parse with Needs: kvm = %+v, %v", m, err)
	}
}

func TestSelect(t *testing.T) {
	ms := []Mutant{
		{Name: "a", Arches: []arch.Name{arch.X86_64}, Default: true},
		{Name: "b", Arches: []arch.Name{arch.X86_64, arch.ARM64}},
		{Name: "c", Arches: []arch.Name{arch.ARM64}, Default: true},
	}
	names := func(ms []Mutant) (out []string) {
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}
	for _, c := range []struct {
		names []string
		a     arch.Name
		want  string
	}{
		{nil, arch.X86_64, "a"},
		{[]string{"all"}, arch.X86_64, "a b"},
		{[]string{"b", "c"}, arch.X86_64, "b"},
		{nil, arch.RISCV64, ""},
	} {
		got, err := Select(ms, c.names, c.a)
		if err != nil || strings.Join(names(got), " ") != c.want {
			t.Errorf("Select(%v, %s) = %v, %v; want %q", c.names, c.a, names(got), err, c.want)
		}
	}
	if _, err := Select(ms, []string{"zz"}, arch.X86_64); err == nil || !strings.Contains(err.Error(), "there are: a, b, c") {
		t.Errorf("an unknown name: %v", err)
	}
}

// A detection is every failure of the kernel's own, titled as the cell's
// headline; nothing the harness caused or already knew counts.
func TestJudge(t *testing.T) {
	crash := results.Finding{Kind: "oops", Title: "Oops: int3 in do_syscall_64", Report: "[   38.512000] Oops: int3: 0000 [#1] SMP\n[   38.512100] RIP: ..."}
	known := results.Finding{Kind: console.KindReset, Title: "reset: the guest reset with no console report", Known: "rcu-read-unlock-special-fentry"}
	stall := results.Finding{Kind: console.KindRCUStall, Title: "INFO: rcu_tasks detected stalls", Report: "[   20.000000] INFO: rcu_tasks detected stalls", Induced: "the agent's spinners starved rcu_tasks"}
	const exact = "oracle exact-count failed on __x64_sys_getppid: saw 0 of 1000 calls"
	cases := []struct {
		name   string
		r      results.Result
		detect bool
		secs   float64
		title  string
	}{
		{"pass", results.Result{Verdict: results.Pass}, false, 0, ""},
		{"console finding", results.Result{Verdict: results.Fail, Reason: crash.Title, Findings: []results.Finding{crash}, Timings: results.Timings{GuestSeconds: 70}}, true, 38.512, crash.Title},
		{"hang without a stamp", results.Result{Verdict: results.Fail, Findings: []results.Finding{{Kind: console.KindHang, Title: "hang: no output for 1m30s"}}, Timings: results.Timings{GuestSeconds: 99}}, true, 99, "hang: no output for 1m30s"},
		{"known finding only", results.Result{Verdict: results.Pass, Reason: "known finding rcu-read-unlock-special-fentry ended the run", Findings: []results.Finding{known}}, false, 0, ""},
		// Under --include-known the monitor fails it; the score still does not count it.
		{"known finding counted by --include-known", results.Result{Verdict: results.Fail, Reason: known.Title, Findings: []results.Finding{known}}, false, 0, ""},
		{"induced finding", results.Result{Verdict: results.Error, Reason: stall.Induced, Findings: []results.Finding{stall}}, false, 0, ""},
		{"harness-induced hang", results.Result{Verdict: results.Error, Reason: "x", Findings: []results.Finding{{Kind: console.KindHarnessInduced, Title: "x"}}}, false, 0, ""},
		{"induced, then a real oops", results.Result{Verdict: results.Fail, Reason: crash.Title, Findings: []results.Finding{stall, crash}, Timings: results.Timings{GuestSeconds: 70}}, true, 38.512, crash.Title},
		{"known, then a new one", results.Result{Verdict: results.Fail, Reason: crash.Title, Findings: []results.Finding{known, crash}}, true, 38.512, crash.Title},
		{"oracle failure", results.Result{Verdict: results.Fail, Reason: exact, Timings: results.Timings{GuestSeconds: 64.5}}, true, 64.5, exact},
		// The time to detect is when the oracle failed, not when the cell
		// ended.
		{"oracle failure with its time", results.Result{Verdict: results.Fail, Reason: exact, Timings: results.Timings{GuestSeconds: 440.1, OracleFailedSeconds: 225.3}}, true, 225.3, exact},
		{"liveness failure", results.Result{Verdict: results.Fail, Reason: "liveness: 2 hammer thread(s) stalled", Timings: results.Timings{GuestSeconds: 80}}, true, 80, "liveness: 2 hammer thread(s) stalled"},
		{"agent failure", results.Result{Verdict: results.Fail, Reason: "agent: 0 of 2000 attached", Timings: results.Timings{GuestSeconds: 12}}, true, 12, "agent: 0 of 2000 attached"},
		{"harness error", results.Result{Verdict: results.Error, Reason: "cell deadline of 12m0s passed while the guest was still talking", Timings: results.Timings{GuestSeconds: 720}}, false, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := Judge(c.r)
			if row.Detected != c.detect || row.Seconds != c.secs || row.Title != c.title || row.Verdict != c.r.Verdict || row.Reason != c.r.Reason {
				t.Errorf("Judge = %+v; want detected %v after %v s, titled %q", row, c.detect, c.secs, c.title)
			}
		})
	}
}
