// Package e2e boots real kernels: it runs the fth binary end to end (build →
// image → boot → stress → verdict) and checks the verdicts and the files it
// leaves. `go test -short` skips it.
package e2e

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/matrix"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/results/hang"
	"github.com/ftrace-harness/fth/wire/event"
)

var fthBin string

// clocks holds each test's wall time, printed when the package ends: go
// test shows it only when the package fails, which is when CI's budget
// needs to know where the time went.
var clocks = &testClocks{took: map[string]time.Duration{}}

type testClocks struct {
	mu   sync.Mutex
	took map[string]time.Duration
}

// clock times t from now to its end (subtests roll up into their parent's
// line only through the parent's own clock).
func clock(t *testing.T) {
	start := time.Now()
	t.Cleanup(func() {
		clocks.mu.Lock()
		defer clocks.mu.Unlock()
		clocks.took[t.Name()] += time.Since(start)
	})
}

// print writes one line per timed test, slowest first, and the total.
func (c *testClocks) print(w io.Writer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := slices.Sorted(maps.Keys(c.took))
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(c.took[b], c.took[a]) })
	var total time.Duration
	fmt.Fprintln(w, "e2e wall time per test, slowest first:")
	for _, n := range names {
		fmt.Fprintf(w, "  %6.0f s  %s\n", c.took[n].Seconds(), n)
		if !c.within(n) {
			total += c.took[n]
		}
	}
	fmt.Fprintf(w, "  %6.0f s  total\n", total.Seconds())
}

// within reports whether a test that encloses subtest n is timed itself,
// so that n's time is already in the total.
func (c *testClocks) within(n string) bool {
	for i := strings.LastIndex(n, "/"); i > 0; i = strings.LastIndex(n[:i], "/") {
		if _, ok := c.took[n[:i]]; ok {
			return true
		}
	}
	return false
}

func TestMain(m *testing.M) {
	// -short is parsed by m.Run, too late for us; read it from the args.
	for _, a := range os.Args {
		if a == "-test.short" || a == "-test.short=true" {
			os.Exit(m.Run())
		}
	}
	dir, err := os.MkdirTemp("", "fth-e2e-")
	if err != nil {
		panic(err)
	}
	fthBin = filepath.Join(dir, "fth")
	cmd := exec.Command("go", "build", "-o", fthBin, "../../harness/cmd/fth")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		panic("build fth: " + err.Error())
	}
	code := m.Run()
	clocks.print(os.Stdout)
	os.RemoveAll(dir)
	os.Exit(code)
}

type fthRun struct {
	exit   int
	stdout string
	stderr string
	cell   string // the cell directory
	result results.Result
	took   time.Duration
}

// runFth runs `fth run --arch x86_64` with args into a fresh out directory
// under out/e2e.
func runFth(t *testing.T, timeout time.Duration, args ...string) fthRun {
	t.Helper()
	return runFthArch(t, "x86_64", timeout, args...)
}

// runFthArch is runFth for any arch.
func runFthArch(t *testing.T, arch string, timeout time.Duration, args ...string) fthRun {
	t.Helper()
	out := e2eOut(t)
	full := append([]string{"run", "--arch", arch, "--out", out, "--run-id", "r"}, args...)
	return runCell(t, timeout, out, fthBin, full...)
}

// runMake runs `make test-arch=<arch>` from the repository root exactly as a
// developer types it, with FTH_RUN_FLAGS only naming the output directory
// and adding args: the path through make is where a MAKEFLAGS leak once
// broke every arch whose kernel ARCH differs from fth's name (riscv64).
func runMake(t *testing.T, arch string, timeout time.Duration, args ...string) fthRun {
	t.Helper()
	out := e2eOut(t)
	flags := strings.Join(append([]string{"--out", out, "--run-id", "r"}, args...), " ")
	return runCell(t, timeout, out, "make", "--no-print-directory", "test-arch="+arch, "FTH_RUN_FLAGS="+flags)
}

// e2eOut is a fresh output directory for t under out/e2e.
func e2eOut(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a kernel; skipped with -short")
	}
	clock(t)
	out, _ := filepath.Abs(filepath.Join("../../out/e2e", t.Name()))
	// A failed run's output is kept beside the next run's (a rare
	// failure's console was once lost to the rerun that overwrote it).
	if _, err := os.Stat(filepath.Join(out, failedMark)); err == nil {
		_ = os.Rename(out, out+".failed-"+time.Now().UTC().Format("20060102-150405"))
	}
	os.RemoveAll(out)
	t.Cleanup(func() {
		if t.Failed() {
			_ = os.MkdirAll(out, 0o755)
			_ = os.WriteFile(filepath.Join(out, failedMark), []byte(t.Name()+"\n"), 0o644)
		}
	})
	return out
}

// failedMark marks a test's output directory as a failed run's.
const failedMark = "FAILED"

// runCell runs name with args from the repository root and reads the one
// cell it wrote under out/r.
func runCell(t *testing.T, timeout time.Duration, out, name string, args ...string) fthRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "../.."
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	r := fthRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
	}
	t.Logf("%s %s: exit %d in %s\nstdout:\n%s", name, strings.Join(args, " "), r.exit, r.took.Round(time.Second), r.stdout)
	cells, _ := filepath.Glob(filepath.Join(out, "r", "*", "result.json"))
	if len(cells) == 1 {
		r.cell = filepath.Dir(cells[0])
		res, err := results.ReadResult(cells[0])
		if err != nil {
			t.Fatalf("result.json: %v", err)
		}
		r.result = res
	}
	if t.Failed() || r.exit != 0 {
		t.Logf("stderr:\n%s", r.stderr)
	}
	return r
}

func (r fthRun) mustCell(t *testing.T) {
	t.Helper()
	if r.cell == "" {
		t.Fatalf("no cell directory with a result.json was written")
	}
	for _, f := range []string{"console.log", "events.jsonl", "result.json"} {
		if st, err := os.Stat(filepath.Join(r.cell, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty in %s", f, r.cell)
		}
	}
}

// logConsoleTail logs the last n lines of the cell's console.log, so that
// a failure in CI, whose output directory is gone with the machine, keeps
// the kernel's side of it in the test's output. When the harness asked
// the kernel with sysrq (a hang), the n lines before its first dump go
// first instead: the task dumps that follow would fill the tail, and CI
// keeps only the start of a long failure.
func (r fthRun) logConsoleTail(t *testing.T, n int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.cell, "console.log"))
	if err != nil {
		t.Logf("console.log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "sysrq: ") }); i >= 0 {
		before := lines[max(0, i-n):i]
		t.Logf("the %d lines of %s before the first sysrq dump:\n%s", len(before), filepath.Join(r.cell, "console.log"), strings.Join(before, "\n"))
		return
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("the last %d lines of %s:\n%s", len(lines), filepath.Join(r.cell, "console.log"), strings.Join(lines, "\n"))
}

// (a) The x86_64 7.3 kernel passes the default cell, the campaign — 2,000
// trampolines attached under preempt=full and kept, the churn with its
// oracles on top, preemptions injected at a trampoline's first
// instruction, a sample detached with timing — run as a developer runs
// it, `make test-arch=x86_64`. The seed is not pinned: each run draws one
// and result.json records it, so a failure here is a finding to reproduce
// with that seed, not a flake to retry.
func TestX86CampaignPasses(t *testing.T) {
	r := runMake(t, "x86_64", 45*time.Minute)
	r.mustCell(t)
	res := r.result
	t.Logf("seed %s (bin/fth repro %s replays it)", res.Seed, r.cell)
	if r.exit != 0 || res.Verdict != results.Pass {
		t.Fatalf("exit %d, verdict %s (%s), want a pass", r.exit, res.Verdict, res.Reason)
	}
	campaignRan(t, res, true)
	churnPasses(t, r, false)
	attach := res.Phases["attach"]
	if attach == nil || attach.Succeeded < 2000 {
		t.Fatalf("attach phase = %+v, want ≥ 2000 attached", attach)
	}
	if res.PreemptModel != "full" {
		t.Errorf("preempt model = %q, want full", res.PreemptModel)
	}
	if !strings.HasPrefix(res.Kernel.Release, "7.3") && os.Getenv("KERNEL_SRC") == "" {
		t.Errorf("kernel release = %q, want the Debian 7.3 tree", res.Kernel.Release)
	}
	for _, sym := range []string{"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS", "CONFIG_PREEMPT_DYNAMIC", "CONFIG_DEBUG_INFO_BTF"} {
		if res.Kernel.Verified[sym] != "y" {
			t.Errorf("result.json kernel.verified[%s] = %q, want y", sym, res.Kernel.Verified[sym])
		}
	}
	if res.Accel == "" || res.Accel == "auto" {
		t.Errorf("accel = %q, want the resolved mode", res.Accel)
	}
	if d := res.Phases["detach"]; d == nil || d.Succeeded != min(attach.Succeeded, matrix.DefaultDetach) || d.Latency.Count != d.Succeeded {
		t.Errorf("detach phase = %+v, want a timed sample of %d", d, matrix.DefaultDetach)
	}
	if !strings.Contains(r.stdout, "stage by stage") {
		t.Errorf("summary table does not show the campaign's stages:\n%s", r.stdout)
	}
	// x86_64's race stage walks both trampoline images whole, the fentry
	// image's from its first instruction and the fexit image's from its
	// return, then the ops trampoline's window from its first instruction
	// and the INT3 patcher's from its last step within their shares; and
	// the run prints how far.
	// Every point is injected at; one whose task the preemptor did not
	// take in pointTries tries (a loaded host) is injected at but not
	// explored, and a couple such are allowed.
	for _, w := range res.Windows {
		if (w.Target != "trampoline" && w.Target != "fexittramp") || len(w.Insns) == 0 {
			continue
		}
		cov, points := res.WindowCoverage(w)
		if cov.Points == 0 || len(points) != cov.Points || cov.Explored < cov.Points-2 {
			t.Errorf("%s: %d of %d points injected at, %d explored; want every one injected at and all but 2 at most explored (%+v)", w.Target, len(points), cov.Points, cov.Explored, cov)
		}
	}
	for _, target := range []string{"trampoline", "opstramp", "int3", "fexittramp"} {
		i := slices.IndexFunc(res.Windows, func(w event.RaceWindow) bool { return w.Target == target && len(w.Insns) > 0 })
		if i < 0 {
			t.Errorf("no decoded %s window: %+v", target, res.Windows)
			continue
		}
		first := res.Windows[i].Insns[0].Off
		if target == "int3" || target == "fexittramp" {
			first = res.Windows[i].Insns[len(res.Windows[i].Insns)-1].Off
		}
		if !slices.ContainsFunc(res.Injections, func(in event.Injection) bool { return in.Target == target && in.Offset == first }) {
			t.Errorf("no %s injection at the window's first place (+%#x)", target, first)
		}
		if !strings.Contains(r.stdout, "  "+target+": ") {
			t.Errorf("summary lacks the %s coverage line:\n%s", target, r.stdout)
		}
	}
}

// campaignRan checks that a campaign cell ran its stages in order, each
// with its work done; race says whether the arch injects.
func campaignRan(t *testing.T, res results.Result, race bool) {
	t.Helper()
	if res.Scenario != event.ScenarioCampaign {
		t.Fatalf("scenario = %q, want the campaign (fth run's default)", res.Scenario)
	}
	var names []string
	for _, st := range res.Stages {
		names = append(names, st.Name)
		if st.Skipped != "" && (st.Name != event.StageRace || race) {
			t.Errorf("stage %s skipped: %s", st.Name, st.Skipped)
		}
	}
	if !slices.Equal(names, event.Stages()) {
		t.Fatalf("stages = %v, want %v", names, event.Stages())
	}
	n := 0
	for _, tr := range res.Transitions {
		n += tr.Succeeded
	}
	if n == 0 {
		t.Errorf("the churn stage made no transition: %+v", res.Transitions)
	}
	if _, failed := results.FailedOracle(res.Oracles); failed || len(res.Oracles) == 0 {
		t.Errorf("oracles = %+v, want every one run and passed", res.Oracles)
	}
	if d, ok := oracleSummary(res, event.OracleDelivery, ""); !ok || d.Skipped != "" || d.Checks == 0 {
		t.Errorf("delivery oracle summary = %+v, want calls checked in the churn stage", d)
	}
	if !race {
		return
	}
	survived := 0
	for _, in := range res.Injections {
		if in.Outcome == event.InjSurvived {
			survived++
		}
	}
	if survived == 0 {
		t.Errorf("no injection of the race stage survived: %+v", res.Injections)
	}
	t.Logf("race stage: %d injections, %d survived", len(res.Injections), survived)
}

// (b) A crash injected in the guest is a fail with a crash title.
func TestX86InjectedCrashFails(t *testing.T) {
	r := runFth(t, 20*time.Minute, "--n", "100", "--crash", "sysrq-c")
	r.mustCell(t)
	res := r.result
	if r.exit != 1 || res.Verdict != results.Fail {
		t.Fatalf("exit %d, verdict %s (%s), want exit 1 and fail", r.exit, res.Verdict, res.Reason)
	}
	if len(res.Findings) == 0 || res.Findings[0].Title == "" {
		t.Fatalf("findings = %+v, want a titled crash", res.Findings)
	}
	if !strings.Contains(strings.ToLower(res.Title()), "sysrq") {
		t.Errorf("title = %q, want it to name the sysrq crash", res.Title())
	}
}

// (c) A hang (the VM stopped over QMP) is caught by the watchdog, with a
// register dump saved.
func TestX86HangDetected(t *testing.T) {
	r := runFth(t, 20*time.Minute, "--n", "50", "--hold", "60s", "--pause-after", "3s", "--silence", "15s", "--agent-arg", "scenario=storm")
	r.mustCell(t)
	res := r.result
	if r.exit != 1 || res.Verdict != results.Fail || !strings.HasPrefix(res.Reason, "hang") {
		t.Fatalf("exit %d, verdict %s (%s), want a hang fail", r.exit, res.Verdict, res.Reason)
	}
	regs, err := os.ReadFile(filepath.Join(r.cell, "registers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Both vCPUs' instruction pointers, and the paused state QMP reported.
	if c := bytes.Count(regs, []byte("RIP=")); c != 2 {
		t.Errorf("registers.txt has %d RIP= lines, want 2 (one per vCPU):\n%s", c, regs)
	}
	if !bytes.Contains(regs, []byte("status: paused")) {
		t.Errorf("registers.txt lacks the QMP status:\n%.300s", regs)
	}
	// And the top of each vCPU's stack, read through its own page tables. A
	// stack pointer at the very top of its stack (an empty stack, seen on
	// arm64) has nothing readable above it; that section says so instead.
	if c := bytes.Count(regs, []byte("stack of CPU#")); c != 2 {
		t.Errorf("registers.txt has %d stack sections, want 2 (one per vCPU):\n%s", c, regs)
	}
	words, unreadable := bytes.Count(regs, []byte("\n+0x")), bytes.Count(regs, []byte("\n  unreadable: "))
	if words+64*unreadable != 2*64 || words == 0 {
		t.Errorf("registers.txt has %d stack words and %d unreadable stacks, want 64 words per readable vCPU stack, at least one", words, unreadable)
	}
}

// (c2) A partial hang: one task stuck in D state while the agent keeps
// talking. Neither the silence watchdog nor done ends such a cell, so the
// console's hung-task report must, a tail after it, long before the
// deadline; with a register dump, as for any hang.
func TestX86PartialHangEndsCell(t *testing.T) {
	r := runFth(t, 20*time.Minute, "--n", "20", "--crash", "hung-task", "--hold", "15m", "--deadline", "15m")
	r.mustCell(t)
	res := r.result
	if r.exit != 1 || res.Verdict != results.Fail {
		t.Fatalf("exit %d, verdict %s (%s), want exit 1 and fail", r.exit, res.Verdict, res.Reason)
	}
	if len(res.Findings) == 0 || res.Findings[0].Kind != "hung-task" {
		t.Fatalf("findings = %+v, want a hung-task report first", res.Findings)
	}
	// The injected task, not some other one slow under TCG (the hung task
	// timeout is 2 s): its stack, which needs the console at log level 7,
	// goes through fth_target's dsleep.
	if f := res.Findings[0]; !slices.Contains(f.Stack, "dsleep_write") {
		t.Errorf("first finding %q has stack %v, want the injected task's, through dsleep_write", f.Title, f.Stack)
	}
	if res.Ended != "hang-report" {
		t.Errorf("ended = %q, want hang-report: the tail after the report must end the cell", res.Ended)
	}
	// The report comes a few seconds after the injection and the tail is
	// 60 s; the bound leaves room for a slow boot and attach under TCG,
	// and is far below the 15-minute hold the agent would otherwise wait out.
	if g := res.Timings.GuestSeconds; g > 300 {
		t.Errorf("the cell ran %.0f s, want it ended by the hang report's tail, well before its 15-minute hold", g)
	}
	if _, err := os.Stat(filepath.Join(r.cell, "registers.txt")); err != nil {
		t.Errorf("no register dump after the hang report: %v", err)
	}
	// Before the kill the monitor asked the kernel (sysrq w over a serial
	// break): the blocked tasks, the injected one among them, and the
	// hang stays the kernel's.
	h := res.Hang
	if h == nil || !slices.ContainsFunc(h.Blocked, func(b hang.Task) bool { return slices.Contains(b.Frames, "dsleep_write") }) {
		t.Errorf("hang explanation %+v: want sysrq w's blocked tasks, the injected one (through dsleep_write) among them", h)
	} else if h.Kind == console.KindHarnessInduced {
		t.Errorf("a real hang was explained as harness-induced: %q", h.Title)
	}
}

// (c3) A stall the harness causes itself: two agent threads at SCHED_FIFO
// on one CPU, the lower one starved for good while RCU-tasks waits for it
// (crash=rt-inversion, the shape of what the churn's old preemption
// pressure did by accident). The trampolines' detach blocks; the kernel's
// stall reports come; the monitor asks for the runqueues and must call it
// harness-induced, with the rows that show it, and never a kernel failure.
func TestX86HarnessInducedStall(t *testing.T) {
	r := runFth(t, 20*time.Minute, "--n", "20", "--crash", "rt-inversion", "--hold", "5s", "--deadline", "15m")
	r.mustCell(t)
	res := r.result
	if res.Verdict != results.Error || !strings.HasPrefix(res.Reason, "harness-induced stall") {
		t.Fatalf("verdict %s (%s), exit %d; want error: harness-induced stall", res.Verdict, res.Reason, r.exit)
	}
	h := res.Hang
	if h == nil || h.Kind != console.KindHarnessInduced {
		t.Fatalf("hang explanation %+v, want harness-induced", h)
	}
	if !strings.Contains(strings.Join(h.Evidence, "\n"), "waits behind the harness's real-time") {
		t.Errorf("evidence does not show the starved thread behind the harness's RT thread:\n%s", strings.Join(h.Evidence, "\n"))
	}
	for _, f := range res.Findings {
		if f.Kind != console.KindHarnessInduced && f.Induced == "" {
			t.Errorf("finding %s %q counts as the kernel's", f.Kind, f.Title)
		}
	}
	t.Logf("%s\n%s", h.Title, strings.Join(h.Evidence, "\n"))
}

// (d) A fragment asking for a symbol the kernel lacks fails before any build
// starts, naming the symbol and why.
func TestBadFragmentFailsBeforeBuild(t *testing.T) {
	frag, _ := filepath.Abs("testdata/impossible")
	kdir := t.TempDir()
	for _, f := range []string{"base", "arch/x86_64"} {
		os.MkdirAll(filepath.Join(kdir, filepath.Dir(f)), 0o755)
		b, err := os.ReadFile(filepath.Join("../../kconfigs", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(kdir, f), b, 0o644)
	}
	b, _ := os.ReadFile(frag)
	os.WriteFile(filepath.Join(kdir, "impossible"), b, 0o644)
	cache := t.TempDir()
	r := runFth(t, 5*time.Minute, "--kconfigs", kdir, "--fragments", "base,arch/x86_64,impossible", "--cache", cache)
	if r.exit != 2 {
		t.Fatalf("exit %d, want 2 (error)", r.exit)
	}
	for _, want := range []string{"CONFIG_TRACEFS", "impossible:3", "not available on this kernel version", "nothing was built"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "kernels", "*", "build")); len(entries) != 0 {
		t.Errorf("a build directory was created: %v", entries)
	}
	if r.took > time.Minute {
		t.Errorf("took %s: the check must come before configuring or building", r.took)
	}
}
