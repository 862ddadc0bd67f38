package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/results/event"
	"github.com/ftrace-harness/fth/stress/bench/benchopts"
	"github.com/ftrace-harness/fth/stress/profile"
	"github.com/ftrace-harness/fth/stress/report"
)

// profileAt says whether the points of count n get a profile: the largest
// count of ns, every count, or none, as the profile option says.
func (r *runner) profileAt(ns []int, n int) bool {
	switch r.cfg.Profile {
	case benchopts.ProfileAll:
		return true
	case benchopts.ProfileLargest:
		return len(ns) > 0 && n == slices.Max(ns)
	}
	return false
}

// prepareProfile reads what the profiles need once per run: the cost
// rules, and kallsyms before the bench attaches anything: with tens of
// thousands of BPF images live a read of kallsyms is quadratic in their
// number (ksyms.EachBeforeBPF) and took minutes. Frames in BPF images
// attached later are left unnamed (hex).
func (r *runner) prepareProfile() {
	if r.cfg.Profile == "" || r.cfg.Profile == benchopts.ProfileOff {
		return
	}
	rules, err := profile.DefaultRules()
	if err == nil {
		var syms *profile.Symbols
		if syms, err = profile.ReadSymbols(""); err == nil {
			r.rules, r.syms = rules, syms
			return
		}
	}
	r.profileErr = err.Error()
	report.Logf(r.cfg.Emit, "bench: profile: %v", err)
}

// profiled runs op with the kernel profiler on its thread when want, and
// returns op's error and the profile (nil when not wanted). op runs on the
// calling goroutine, locked to its thread for the profile: the syscalls
// it makes are the ones profiled. what names op in the log.
func (r *runner) profiled(want bool, what string, op func() error) (*event.Profile, error) {
	if !want {
		return nil, op()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, perr := profile.Start(0)
	t0 := time.Now()
	err := op()
	wall := time.Since(t0)
	if perr != nil {
		report.Logf(r.cfg.Emit, "bench: profile of %s: %v", what, perr)
		return &event.Profile{WallSeconds: wall.Seconds(), Error: perr.Error()}, err
	}
	rec, serr := p.Stop()
	out := r.attribute(rec, wall)
	if serr != nil {
		out.Error = serr.Error()
	}
	logProfile(r.cfg.Emit, what, out)
	return out, err
}

// attribute names rec's stacks and sorts them into cost centres.
func (r *runner) attribute(rec *profile.Recording, wall time.Duration) *event.Profile {
	if r.rules == nil {
		return &event.Profile{WallSeconds: wall.Seconds(), Error: "no profile: " + r.profileErr}
	}
	p := r.rules.Attribute(rec, r.syms, wall)
	return &p
}

// logProfile writes the profile's sum and largest costs to the log, so
// that a bench cut short still says where its time went.
func logProfile(w report.Emitter, what string, p *event.Profile) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "bench: profile of %s: wall %.2fs = on-CPU %.2fs + off-CPU %.2fs (coverage %.3f, %s); %d samples, %d switches",
		what, p.WallSeconds, p.OnCPUSeconds, p.OffCPUSeconds, p.Coverage, addsUp(p), p.Samples, p.Switches)
	for i, c := range p.Centres {
		if i == 5 {
			break
		}
		fmt.Fprintf(&b, "; %s %.2fs (%s)", c.Name, c.Seconds, c.Key)
	}
	report.Logf(w, "%s", b.String())
}

func addsUp(p *event.Profile) string {
	if p.Error != "" {
		return p.Error
	}
	if p.AddsUp {
		return fmt.Sprintf("adds up within %.0f%%", 100*p.Margin)
	}
	return fmt.Sprintf("DOES NOT add up within %.0f%%", 100*p.Margin)
}

// settledMemAvailable is MemAvailable once the guest has stopped giving
// memory back: the agent's own freed heap returned first (a kallsyms read
// for the profile left megabytes for the scavenger to hand back later),
// then readings taken until two in a row, memSettleEvery apart, differ by
// less than memSettleKB, or memSettleMax has passed. Without it the
// previous point's images, freed after RCU-tasks grace periods, came back
// during the next point's attach: N=300 once "held" -380 KiB (CI,
// 2026-11-28). -1 when MemAvailable cannot be read.
func settledMemAvailable(ctx context.Context) int64 {
	debug.FreeOSMemory()
	last := memAvailable()
	deadline := time.Now().Add(memSettleMax)
	for last >= 0 && time.Now().Before(deadline) {
		if !ctxsleep.Sleep(ctx, memSettleEvery) {
			return last
		}
		now := memAvailable()
		if now < 0 {
			return now
		}
		if d := now - last; d < memSettleKB && d > -memSettleKB {
			return now
		}
		last = now
	}
	return last
}

const (
	memSettleEvery = 500 * time.Millisecond
	memSettleKB    = 64
	memSettleMax   = 10 * time.Second
)

// memAvailable reads MemAvailable from /proc/meminfo, in KiB; -1 when it
// cannot.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "MemAvailable: %d kB", &kb); n == 1 {
			return kb
		}
	}
	return -1
}

// growthExponent fits seconds = c·N^k over the points by least squares in
// log-log space and returns k: 1 is linear, 2 quadratic. 0 when fewer than
// two points have a positive N and time.
func growthExponent(ns []int, secs []float64) float64 {
	var xs, ys []float64
	for i := range ns {
		if ns[i] > 0 && secs[i] > 0 {
			xs = append(xs, math.Log(float64(ns[i])))
			ys = append(ys, math.Log(secs[i]))
		}
	}
	if len(xs) < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(len(xs))
	my /= float64(len(xs))
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return round(sxy/sxx, 3)
}

// formatKB is a KiB count for the log.
func formatKB(kb int64) string {
	if kb < 0 {
		return "?"
	}
	return strconv.FormatInt(kb/1024, 10) + " MiB"
}
