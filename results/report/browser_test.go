package report

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium is where Debian's chromium package puts the browser.
const chromium = "/usr/bin/chromium"

// pageCases are the pages both tests below check: what report.html must
// hold, as written and as a browser ends up with it.
var pageCases = []struct {
	name  string
	dir   func(t *testing.T) string
	plots int
	want  []string
}{
	// attach bars, the cell's latency and progress plots (it died before detach)
	{"real failing run", func(t *testing.T) string { return copyRun(t, realFail) }, 3, []string{`class="verdict-fail"`, "Oops: int3 in __do_sys_newuname"}},
	// attach and detach bars, latency, progress
	{"real passing run", func(t *testing.T) string { return copyRun(t, realPass) }, 4, []string{`class="verdict-pass"`}},
	// paused after loading 50 programs: the load latency plot, and the
	// vCPUs' registers
	{"real hang", func(t *testing.T) string { return copyRun(t, realHang) }, 1, []string{"vCPUs when stopped", "RIP=ffffffff8145b513"}},
	// attach and detach bars, two passing cells' latency, one's progress
	{"synthetic matrix", syntheticRun, 5, []string{`class="verdict-skip"`, `class="verdict-error"`, "not run"}},
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
			page := string(b)
			if n := strings.Count(page, `<svg class="plot"`); n != tt.plots {
				t.Errorf("page has %d plots, want %d", n, tt.plots)
			}
			for _, w := range append(tt.want, `<table id="heatmap">`) {
				if !strings.Contains(page, w) {
					t.Errorf("page lacks %q", w)
				}
			}
		})
	}
}

// A real browser must load report.html from disk with nothing else (no
// network, no scripts) and end up with the heatmap and the SVG plots in its
// DOM. Debian's chromium is not part of make deps yet, so a machine without
// it skips.
func TestRenderInHeadlessChromium_SkipsWithoutChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("%s not installed (apt-get install chromium): this test renders report.html in headless Chromium and checks the heatmap and plots are in the DOM", chromium)
	}
	for _, tt := range pageCases {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			_, w, err := Write(context.Background(), dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(w.Report)
			if err != nil {
				t.Fatal(err)
			}
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
				t.Fatalf("chromium --dump-dom %s: %v\n%s", abs, err, stderr.String())
			}
			dom := string(out)
			if !strings.Contains(dom, `<table id="heatmap">`) {
				t.Errorf("DOM has no heatmap table:\n%.2000s", dom)
			}
			if n := strings.Count(dom, `<svg class="plot"`); n != tt.plots {
				t.Errorf("DOM has %d plots, want %d", n, tt.plots)
			}
			for _, w := range tt.want {
				if !strings.Contains(dom, w) {
					t.Errorf("DOM lacks %q", w)
				}
			}
		})
	}
}
