package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// TestX86ProfileAddsUp: the bench's attach and detach profiles on x86_64
// (stress/profile) must add up to the wall time they explain, and name the
// kernel's own cost centres, not only the agent's. A profile that leaves a
// fifth of the time unexplained, or sees nothing but user space, fails.
// The curve and the kprobe_multi link are small: this asserts that the
// profile is right, the figures come from `fth run ... scenario=bench`
// (docs/scale.md).
func TestX86ProfileAddsUp(t *testing.T) {
	r := runFth(t, 15*time.Minute, "--n", "0",
		"--agent-arg", "scenario=bench", "--agent-arg", "benchparts=scaling,multi",
		"--agent-arg", "scalingn=100,300", "--agent-arg", "multin=300", "--agent-arg", "profile=largest")
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	b := r.result.Bench
	if b == nil || b.Scaling == nil || len(b.Scaling.Points) != 2 {
		t.Fatalf("no scaling curve of two points in result.json: %+v", b)
	}
	if b.Scaling.AttachExponent <= 0 || b.Scaling.DetachExponent <= 0 {
		t.Errorf("growth exponents %v / %v, want fitted values", b.Scaling.AttachExponent, b.Scaling.DetachExponent)
	}
	first, last := b.Scaling.Points[0], b.Scaling.Points[1]
	if first.AttachProfile != nil || first.DetachProfile != nil {
		t.Errorf("N=%d was profiled; profile=largest profiles only N=%d", first.N, last.N)
	}
	if last.MemoryKB <= 0 {
		t.Errorf("N=%d holds %d KiB of guest memory, want a measurement", last.N, last.MemoryKB)
	}
	check := func(what string, p *event.Profile) {
		t.Helper()
		if p == nil {
			t.Errorf("%s: no profile", what)
			return
		}
		t.Logf("%s: wall %.2fs on %.2fs off %.2fs coverage %.3f; costs %+v; centres %+v", what, p.WallSeconds, p.OnCPUSeconds, p.OffCPUSeconds, p.Coverage, p.Costs, p.Centres)
		if p.Error != "" || !p.AddsUp {
			t.Errorf("%s: coverage %.3f (margin %.2f), error %q: the profile does not explain the wall time", what, p.Coverage, p.Margin, p.Error)
		}
		kernel := 0.0
		for _, c := range p.Costs {
			if c.Key != "user" && c.Key != "other" && c.Key != "preempted" {
				kernel += c.Share
			}
		}
		if kernel < 0.3 {
			t.Errorf("%s: only %.0f%% of the time in named kernel cost centres: %+v", what, 100*kernel, p.Costs)
		}
	}
	check("attach N=300", last.AttachProfile)
	check("detach N=300", last.DetachProfile)
	if km := b.Multi.KprobeMulti; km.Supported && len(km.Points) == 1 {
		check("kprobe_multi attach N=300", km.Points[0].AttachProfile)
	} else {
		t.Errorf("kprobe_multi did not run on x86_64: %+v", km)
	}
	html, err := os.ReadFile(filepath.Join(filepath.Dir(r.cell), results.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "Where the time goes") || !strings.Contains(string(html), "profile-bar") {
		t.Error("report.html has no profile section")
	}
}

// TestX86TenThousandTrampolines: the scale cell, 10,000 fentry
// trampolines (every fourth an fexit) attached and detached in one boot on
// x86_64, each counted: about 5 minutes under tcg-single on 2 cores
// (docs/scale.md) where it was measured, but TCG ran at half that speed on
// 2026-11-28's machine, where make test did not fit CI's 90 minutes with
// it: make test-all. The 40,000 cells are make test-all's and
// make test-scale's.
func TestX86TenThousandTrampolines(t *testing.T) {
	requireAll(t)
	const n = 10000
	r := runFth(t, 30*time.Minute, "--n", "0", "--mem", "2048",
		"--agent-arg", "scenario=bench", "--agent-arg", "benchparts=scaling",
		"--agent-arg", fmt.Sprintf("scalingn=%d", n), "--agent-arg", "profile=off",
		"--agent-arg", "fexitevery=4")
	p := everyOneAttached(t, r, n)
	t.Logf("N=%d: attach %.1f s, detach %.1f s, guest memory %d KiB", n, p.AttachSeconds, p.DetachSeconds, p.MemoryKB)
}

// TestX86FortyThousandTrampolines: 40,000 trampolines attached and
// detached in one cell on x86_64 (every fourth an fexit), most on
// fth_scale.ko's functions since the x86_64 minimal kernel has about
// 20,000 of its own, with the attach and the detach profiled: every one
// attaches and detaches, and each profile adds up to its wall time. The
// bench's curve point, without the hammer: about 45 minutes under
// tcg-single on 2 cores (make test-all). With the campaign's hammer and
// churn on top it is TestX86FortyThousandCampaign.
func TestX86FortyThousandTrampolines(t *testing.T) {
	requireAll(t)
	const n = 40000
	r := runFth(t, 150*time.Minute, "--n", "0", "--mem", "4096", "--deadline", "140m",
		"--agent-arg", "scenario=bench", "--agent-arg", "benchparts=scaling",
		"--agent-arg", fmt.Sprintf("scalingn=%d", n), "--agent-arg", "profile=largest",
		"--agent-arg", "scalemod=true", "--agent-arg", "fexitevery=4")
	p := everyOneAttached(t, r, n)
	for what, pr := range map[string]*event.Profile{"attach": p.AttachProfile, "detach": p.DetachProfile} {
		if pr == nil || !pr.AddsUp {
			t.Errorf("%s profile at %d does not add up: %+v", what, n, pr)
		}
	}
}

// TestX86FortyThousandCampaign: the default campaign with 40,000
// trampolines live (every fourth an fexit): all attach, the churn runs 15
// minutes with its oracles on top of them under the hammer, the race stage
// injects, and all 40,000 detach, with a pass. Under the campaign's hammer
// each attach costs about 28 ms plus 4 µs per trampoline already attached
// (measured to 12,177 on tcg-single, 2 cores: docs/scale.md), so the cell
// takes about 2.7 hours here: it runs only with FTH_E2E_SCALE=1 (make
// test-scale), outside test-all's 4 hours. It has not run to its end on
// this machine.
func TestX86FortyThousandCampaign(t *testing.T) {
	if os.Getenv("FTH_E2E_SCALE") == "" {
		t.Skip("runs under make test-scale (FTH_E2E_SCALE=1): about 2.7 hours under TCG")
	}
	const n = 40000
	r := runFth(t, 5*time.Hour, "--n", fmt.Sprint(n), "--detach", "all", "--mem", "4096", "--deadline", "280m",
		"--agent-arg", "scalemod=true", "--agent-arg", "fexitevery=4",
		"--agent-arg", "budget=16m", "--agent-arg", "churn=15m", "--agent-arg", "stormfirst=true")
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	campaignRan(t, r.result, true)
	for _, ph := range []string{"load", "attach", "detach"} {
		p := r.result.Phases[ph]
		if p == nil || p.Succeeded != n || p.Failed != 0 {
			t.Errorf("phase %s = %+v, want all %d and no failure", ph, p, n)
		}
	}
}

// TestX86TwentyThousandChurn is issue 28's "the churn with 20,000
// background trampolines stays clean for 15 minutes": the campaign with
// 20,000 live beside fth_scale.ko, whose tracefs filters name vmlinux's
// functions by index (by name, one filter cost minutes there and stalled
// RCU-tasks). The livepatch user is left out with ops-ipmodify: at this
// scale it met Findings 8 (docs/scale.md); the race stage races the
// trampoline only, the other x86 targets filtering a module's function by
// name. About 40 minutes (make test-scale); passed once here, 2,338 s.
func TestX86TwentyThousandChurn(t *testing.T) {
	if os.Getenv("FTH_E2E_SCALE") == "" {
		t.Skip("runs under make test-scale (FTH_E2E_SCALE=1): about 40 minutes under TCG")
	}
	const n = 20000
	r := runFth(t, 3*time.Hour, "--n", fmt.Sprint(n), "--mem", "4096", "--deadline", "150m",
		"--agent-arg", "scalemod=true", "--agent-arg", "fexitevery=4", "--agent-arg", "budget=16m", "--agent-arg", "churn=15m", "--agent-arg", "stormfirst=true",
		"--agent-arg", "racetarget=trampoline", "--agent-arg", "deliverskip=ops-ipmodify,livepatch")
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	campaignRan(t, r.result, true)
	if p := r.result.Phases["attach"]; p == nil || p.Succeeded != n || p.Failed != 0 {
		t.Errorf("attach = %+v, want all %d", p, n)
	}
	for _, st := range r.result.Stages {
		if st.Name == event.StageChurn && st.Seconds < 14*60 {
			t.Errorf("the churn stage ran %.0f s, want its 15 minutes", st.Seconds)
		}
	}
	if !slices.ContainsFunc(r.result.Features, func(f event.Feature) bool { return f.Name == "filter_index" && f.Supported }) {
		t.Errorf("features %+v: want filters by index", r.result.Features)
	}
}

// everyOneAttached checks that r, a bench cell with one scaling point,
// passed and loaded, attached and detached all n trampolines, and returns
// the point.
func everyOneAttached(t *testing.T, r fthRun, n int) event.BenchScalingPoint {
	t.Helper()
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	b := r.result.Bench
	if b == nil || b.Scaling == nil || len(b.Scaling.Points) != 1 {
		t.Fatalf("no scaling point in result.json: %+v", b)
	}
	p := b.Scaling.Points[0]
	if p.N != n || p.Loaded != n || p.Attached != n || p.Detached != n {
		t.Errorf("N %d: loaded %d, attached %d, detached %d, errnos %v; want all %d", p.N, p.Loaded, p.Attached, p.Detached, p.Errnos, n)
	}
	return p
}

// multiLiveRan checks that r, a bench cell with the multilive part, grew
// the tracing_multi population to each size of sizes with no function
// refused, attached and detached every per-link sample at each, and
// detached the whole population at the end.
func multiLiveRan(t *testing.T, r fthRun, sizes []int) *event.BenchMultiLive {
	t.Helper()
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	b := r.result.Bench
	if b == nil || b.MultiLive == nil || !b.MultiLive.Supported {
		t.Fatalf("no multilive part in result.json: %+v", b)
	}
	m := b.MultiLive
	if len(m.Points) != len(sizes) {
		t.Fatalf("%d points, want %d (%v): %+v", len(m.Points), len(sizes), sizes, m.Points)
	}
	for i, p := range m.Points {
		l := p.Link
		t.Logf("%d live (grown in %.2f s): per-link attach p50 %v p99 %v, detach p50 %v p99 %v", p.Live, p.Grow.Wall.Std().Seconds(), l.Attach.Median, l.Attach.P99, l.Detach.Median, l.Detach.P99)
		if p.Live != sizes[i] || p.Grow.Failed != 0 {
			t.Errorf("point %d: %d live, %d refused, want %d and none", i, p.Live, p.Grow.Failed, sizes[i])
		}
		if l.N != m.Samples || l.Attached != l.N || l.Detached != l.N || l.Attach.Count != l.N || l.Detach.Count != l.N {
			t.Errorf("point %d: per-link samples %+v, want all %d attached and detached, each timed", i, l, m.Samples)
		}
	}
	if d := m.Detach; d == nil || d.Succeeded != sizes[len(sizes)-1] || d.Failed != 0 {
		t.Errorf("the population's detach: %+v, want all %d", m.Detach, sizes[len(sizes)-1])
	}
	return m
}

// TestX86MultiLive: the bench's multilive part at a small size (vmlinux's
// functions only): a tracing_multi population grown in two steps, 200
// per-link trampolines attached and detached beside each, and every link
// of the population closed and counted at the end. The figures at 10,000
// to 40,000 are TestX86MultiLiveCost's.
func TestX86MultiLive(t *testing.T) {
	sizes := []int{500, 1000}
	r := runFth(t, 15*time.Minute, "--n", "0",
		"--agent-arg", "scenario=bench", "--agent-arg", "benchparts=multilive",
		"--agent-arg", "multiliven=500,1000", "--agent-arg", "profile=off")
	if m := multiLiveRan(t, r, sizes); m.Kind != "tracing_multi" {
		t.Errorf("the population is %s (%s), want tracing_multi on x86_64 7.3", m.Kind, m.TracingRefused)
	}
}

// TestX86MultiLiveCost is issue 44's per-operation cost: a tracing_multi
// population grown to 10,000, 20,000, 30,000 and 40,000 functions in one
// boot (vmlinux's, then fth_scale.ko's), with 200 per-link attaches and
// detaches timed at each size and profiled at 40,000, where each profile
// must add up to its wall time (make test-scale; docs/scale.md carries
// the figures).
func TestX86MultiLiveCost(t *testing.T) {
	if os.Getenv("FTH_E2E_SCALE") == "" {
		t.Skip("runs under make test-scale (FTH_E2E_SCALE=1)")
	}
	sizes := []int{10000, 20000, 30000, 40000}
	r := runFth(t, 90*time.Minute, "--n", "0", "--mem", "4096", "--deadline", "80m",
		"--agent-arg", "scenario=bench", "--agent-arg", "benchparts=multilive",
		"--agent-arg", "multiliven=10000,20000,30000,40000", "--agent-arg", "scalemod=true",
		"--agent-arg", "profile=largest")
	m := multiLiveRan(t, r, sizes)
	if m.Kind != "tracing_multi" {
		t.Errorf("the population is %s (%s), want tracing_multi on x86_64 7.3", m.Kind, m.TracingRefused)
	}
	top := m.Points[len(m.Points)-1].Link
	for what, pr := range map[string]*event.Profile{"attach": top.AttachProfile, "detach": top.DetachProfile} {
		if pr == nil || !pr.AddsUp {
			t.Errorf("%s profile at 40,000 live does not add up: %+v", what, pr)
			continue
		}
		t.Logf("%s at 40,000 live: centres %+v", what, pr.Centres)
	}
}

// TestX86FortyThousandMulti is issue 44's cell: 38,000 functions held
// through tracing_multi links (vmlinux's, then fth_scale.ko's) and 2,000
// per-link trampolines on top, then the campaign for 15 minutes on the
// correct kernel: a pass with every oracle counted, then every link
// detached and counted (make test-scale; docs/scale.md has its wall time:
// passed in 2,202 s here, 2026-12-07).
func TestX86FortyThousandMulti(t *testing.T) {
	if os.Getenv("FTH_E2E_SCALE") == "" {
		t.Skip("runs under make test-scale (FTH_E2E_SCALE=1)")
	}
	const multiN, perLink = 38000, 2000
	// --detach all: the default detach phase times 200 and closes the
	// rest uncounted (the first run here passed the campaign and failed
	// this test on that).
	r := runFth(t, 3*time.Hour, "--n", fmt.Sprint(perLink), "--detach", "all", "--mem", "4096", "--deadline", "150m",
		"--agent-arg", "scalemod=true", "--agent-arg", fmt.Sprintf("multihold=%d", multiN),
		"--agent-arg", "budget=16m", "--agent-arg", "churn=15m", "--agent-arg", "stormfirst=true")
	r.mustCell(t)
	if r.exit != 0 {
		t.Fatalf("exit %d, verdict %s: %s", r.exit, r.result.Verdict, r.result.Reason)
	}
	campaignRan(t, r.result, true)
	if !slices.ContainsFunc(r.result.Features, func(f event.Feature) bool { return f.Name == "tracing_multi" && f.Supported }) {
		t.Errorf("features %+v: want the population held by tracing_multi", r.result.Features)
	}
	for name, want := range map[string]int{"multi-attach": multiN, "multi-detach": multiN, "attach": perLink, "detach": perLink} {
		if p := r.result.Phases[name]; p == nil || p.Succeeded != want || p.Failed != 0 {
			t.Errorf("phase %s = %+v, want all %d and no failure", name, p, want)
		}
	}
	for _, st := range r.result.Stages {
		if st.Name == event.StageChurn && st.Seconds < 14*60 {
			t.Errorf("the churn stage ran %.0f s, want its 15 minutes", st.Seconds)
		}
	}
}
