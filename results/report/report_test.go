package report

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/symbolize"
	"github.com/ftrace-harness/fth/wire/event"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the renderer's output")

// Real run directories, copied unchanged from out/runs and out/e2e.
const (
	realFail = "testdata/tcg-multi-1"  // tcg-multi MTTCG int3 oops
	realPass = "testdata/tcg-single-1" // 2,000 trampolines attached and detached
	realHang = "testdata/hang"         // QMP stop, registers.txt taken
)

var t0 = time.Date(2026, 11, 21, 7, 0, 0, 0, time.UTC)

func lat(minMS, p50, p90, p99, maxMS float64) event.Latency {
	d := func(v float64) event.Duration { return event.Duration(v * float64(time.Millisecond)) }
	return event.Latency{Count: 2000, Min: d(minMS), Median: d(p50), P90: d(p90), P99: d(p99), Max: d(maxMS)}
}

func phases() map[string]*event.Phase {
	return map[string]*event.Phase{
		"load":   {Name: "load", Attempted: 2000, Succeeded: 2000, Latency: lat(1, 2.4, 7.6, 15, 90), Wall: event.Duration(10 * time.Second)},
		"attach": {Name: "attach", Attempted: 2000, Succeeded: 1998, Failed: 2, Errnos: map[string]int{"EBUSY": 2}, Latency: lat(6, 16.4, 33.3, 63.4, 110), Wall: event.Duration(38 * time.Second)},
		"detach": {Name: "detach", Attempted: 1998, Succeeded: 1998, Latency: lat(7, 18.9, 41.8, 89, 150), Wall: event.Duration(45 * time.Second)},
	}
}

// syntheticRun writes a three-arch run with every verdict into a temporary
// directory, the way harness/matrix lays one out.
func syntheticRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nightly-42")
	cells := []struct {
		r        results.Result
		console  int
		progress bool
		regs     string
	}{
		{r: results.Result{Arch: "x86_64", Cell: "x86_64-direct-calls-full", Verdict: results.Pass, Accel: "tcg-single", Phases: phases()}, console: 5, progress: true},
		{r: results.Result{Arch: "x86_64", Cell: "x86_64-lockdep", Verdict: results.Fail, Accel: "tcg-single", Reason: "console: possible deadlock in ftrace_modify_all_code",
			Repro: "qemu-system-x86_64 -machine q35 -append 'console=ttyS0 <fth>'",
			Findings: []results.Finding{{Kind: "lockdep", Title: "possible deadlock in ftrace_modify_all_code", StartLine: 3, EndLine: 6,
				Report: "[   9.1] WARNING: possible circular locking dependency detected\n[   9.2] Call Trace:\n[   9.3]  ftrace_modify_all_code+0x1a/0x40\n[   9.4]  ftrace_run_update_code+0x20/0x80",
				Stack:  []string{"ftrace_modify_all_code", "ftrace_run_update_code"}}}}, console: 8},
		{r: results.Result{Arch: "x86_64", Cell: "x86_64-kasan", Verdict: results.Error, Accel: "tcg-single", Reason: "deadline 45m0s passed before the agent finished"}, console: 100},
		{r: results.Result{Arch: "arm64", Cell: "arm64-call-ops-full", Verdict: results.Pass, Accel: "tcg-single", Phases: phases()}, console: 5},
		{r: results.Result{Arch: "arm64", Cell: "arm64-no-call-ops-full", Verdict: results.Fail, Accel: "tcg-single", Reason: "hang: no output for 2m0s", Registers: "registers.txt", Ended: "silence",
			Findings: []results.Finding{{Kind: "hang", Title: "hang: no output for 2m0s"}}}, console: 60, regs: "CPU#0\nPC=ffff800080012340 X00=0000000000000000\nCPU#1\nPC=ffff800080012344 X00=0000000000000001\n"},
		{r: results.Result{Arch: "riscv64", Cell: "riscv64-call-ops-full", Verdict: results.Skip, Reason: "riscv64 cannot select DYNAMIC_FTRACE_WITH_CALL_OPS: CALL_OPS hangs direct calls there"}},
	}
	var sum results.Summary
	sum.RunID, sum.At = "nightly-42", t0.Add(3*time.Hour)
	for i, c := range cells {
		c.r.RunID, c.r.Scenario, c.r.StartedAt = "nightly-42", "attach-storm", t0.Add(time.Duration(i)*time.Minute)
		c.r.Timings.TotalSeconds = 60 + float64(i)
		cellDir := filepath.Join(dir, c.r.Cell)
		w, err := results.NewCellWriter(cellDir, c.r)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Update(func(r *results.Result) { r.Verdict = c.r.Verdict }); err != nil {
			t.Fatal(err)
		}
		if c.console > 0 {
			var b strings.Builder
			for n := 1; n <= c.console; n++ {
				fmt.Fprintf(&b, "[%4d.000000] console line %d of %s\n", n, n, c.r.Cell)
			}
			write(t, filepath.Join(cellDir, results.ConsoleLog), b.String())
		}
		if c.progress {
			var b strings.Builder
			for n, ph := range []string{"load", "attach", "detach"} {
				for done := 500; done <= 2000; done += 500 {
					ev := event.Event{Time: t0.Add(time.Duration(n*40+done/50) * time.Second), Kind: event.KindProgress, Progress: &event.Progress{Phase: ph, Done: done, Total: 2000}}
					line, _ := json.Marshal(ev)
					b.Write(append(line, '\n'))
				}
			}
			b.WriteString(`{"time":"2026-11-21T07:0`) // a harness killed mid-line
			write(t, filepath.Join(cellDir, results.EventsFile), b.String())
		}
		if c.regs != "" {
			write(t, filepath.Join(cellDir, results.RegistersFile), c.regs)
		}
		sum.Cells = append(sum.Cells, results.Summarize(c.r, cellDir))
	}
	if err := results.WriteSummary(dir, sum); err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyRun copies a testdata run so Write does not touch the repository.
func copyRun(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLoad(t *testing.T) {
	tests := []struct {
		dir                 string
		id                  string
		cells, progress     int
		files               []string
		verdict             results.Verdict
		variant, firstTitle string
	}{
		{dir: realFail, id: "tcg-multi-1", cells: 1, progress: 120, files: []string{results.ConsoleLog, results.EventsFile, results.ResultFile}, verdict: results.Fail, variant: "direct-calls-full", firstTitle: "Oops: int3 in __do_sys_newuname"},
		{dir: realPass, id: "tcg-single-1", cells: 1, progress: 80, files: []string{results.ConsoleLog, results.EventsFile, results.ResultFile}, verdict: results.Pass, variant: "direct-calls-full"},
		{dir: realHang, id: "r", cells: 1, files: []string{results.ConsoleLog, results.EventsFile, results.ResultFile, results.RegistersFile}, verdict: results.Fail, variant: "direct-calls-full", firstTitle: "hang: no output for 15s"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			run, err := results.LoadRun(context.Background(), tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			c := run.Cells[0]
			if run.ID != tt.id || len(run.Cells) != tt.cells || len(c.Progress) != tt.progress || c.Result.Verdict != tt.verdict || c.Variant != tt.variant || c.Result.Title() != tt.firstTitle || strings.Join(c.Files, ",") != strings.Join(tt.files, ",") {
				t.Errorf("run %s: id %q, %d cells, %d progress, verdict %s, variant %q, title %q, files %v", tt.dir, run.ID, len(run.Cells), len(c.Progress), c.Result.Verdict, c.Variant, c.Result.Title(), c.Files)
			}
		})
	}
}

func TestLoadOrderAndBadEvents(t *testing.T) {
	run, err := results.LoadRun(context.Background(), syntheticRun(t))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range run.Cells {
		names = append(names, c.Dir)
	}
	want := "x86_64-direct-calls-full x86_64-lockdep x86_64-kasan arm64-call-ops-full arm64-no-call-ops-full riscv64-call-ops-full"
	if strings.Join(names, " ") != want {
		t.Errorf("cells in %v, want summary.json's order %s", names, want)
	}
	if got := strings.Join(run.Arches(), " "); got != "x86_64 arm64 riscv64" {
		t.Errorf("arches %s", got)
	}
	if c := run.Cells[0]; len(c.Progress) != 12 || c.BadEvents != 1 {
		t.Errorf("progress %d, bad lines %d; want 12 and the half line", len(c.Progress), c.BadEvents)
	}
}

func TestLoadErrors(t *testing.T) {
	corrupt := copyRun(t, realPass)
	write(t, filepath.Join(corrupt, "x86_64-direct-calls-full", results.ResultFile), "{not json")
	tests := []struct {
		name, dir string
		is        error
		mentions  string
	}{
		{"missing directory", filepath.Join(t.TempDir(), "nope"), os.ErrNotExist, "out/runs/<run-id>"},
		{"parent of runs", "testdata", results.ErrNoCells, "testdata"},
		{"corrupt result.json", corrupt, nil, "result.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := results.LoadRun(context.Background(), tt.dir)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) || !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("Load(%s) = %v; want an error wrapping %v and naming %q", tt.dir, err, tt.is, tt.mentions)
			}
		})
	}
}

// writePage writes dir's report and returns report.html.
func writePage(t *testing.T, dir string) []byte {
	t.Helper()
	_, w, err := Write(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(w.Report)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// skeleton reduces an HTML page to its structure, one line per element (tag,
// id, class, link target, label) and per run of text, indented by depth.
// Plots are one line each and style sheets none, so the golden file pins
// down the page, not gonum's drawing or the CSS.
func skeleton(t *testing.T, page []byte) string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var out strings.Builder
	depth, hidden := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("page does not parse: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			depth++
			if hidden > 0 {
				hidden++
				continue
			}
			out.WriteString(strings.Repeat("  ", depth-1) + tok.Name.Local)
			for _, a := range tok.Attr {
				switch a.Name.Local {
				case "id":
					out.WriteString("#" + a.Value)
				case "class":
					out.WriteString("." + strings.ReplaceAll(a.Value, " ", "."))
				case "href", "aria-label":
					out.WriteString(fmt.Sprintf(" %s=%q", a.Name.Local, a.Value))
				}
			}
			out.WriteString("\n")
			if tok.Name.Local == "svg" || tok.Name.Local == "style" {
				hidden = 1
			}
		case xml.EndElement:
			depth--
			if hidden > 0 {
				hidden--
			}
		case xml.CharData:
			if hidden > 0 {
				continue
			}
			if s := strings.Join(strings.Fields(string(tok)), " "); s != "" {
				if r := []rune(s); len(r) > 70 {
					s = string(r[:70]) + "…"
				}
				out.WriteString(strings.Repeat("  ", depth) + strconvQuote(s) + "\n")
			}
		}
	}
	return out.String()
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

func TestRenderStructureGolden(t *testing.T) {
	dir := syntheticRun(t)
	run, err := results.LoadRun(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(context.Background(), &b, run, Options{ExcerptLines: 12}); err != nil {
		t.Fatal(err)
	}
	// The page shows the run directory as given, a temporary one here.
	got := skeleton(t, bytes.ReplaceAll(b.Bytes(), []byte(dir), []byte("out/runs/nightly-42")))
	golden := filepath.Join("testdata", "synthetic.golden")
	if *update {
		write(t, golden, got)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("page structure differs from %s (go test -update if intended):\n%s", golden, got)
	}
}

// The heatmap colours each slot by its cell's verdict, and every link on
// the page leads somewhere that exists: an anchor on the page or a file in
// the run directory. Nothing is fetched from elsewhere.
func TestRenderLinksAndHeatmap(t *testing.T) {
	dir := syntheticRun(t)
	page := writePage(t, dir)
	s := skeleton(t, page)
	for _, want := range []string{
		"td.verdict-pass\n", "td.verdict-fail\n", "td.verdict-error\n", "td.verdict-skip\n", "td.verdict-none\n            \"not run\"\n",
		`svg.plot aria-label="attach latency percentiles (p50, p90, p99) of every cell"`,
		`svg.plot aria-label="x86_64-direct-calls-full: operations completed over time per phase"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if !bytes.Contains(page, []byte("<td>ended by</td><td>silence</td>")) {
		t.Error("page lacks what ended the arm64 hang cell")
	}
	if n := checkLinks(t, dir, page); n < 10 {
		t.Errorf("only %d links", n)
	}
}

// checkLinks checks that every link on page leads somewhere that exists,
// an anchor on the page or a file under dir, and that nothing is fetched
// from elsewhere; it returns how many links there are.
func checkLinks(t *testing.T, dir string, page []byte) int {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	ids := map[string]bool{}
	var hrefs []string
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local == "script" || se.Name.Local == "link" || se.Name.Local == "img" {
				t.Errorf("page has a <%s>: it must be self-contained", se.Name.Local)
			}
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "id":
					ids[a.Value] = true
				case "href", "src":
					hrefs = append(hrefs, a.Value)
				}
			}
		}
	}
	for _, h := range hrefs {
		switch {
		case strings.Contains(h, "://"):
			t.Errorf("external reference %q", h)
		case strings.HasPrefix(h, "#"):
			if !ids[h[1:]] {
				t.Errorf("link %q has no target on the page", h)
			}
		default:
			if _, err := os.Stat(filepath.Join(dir, h)); err != nil {
				t.Errorf("link %q: %v", h, err)
			}
		}
	}
	return len(hrefs)
}

// Write leaves junit.xml and a summary.json rebuilt from the cells, whatever
// state the old summary was in.
func TestWriteRefreshesSummaryAndJUnit(t *testing.T) {
	dir := copyRun(t, realFail)
	if err := os.Remove(filepath.Join(dir, results.SummaryFile)); err != nil {
		t.Fatal(err)
	}
	run, w, err := Write(context.Background(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(w.Summary)
	if err != nil {
		t.Fatal(err)
	}
	var sum results.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.RunID != "tcg-multi-1" || len(sum.Cells) != 1 || sum.Cells[0].Verdict != results.Fail || sum.Cells[0].AttachMedianMS != 39.68 || sum.Schema != results.SchemaVersion {
		t.Errorf("summary = %+v", sum)
	}
	if sum.At.IsZero() || !sum.At.Equal(run.Cells[0].Result.StartedAt) {
		t.Errorf("summary time %v, want the first cell's start %v", sum.At, run.Cells[0].Result.StartedAt)
	}
	j, err := os.ReadFile(w.JUnit)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<testcase classname="x86_64" name="x86_64-direct-calls-full" time="196.`, `<failure message="Oops: int3 in __do_sys_newuname" type="oops"><![CDATA[[  192.569781] Oops: int3: 0000 [#1] SMP`} {
		if !bytes.Contains(j, []byte(want)) {
			t.Errorf("junit.xml lacks %q", want)
		}
	}
}

func TestWriteMarkdown(t *testing.T) {
	run, err := results.LoadRun(context.Background(), syntheticRun(t))
	if err != nil {
		t.Fatal(err)
	}
	run.Cells[1].Result.Findings[0].Title = "a | b"
	var b bytes.Buffer
	if err := WriteMarkdown(&b, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### fth run `nightly-42`: 2 fail, 1 error, 2 pass, 1 skip\n\n| cell | verdict |",
		"| x86_64-direct-calls-full | ✅ pass | 1998 | 16.4 / 63.4 | 18.9 | 60 s |  |\n",
		"| x86_64-lockdep | ❌ fail | 0 | 0.0 / 0.0 | 0.0 | 61 s | a \\| b |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}

// With the vmlinux that printed the real oops, the page shows its stack with
// file:line and inlined frames, and where each vCPU of the real hang was.
// That kernel is built by make test (e2e) or fth build; before, this skips.
func TestRenderSymbolizedWithRealVmlinux_SkipsUntilKernelBuilt(t *testing.T) {
	run, err := results.LoadRun(context.Background(), realFail)
	if err != nil {
		t.Fatal(err)
	}
	vmlinux := run.Cells[0].Result.Kernel.Vmlinux
	if _, err := os.Stat(vmlinux); err != nil {
		t.Skipf("%s (named by %s's result.json) is not on this machine: the e2e tests or bin/fth build --arch x86_64 build it", vmlinux, realFail)
	}
	for _, tt := range []struct {
		dir  string
		want []string
	}{
		{realFail, []string{"do_syscall_x64 arch/x86/entry/syscall_64.c:64 [inline]\ndo_syscall_64&#43;0x68/0x320 arch/x86/entry/syscall_64.c:87\n", "up_read&#43;0x1/0xc0 kernel/locking/rwsem.c:1675"}},
		{realHang, []string{"CPU#0 RIP=ffffffff8145b513: ", "arch/x86/kernel/process.c:"}},
	} {
		run, err := results.LoadRun(context.Background(), tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Render(context.Background(), &b, run, Options{AutoVmlinux: true}); err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: page lacks %q", tt.dir, w)
			}
		}
		if strings.Contains(b.String(), "stacks not symbolized") {
			t.Errorf("%s: page says stacks were not symbolized", tt.dir)
		}
	}
}

// Stack words that point into kernel text are named; data words are not.
// The words are put by hand after the real hang's registers: the RIP of its
// CPU#0 (text) and its RSP (data).
func TestRegisterLinesStackWords_SkipsUntilKernelBuilt(t *testing.T) {
	run, err := results.LoadRun(context.Background(), realHang)
	if err != nil {
		t.Fatal(err)
	}
	vmlinux := run.Cells[0].Result.Kernel.Vmlinux
	if _, err := os.Stat(vmlinux); err != nil {
		t.Skipf("%s (named by %s's result.json) is not on this machine", vmlinux, realHang)
	}
	sym, err := symbolize.Open(vmlinux, symbolize.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sym.Close()
	regs, err := os.ReadFile(filepath.Join(realHang, run.Cells[0].Result.Cell, results.RegistersFile))
	if err != nil {
		t.Fatal(err)
	}
	dump := string(regs) + "\nstack of CPU#0 at ffffffff81c03e30:\n+0x000 ffffffff81c03e30\n+0x008 ffffffff8145b513\n"
	lines := registerLines(context.Background(), dump, sym)
	stackOf := func(lines []string) (stack []string) {
		for _, l := range lines {
			if strings.Contains(l, " stack ") {
				stack = append(stack, l)
			}
		}
		return stack
	}
	stack := stackOf(lines)
	if len(stack) != 1 || !strings.HasPrefix(stack[0], "CPU#0 stack +0x008 ffffffff8145b513: ") || !strings.Contains(stack[0], "arch/x86/kernel/process.c:") {
		t.Errorf("stack lines = %q, want one for +0x008 in arch/x86/kernel/process.c", stack)
	}
	if none := stackOf(registerLines(context.Background(), dump, nil)); len(none) != 0 {
		t.Errorf("without a vmlinux: %q, want no lines (nothing tells code from data)", none)
	}
}

func TestRenderVmlinuxErrors(t *testing.T) {
	run, err := results.LoadRun(context.Background(), realFail)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "vmlinux")
	if err := Render(context.Background(), io.Discard, run, Options{Vmlinux: missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("explicit missing vmlinux: err = %v, want one naming it", err)
	}
	run.Cells[0].Result.Kernel.Vmlinux = missing
	var b bytes.Buffer
	if err := Render(context.Background(), &b, run, Options{AutoVmlinux: true}); err != nil {
		t.Fatal(err)
	}
	if want := "stacks not symbolized: " + missing + " is not on this machine (pass --vmlinux)"; !strings.Contains(b.String(), want) {
		t.Errorf("page lacks %q", want)
	}
}

// The churn-bench page: every link resolves (the board's pstore record
// too), and the heatmap names the non-default scenarios.
func TestRenderChurnBenchLinks(t *testing.T) {
	dir := copyRun(t, churnBench)
	page := writePage(t, dir)
	if n := checkLinks(t, dir, page); n < 12 {
		t.Errorf("only %d links", n)
	}
}

// The TCG caveat goes with TCG only: on KVM or a board the nanoseconds
// are the hardware's.
func TestTCGNote(t *testing.T) {
	for _, tt := range []struct {
		accel string
		note  bool
	}{{"tcg-single", true}, {"tcg-multi", true}, {"kvm", false}, {"", false}} {
		if got := tcgNote(tt.accel) != ""; got != tt.note {
			t.Errorf("tcgNote(%q) shown = %v, want %v", tt.accel, got, tt.note)
		}
	}
}

// A part that did not run says why; one the agent left out says so; no
// part is an empty table.
func TestBenchParts(t *testing.T) {
	b := &event.Bench{
		CPU:     -1,
		Ops:     &event.BenchOps{Skipped: "not requested (bench=syscall,scaling)"},
		Syscall: &event.BenchSyscall{Supported: true, Syscall: "getppid", Function: "__do_sys_getppid", States: []event.BenchSyscallState{{Name: "baseline", NsPerCall: 431.9, Ratio: 1}, {Name: "kprobe", Skipped: "kprobe: EOPNOTSUPP"}}},
		Scaling: &event.BenchScaling{Supported: true, Points: []event.BenchScalingPoint{{N: 100, Attached: 100, AttachSeconds: 1.2}}},
		Multi:   &event.BenchMulti{Supported: true, TracingMulti: event.BenchMultiLink{Errno: "EINVAL", Skipped: "BPF_TRACE_FENTRY_MULTI refused"}, KprobeMulti: event.BenchMultiLink{Supported: true, Points: []event.BenchMultiPoint{{N: 100, Error: "attach: ENOENT"}}}},
	}
	v, err := buildBench("c", "kvm", b, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, got, want string
	}{
		{"cpu", v.CPU, "not pinned (pinning failed)"},
		{"tcg note on kvm", v.TCGNote, ""},
		{"ops skipped", v.Ops.Skipped, "not requested (bench=syscall,scaling)"},
		{"ops not run", fmt.Sprint(v.Ops.Ran), "false"},
		{"syscall state skipped", v.Syscall.Rows[1].Ratio + " " + v.Syscall.Rows[1].Note, "– kprobe: EOPNOTSUPP"},
		{"one N draws no curve", string(v.Scaling.Seconds) + string(v.Scaling.PerOp), ""},
		{"tracing_multi refused", v.Multi.Rows[0].Note, "not supported: EINVAL: BPF_TRACE_FENTRY_MULTI refused"},
		{"kprobe_multi point failed", v.Multi.Rows[1].Note, "attach: ENOENT"},
		{"wakeup left out", v.Wakeup.Skipped, "not in the bench report"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

// Summaries and single checks are told apart the way results.AddOracle
// keeps them; figures are from the real sabotage runs.
func TestOracleRows(t *testing.T) {
	sums, checks := oracleRows([]event.Oracle{
		{Name: event.OracleCalibration, Function: "__do_sys_getppid", Expected: 0xffffffff810796c0, Got: 0xffffffff810796c0, OK: true, Checks: 1},
		{Name: event.OracleFuncIP, Function: "__task_pid_nr_ns", Expected: 0xffffffff81085990, Got: 0xffffffff81085950, Msg: "fentry: 7047 of 7047 hits saw bpf_get_func_ip 0xffffffff81085950, want 0xffffffff81085990"},
		{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Got: 999, Msg: "1000 calls, 999 hits (-1); recursion misses 0"},
		{Name: event.OracleFuncIP, Skipped: "not calibrated"},
		{Name: event.OracleExact, Function: "__do_sys_getppid", Expected: 1000, Checks: 3, Failures: 3},
	})
	var got []string
	for _, s := range sums {
		got = append(got, fmt.Sprintf("%s/%s/%s/%v", s.Name, s.Function, s.Result, s.Bad))
	}
	for _, c := range checks {
		got = append(got, fmt.Sprintf("check %s/%s %s→%s", c.Name, c.Function, c.Expected, c.Got))
	}
	want := []string{
		"func-ip-calibration/__do_sys_getppid/ok/false",
		"func-ip//skipped: not calibrated/false",
		"exact-count/__do_sys_getppid/FAILED/true",
		"check func-ip/__task_pid_nr_ns 0xffffffff81085990→0xffffffff81085950",
		"check exact-count/__do_sys_getppid 1000→999",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A run from before the host folded the bench event into result.json
// still shows its bench, from events.jsonl, and says where it came from.
func TestBenchFromEvents(t *testing.T) {
	dir := copyRun(t, churnBench)
	path := filepath.Join(dir, "x86_64-bench", results.ResultFile)
	r, err := results.ReadResult(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Bench = nil
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, string(b))
	run, err := results.LoadRun(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range run.Cells {
		wantFromEvents := c.Dir == "x86_64-bench"
		if c.BenchFromEvents != wantFromEvents || (wantFromEvents && (c.Result.Bench == nil || len(c.Result.Bench.Scaling.Points) != 6)) {
			t.Errorf("%s: BenchFromEvents %v, bench %v", c.Dir, c.BenchFromEvents, c.Result.Bench != nil)
		}
	}
	var page bytes.Buffer
	if err := Render(context.Background(), &page, run, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"result.json has no bench section", `<table class="bench-scaling">`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// A mutation run's report shows its table: each mutant's row with detected,
// seconds and title, and the unmutated kernel's verdict.
func TestReportShowsMutationTable(t *testing.T) {
	dir := t.TempDir()
	table := `{"run_id":"m","seed":7,"budget_seconds":120,"rows":[
 {"mutant":"","arch":"x86_64","detected":false,"verdict":"pass","cell":"x86_64-unmutated"},
 {"mutant":"bpf-tramp-free-now","class":"trampoline-freed-early","arch":"x86_64","detected":true,"seconds":31.5,"title":"Oops: int3 in bpf_trampoline_6442","verdict":"fail","cell":"x86_64-bpf-tramp-free-now"},
 {"mutant":"x86-int3-steps-reordered","class":"patch-unsynchronised","arch":"x86_64","detected":false,"verdict":"pass","cell":"x86_64-x86-int3-steps-reordered"}]}`
	if err := os.WriteFile(filepath.Join(dir, results.MutationFile), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readMutation(dir)
	if err != nil || m == nil {
		t.Fatalf("readMutation = %v, %v", m, err)
	}
	var b bytes.Buffer
	if err := page.Execute(&b, pageView{RunID: "m", Mutation: m}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{"1 of 2 mutants detected", "(unmutated)", "bpf-tramp-free-now", "31.5", "Oops: int3 in bpf_trampoline_6442", "x86-int3-steps-reordered"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if m, err := readMutation(t.TempDir()); m != nil || err != nil {
		t.Errorf("no mutation.json: %v, %v; want no table and no error", m, err)
	}
}

// A campaign cell shows its stages, and the one it failed in.
func TestCampaignStages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := results.Result{RunID: "run", Arch: "x86_64", Cell: "x86_64-direct-calls-full", Scenario: event.ScenarioCampaign, Verdict: results.Fail, Phases: phases(),
		Reason: "Oops: int3 in bpf_trampoline_6442", StartedAt: t0}
	for i, st := range event.Stages()[:3] {
		results.Apply(&r, event.Event{Time: t0.Add(time.Duration(30*i) * time.Second), Kind: event.KindStage, Stage: &event.Stage{Name: st}})
	}
	r.AddFindings(results.Finding{Kind: "oops", Title: "Oops: int3 in bpf_trampoline_6442"})
	page := failedCellPage(t, dir, r)
	for _, want := range []string{"Campaign stages", "1998 of 2000 attached", "the cell failed here"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Count(page, "the cell failed here") != 1 {
		t.Errorf("report.html marks %d stages as failed, want the race alone", strings.Count(page, "the cell failed here"))
	}
}

// A race cell's windows are tables: an instruction per row, each point's
// outcome, a crashed one marked, the unexplored ones said.
func TestRaceWindows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := results.Result{RunID: "run", Arch: "x86_64", Cell: "x86_64-direct-calls-full", Scenario: event.ScenarioRace, Verdict: results.Fail, StartedAt: t0,
		Windows: []event.RaceWindow{{Target: "trampoline", Symbol: "bpf_trampoline_10737479715", Arch: "amd64", Actions: []string{"replace"},
			Insns: []event.WindowInsn{{Off: 0, Len: 1, Asm: "push %rbp"}, {Off: 1, Len: 3, Asm: "mov %rsp,%rbp"}, {Off: 4, Len: 4, Asm: "sub $0x28,%rsp"}}}},
		Injections: []event.Injection{
			{Seq: 1, Target: "trampoline", Offset: 0, Action: "replace", Outcome: event.InjSurvived},
			{Seq: 2, Target: "trampoline", Offset: 1, Action: "replace", Outcome: event.InjCrashed},
		}}
	page := failedCellPage(t, dir, r)
	for _, want := range []string{
		"Race window: trampoline",
		"trampoline: 2 of 3 instruction×action points explored (3 instructions × 1 action), 1 survived, 1 crashed",
		"<code>mov %rsp,%rbp</code></td><td class=\"bad\">crashed</td>",
		"<code>push %rbp</code></td><td>survived</td>",
		"<code>sub $0x28,%rsp</code></td><td><span class=\"muted\">not explored</span></td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// failedCellPage writes r as a failed cell of the run in dir and returns
// the run's report.html.
func failedCellPage(t *testing.T, dir string, r results.Result) string {
	t.Helper()
	w, err := results.NewCellWriter(filepath.Join(dir, r.Cell), r)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Update(func(x *results.Result) { x.Verdict = results.Fail }); err != nil {
		t.Fatal(err)
	}
	return string(writePage(t, dir))
}

// The delivery oracle's table lists every state change one user's attach
// or detach can make, the ones the run never made marked, and those the
// run made beyond them after.
func TestBuildDelivery(t *testing.T) {
	v := buildDelivery(&event.Delivery{Steps: 3, Checked: 900, Users: []event.DeliveryUser{{Name: "ops", Attaches: 2}, {Name: "fprobe", Skipped: "no CONFIG_FPROBE"}},
		Edges: map[string]int{"nop -> one-ops": 2, "one-ops -> nop": 1, "nop -> list": 1}})
	if v == nil || len(v.Edges) != len(event.DeliveryEdges())+1 {
		t.Fatalf("view = %+v", v)
	}
	if v.Edges[0] != (edgeRow{"nop -> one-ops", 2}) || v.Edges[2] != (edgeRow{"one-ops -> list", 0}) || v.Edges[len(v.Edges)-1] != (edgeRow{"nop -> list", 1}) {
		t.Errorf("edges = %+v", v.Edges)
	}
	if buildDelivery(nil) != nil {
		t.Error("a cell without the oracle has a delivery table")
	}
}

func TestMultiLiveTable(t *testing.T) {
	if v := multiLiveTable(nil); v != nil {
		t.Errorf("a report without the part gained a section: %+v", v)
	}
	v := multiLiveTable(&event.BenchMultiLive{Skipped: "the kernel refused a tracing_multi population"})
	if v.Ran || v.Skipped != "the kernel refused a tracing_multi population" {
		t.Errorf("skipped part: %+v", v)
	}
	m := &event.BenchMultiLive{Supported: true, Samples: 200,
		Detach: &event.Phase{Attempted: 40000, Succeeded: 40000, Wall: event.Duration(3 * time.Second)},
		Points: []event.MultiLivePoint{{Live: 10000, Grow: event.Phase{Failed: 2, Wall: event.Duration(1500 * time.Millisecond)},
			Link: event.BenchScalingPoint{N: 200, Attached: 200, Attach: event.Latency{Median: event.Duration(50 * time.Millisecond), P99: event.Duration(90 * time.Millisecond)}}}}}
	v = multiLiveTable(m)
	if !v.Ran || len(v.Rows) != 1 {
		t.Fatalf("view %+v", v)
	}
	r := v.Rows[0]
	for _, c := range []struct{ what, got, want string }{
		{"live", r.Live, "10000"}, {"grown", r.Grow, "1.50"}, {"refused", r.Refused, "2"},
		{"attached", r.Attached, "200 of 200"}, {"p50", r.AttachP50, "50.00 ms"}, {"p99", r.AttachP99, "90.00 ms"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if !strings.Contains(v.Caption, "40000 of 40000 functions in 3.00 s") {
		t.Errorf("caption %q lacks the population's detach", v.Caption)
	}
}
