package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/profile"
	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
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
	emit.Logf(r.cfg.Emit, "bench: profile: %v", err)
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
		emit.Logf(r.cfg.Emit, "bench: profile of %s: %v", what, perr)
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
func logProfile(w emit.Emitter, what string, p *event.Profile) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "bench: profile of %s: wall %.2fs = on-CPU %.2fs + off-CPU %.2fs (coverage %.3f, %s); %d samples, %d switches",
		what, p.WallSeconds, p.OnCPUSeconds, p.OffCPUSeconds, p.Coverage, addsUp(p), p.Samples, p.Switches)
	for i, c := range p.Centres {
		if i == 5 {
			break
		}
		fmt.Fprintf(&b, "; %s %.2fs (%s)", c.Name, c.Seconds, c.Key)
	}
	emit.Logf(w, "%s", b.String())
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

// settledKernelFree is the guest's memory free for the kernel to take
// (kernelFree) once it has stopped changing: the agent's own freed heap
// returned first, then readings taken memSettleEvery apart until
// memSettleReadings in a row stay within memSettleKB of the first of
// them, or memSettleMax has passed.
// Without the wait the previous point's images, freed after RCU-tasks
// grace periods, came back during the next point's attach: N=300 once
// "held" -380 KiB (CI, 2026-11-28). -1 when it cannot be read.
func settledKernelFree(ctx context.Context) int64 {
	debug.FreeOSMemory()
	first := kernelFree()
	last, steady := first, 0
	deadline := time.Now().Add(memSettleMax)
	for last >= 0 && time.Now().Before(deadline) {
		if !ctxsleep.Sleep(ctx, memSettleEvery) {
			return last
		}
		now := kernelFree()
		if now < 0 {
			return now
		}
		if d := now - first; d < memSettleKB && d > -memSettleKB {
			if steady++; steady == memSettleReadings {
				return now
			}
		} else {
			first, steady = now, 0
		}
		last = now
	}
	return last
}

// The deferred frees come in bursts with quiet gaps between them (RCU-tasks
// grace periods under TCG): two readings 500 ms apart agreed while the
// previous point's images were still being freed, and N=100 "held"
// -1,112 KiB. So the figure must hold for two seconds.
const (
	memSettleEvery    = 500 * time.Millisecond
	memSettleReadings = 4
	memSettleKB       = 64
	memSettleMax      = 20 * time.Second
)

// kernelFree is MemAvailable plus the agent's own resident memory, in
// KiB: what the kernel's objects have not taken. MemAvailable alone
// counted the agent's heap, and a point's figure was the kernel's cost
// minus whatever the agent let go meanwhile (the vmlinux BTF and the
// candidate lists it dropped after the first reading, returned at the
// second): N=100 and N=300 "held" -2,392 and -2,804 KiB (2026-11-28).
// -1 when either cannot be read.
func kernelFree() int64 {
	avail := procKB("/proc/meminfo", "MemAvailable:")
	rss := procKB("/proc/self/status", "VmRSS:")
	if avail < 0 || rss < 0 {
		return -1
	}
	return avail + rss
}

// procKB reads the "<field> <n> kB" line of a /proc file; -1 when it
// cannot.
func procKB(path, field string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return parseKB(string(b), field)
}

// parseKB finds field's line in a /proc file's text and returns its
// value in KiB, -1 when there is none.
func parseKB(text, field string) int64 {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, field)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return -1
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return kb
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
	if kb > -10*1024 && kb < 10*1024 {
		return strconv.FormatInt(kb, 10) + " KiB"
	}
	return strconv.FormatInt(kb/1024, 10) + " MiB"
}
