package mail

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/options"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the writer's output")

// cellFrom reads a fixture cell as Load does, without what depends on
// this machine (a vmlinux, the kernel's .config).
func cellFrom(t *testing.T, dir string) Cell {
	t.Helper()
	r, err := results.ReadResult(filepath.Join(dir, results.ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCell(r)
	c.ReproCommand = "fth repro out/runs/<run-id>/" + r.Cell
	if c.Agent.Reproducer != "" {
		c.Output = reproducerOutput(filepath.Join(dir, results.EventsFile), c.Agent.Reproducer)
	}
	return c
}

// TestGolden writes the report of a console finding, a failed check, a
// hang, and a known finding's reproducer with a bisection, and compares
// each with its golden file.
func TestGolden(t *testing.T) {
	report := filepath.Join("..", "report", "testdata")
	for _, tc := range []struct {
		name, dir string
		edit      func(*Cell)
		want      []string
	}{
		{
			name: "console", dir: filepath.Join(report, "tcg-multi-1", "x86_64-direct-calls-full"),
			edit: func(c *Cell) { c.StackNote = "the run's vmlinux is not on this machine" },
			want: []string{"Subject: [BUG] ftrace: Oops: int3 in __do_sys_newuname", "Oops: int3: 0000 [#1] SMP", "The call trace is not decoded"},
		},
		{
			name: "oracle", dir: filepath.Join(report, "churn-bench", "x86_64-direct-calls-full"),
			want: []string{"counted 999 of 1000 calls", "1000 calls, 999 hits"},
		},
		{
			name: "hang", dir: filepath.Join(report, "hang", "x86_64-direct-calls-full"),
			edit: func(c *Cell) { c.Attachments = []string{"console.log", "registers.txt"} },
			want: []string{"the kernel hangs: no console output for 15s", "registers.txt"},
		},
		{
			name: "known-bisect", dir: filepath.Join("testdata", "refused-direct"),
			edit: func(c *Cell) {
				b, err := os.ReadFile(filepath.Join("testdata", "bisect", results.BisectSummary))
				if err != nil {
					t.Fatal(err)
				}
				c.Bisect = string(b)
				c.Attachments = []string{"run.sh", "refused_direct.c", "ftrace-startup-check-ipmodify-before-listing.patch"}
			},
			want: []string{"Subject: [BUG] ftrace: a refused direct call is still taken after register_ftrace_direct() returns",
				"83 after a refusal", "ftrace_race_delay_ms=20", "./run.sh control", "Bisection:", "confidence 0.986",
				"Fix: ftrace-startup-check-ipmodify-before-listing.patch", "finding 14"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cellFrom(t, tc.dir)
			if tc.edit != nil {
				tc.edit(&c)
			}
			var b strings.Builder
			if err := Write(&b, Compose(c)); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("report lacks %q:\n%s", w, got)
				}
			}
			for _, w := range []string{"cell", "oracle", "churn", "stranger", "gdbstub", " hold"} {
				if strings.Contains(strings.ToLower(prose(got)), w) {
					t.Errorf("report says %q, the harness's word:\n%s", w, got)
				}
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("report differs from %s (go test -update if intended):\n%s", golden, got)
			}
		})
	}
}

// prose is the report without what it quotes: the kernel's log, the
// reproducer's output, commands and file names.
func prose(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "[") || strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "Attached:") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestLoad reads a real cell: the reproducer's files and the fixes are
// attached, the output read from its events, and a passing cell is
// refused.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	cell := filepath.Join(dir, "cell")
	if err := os.MkdirAll(cell, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{results.ResultFile, results.EventsFile, results.ConsoleLog} {
		b, err := os.ReadFile(filepath.Join("testdata", "refused-direct", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cell, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join("..", "..")
	c, files, err := Load(context.Background(), cell, Options{Repo: repo, Vmlinux: filepath.Join(dir, "no-vmlinux")})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"run.sh", "refused_direct.c", "ftrace-race-delay.patch", "ftrace-startup-check-ipmodify-before-listing.patch", "console.log"} {
		if _, ok := files[f]; !ok {
			t.Errorf("%s not attached (attachments: %v)", f, c.Attachments)
		}
	}
	if len(c.Output) == 0 || !strings.HasPrefix(c.Output[len(c.Output)-1], "FAIL: ") {
		t.Errorf("reproducer output = %q, want its lines ending in the FAIL line", c.Output)
	}
	out := filepath.Join(dir, "mail")
	if err := Save(out, Compose(c), files); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, ReportFile)); err != nil || !strings.HasPrefix(string(b), "Subject: [BUG] ftrace: ") {
		t.Errorf("saved report: %v %.80q", err, b)
	}

	pass := filepath.Join(report(), "tcg-single-1", "x86_64-direct-calls-full")
	if _, _, err := Load(context.Background(), pass, Options{}); err == nil || !strings.Contains(err.Error(), "nothing to report") {
		t.Errorf("Load(a passing cell) = %v, want an error saying there is nothing to report", err)
	}
}

func report() string { return filepath.Join("..", "report", "testdata") }

// TestReportsNameRealSequences checks that the findings' reports name
// repro sequences the agent has.
func TestReportsNameRealSequences(t *testing.T) {
	for _, r := range known.Reports() {
		for _, s := range r.Repros {
			if !slices.Contains(options.Repros(), s) {
				t.Errorf("finding %s names repro sequence %q, which the agent does not have", r.Number, s)
			}
		}
	}
}

// TestEveryFindingHasAMail composes the report of a failed cell for
// every finding of docs/findings.md, matched as a real cell would be (by
// its known ID, its repro sequence or its standalone reproducer), and
// checks that it carries the finding's subject, cause, reproduction and
// fix, in the kernel's words.
func TestEveryFindingHasAMail(t *testing.T) {
	for _, f := range known.Reports() {
		if !f.Bug {
			continue
		}
		r := results.Result{Arch: "x86_64", Verdict: results.Fail, Reason: "some title", CPUs: 2,
			Kernel: results.Kernel{Release: "7.3.4"}, Request: &results.Request{AgentArgs: map[string]string{}}}
		switch {
		case f.ID != "":
			r.Findings = []results.Finding{{Kind: "warning", Title: "WARNING in something", Known: f.ID}}
		case len(f.Repros) > 0:
			r.Request.AgentArgs["repro"] = f.Repros[0]
		case f.Standalone != "":
			r.Request.AgentArgs["reproducer"] = f.Standalone
		default:
			t.Logf("finding %s: neither an ID, a sequence nor a reproducer: reported by title only", f.Number)
			continue
		}
		c := NewCell(r)
		c.ReproCommand = "fth repro x"
		rep := Compose(c)
		if rep.Finding == nil || rep.Finding.Number != f.Number {
			t.Errorf("finding %s: matched %+v", f.Number, rep.Finding)
			continue
		}
		body := rep.Body
		if rep.Subject != "[BUG] "+f.Subject || !strings.Contains(body, strings.SplitN(f.Summary, "\n", 2)[0]) {
			t.Errorf("finding %s: subject %q, or the cause missing:\n%s", f.Number, rep.Subject, body)
		}
		if len(f.Fixes) > 0 && !strings.Contains(body, "Fix: "+f.Fixes[0]) {
			t.Errorf("finding %s: the fix is not named:\n%s", f.Number, body)
		}
		if f.Standalone != "" && !strings.Contains(body, strings.SplitN(f.Run, "\n", 2)[0]) {
			t.Errorf("finding %s: the standalone reproducer's steps are missing:\n%s", f.Number, body)
		}
		if !strings.Contains(body, "fth repro x") {
			t.Errorf("finding %s: no way to reproduce:\n%s", f.Number, body)
		}
	}
}
