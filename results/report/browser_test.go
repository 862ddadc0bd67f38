package report

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// churnBench is a run assembled from real churn, bench and board cells
// (see testdata/churn-bench/README.md).
const churnBench = "testdata/churn-bench"

// chromiumNames are the names Debian's chromium package (in make deps)
// and other distributions give the browser.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome"}

// benchPlots are the aria-labels of the churn-bench bench cell's plots.
var benchPlots = []string{
	"x86_64-bench: total attach and detach seconds against N, log-log, dashed lines for linear growth from the first N",
	"x86_64-bench: per-trampoline attach and detach median and p99 against N",
	"x86_64-bench: wakeup latency percentiles, quiet and during an attach storm",
}

// pageCases are the pages both tests below check: what report.html must
// hold, as written and as a browser ends up with it.
var pageCases = []struct {
	name  string
	dir   func(t *testing.T) string
	plots int
	want  []string
	// labels are plots that must be there, each drawn (not an empty <svg>).
	labels []string
}{
	// attach bars, the cell's latency and progress plots (it died before detach)
	{name: "real failing run", dir: func(t *testing.T) string { return copyRun(t, realFail) }, plots: 3, want: []string{`class="verdict-fail"`, "Oops: int3 in __do_sys_newuname"}},
	// attach and detach bars, latency, progress
	{name: "real passing run", dir: func(t *testing.T) string { return copyRun(t, realPass) }, plots: 4, want: []string{`class="verdict-pass"`}},
	// paused after loading 50 programs: the load latency plot, and the
	// vCPUs' registers
	{name: "real hang", dir: func(t *testing.T) string { return copyRun(t, realHang) }, plots: 1, want: []string{"vCPUs when stopped", "RIP=ffffffff8145b513"}},
	// attach and detach bars, two passing cells' latency, one's progress
	{name: "synthetic matrix", dir: syntheticRun, plots: 5, want: []string{`class="verdict-skip"`, `class="verdict-error"`, "not run"}},
	// churn: progress; bench: scaling seconds, per-op, wakeup (no progress:
	// it restarts at every N); board: latency and progress
	{
		name: "churn, bench and board cells", dir: func(t *testing.T) string { return copyRun(t, churnBench) }, plots: 6,
		want: []string{
			"<title>fth run churn-bench</title>",
			`<span class="scenario">churn</span>`, `<span class="scenario">bench</span>`, `<span class="scenario">soak-churn</span>`,
			`<table class="oracles">`, `<table class="oracle-failures">`, `<table class="transitions">`, `<table class="features">`, `<table class="facts preempt">`, `<ul class="hot">`,
			`<table class="bench-ops">`, `<table class="bench-syscall">`, `<table class="bench-scaling">`, `<table class="bench-multi">`, `<table class="bench-wakeup">`,
			"Accelerator tcg-single: QEMU emulates the CPU",
			`<table class="facts board">`, `<table class="reconnects">`, `<a href="board-127.0.0.1-41803/pstore/dmesg-ramoops-0">`,
			"from pstore, panic, pstore/dmesg-ramoops-0 lines 298–322",
		},
		labels: benchPlots,
	},
}

func TestPageCases(t *testing.T) {
	for _, tt := range pageCases {
		t.Run(tt.name, func(t *testing.T) {
			_, w, err := Write(context.Background(), tt.dir(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(w.Report)
			if err != nil {
				t.Fatal(err)
			}
			checkPage(t, "page", string(b), tt.plots, append(tt.want, `<table id="heatmap">`), tt.labels)
		})
	}
}

// checkPage checks a page (as written, or a browser's DOM) for its plots
// and the strings it must hold. what names it in errors.
func checkPage(t *testing.T, what, page string, plots int, want, labels []string) {
	t.Helper()
	if n := strings.Count(page, `<svg class="plot"`); n != plots {
		t.Errorf("%s has %d plots, want %d", what, n, plots)
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
	for _, l := range labels {
		if err := plotDrawn(page, l); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// plotDrawn finds the plot labelled label and checks gonum drew into it:
// lines are <path> elements, and the axes carry <text>.
func plotDrawn(page, label string) error {
	i := strings.Index(page, `aria-label="`+label+`"`)
	if i < 0 {
		return fmt.Errorf("no plot %q", label)
	}
	end := strings.Index(page[i:], "</svg>")
	if end < 0 {
		return fmt.Errorf("plot %q never ends", label)
	}
	body := page[i : i+end]
	if strings.Count(body, "<path") < 3 || !strings.Contains(body, "<text") {
		return fmt.Errorf("plot %q has %d paths and no text: nothing drawn", label, strings.Count(body, "<path"))
	}
	return nil
}

// findChromium returns the browser's path, "" when none is installed.
func findChromium() string {
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// A real browser must load report.html from disk with nothing else (no
// network, no scripts) and end up with the heatmap, the tables and the
// SVG plots in its DOM. make deps installs Debian's chromium; a machine
// without any Chromium skips, and only that.
func TestRenderInHeadlessChromium_SkipsWithoutChromium(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		t.Skipf("no Chromium on $PATH (tried %s; make deps installs Debian's chromium): this test renders report.html in headless Chromium and checks the heatmap, tables and plots are in the DOM", strings.Join(chromiumNames, ", "))
	}
	for _, tt := range pageCases {
		t.Run(tt.name, func(t *testing.T) {
			_, w, err := Write(context.Background(), tt.dir(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			dom := dumpDOM(t, chromium, w.Report)
			if !strings.Contains(dom, `<table id="heatmap">`) {
				t.Errorf("DOM has no heatmap table:\n%.2000s", dom)
			}
			checkPage(t, "DOM", dom, tt.plots, tt.want, tt.labels)
		})
	}
}

// dumpDOM loads a file in headless Chromium and returns the DOM it built.
func dumpDOM(t *testing.T, chromium, file string) string {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	// Two cores shared with kernel builds: a cold browser start can take
	// tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+abs)
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --dump-dom %s: %v\n%s", chromium, abs, err, stderr.String())
	}
	if len(out) == 0 {
		t.Fatalf("%s --dump-dom %s printed nothing\n%s", chromium, abs, stderr.String())
	}
	return string(out)
}
