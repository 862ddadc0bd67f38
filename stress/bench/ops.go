package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
)

// opsRuns is how many loads each ftrace-ops configuration gets; the median
// is reported. Three keep a stray interrupt from deciding a point without
// making the sweep long: every load registers and unregisters its ops,
// and each unregistration waits for RCU-tasks.
const opsRuns = 3

// kmsgWait bounds the wait for the result line after finit_module returned.
// The module prints before returning, so the line is normally there at once;
// the bound only covers a log that lost it.
const kmsgWait = 5 * time.Second

// ops measures the ftrace-ops baseline and sweep.
func (r *runner) ops(ctx context.Context) (*event.BenchOps, error) {
	path := r.cfg.OpsModule
	if path == "" {
		path = DefaultOpsModule
	}
	out := &event.BenchOps{Module: path, Calls: r.cfg.OpsCalls, Runs: opsRuns}
	if _, err := os.Stat(path); err != nil {
		out.Skipped = fmt.Sprintf("no ftrace-ops module (the kernel needs CONFIG_SAMPLE_FTRACE_OPS=m): %v", err)
		return out, nil
	}
	if name := modload.Name(path); modload.Loaded(name) {
		// Loaded with persist=1 by someone: a new load would fail with
		// EEXIST, and its registered ops would skew every number.
		out.Skipped = fmt.Sprintf("module %s is already loaded", name)
		return out, nil
	}
	base := r.opsPoint(ctx, path, benchopts.OpsPoint{})
	if base.NsPerCall == 0 {
		out.Skipped = "baseline (no ops) gave no number: " + base.Error
		return out, ctx.Err()
	}
	out.Supported = true
	base.Ratio, base.BestRatio = 1, 1
	out.Baseline = &base
	for _, p := range r.cfg.OpsSweep {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		pt := r.opsPoint(ctx, path, p)
		pt.Ratio = Ratio(pt.NsPerCall, base.NsPerCall)
		pt.BestRatio = Ratio(pt.BestNs, base.BestNs)
		out.Points = append(out.Points, pt)
	}
	return out, nil
}

// opsPoint loads the module opsRuns times with p and returns the median.
func (r *runner) opsPoint(ctx context.Context, path string, p benchopts.OpsPoint) event.BenchOpsPoint {
	pt := event.BenchOpsPoint{Relevant: p.Relevant, Irrelevant: p.Irrelevant, SaveRegs: p.SaveRegs}
	for i := range opsRuns {
		if ctx.Err() != nil {
			break
		}
		run, records, err := loadOps(path, opsParams(r.cfg.OpsCalls, p), r.cfg.Kmsg)
		if err != nil {
			emit.Logf(r.cfg.Emit, "bench: ops %s run %d: %v", p, i+1, err)
			pt.Error = err.Error()
			continue
		}
		pt.RunsNs = append(pt.RunsNs, round(run.NsPerCall(), 2))
		// One line per load: with a hundred ops a load waits for as
		// many RCU-tasks grace periods, and the host's silence
		// watchdog must see the run is alive.
		emit.Logf(r.cfg.Emit, "bench: ops %s run %d/%d: %.2f ns/call", p, i+1, opsRuns, run.NsPerCall())
		if i == 0 {
			// The kernel's records as read, header and all: what the
			// parser's fixtures (stress/bench/testdata) are cut from.
			for _, rec := range records {
				emit.Logf(r.cfg.Emit, "bench: kmsg: %s", rec)
			}
		}
		pt.Tracee = run.Tracee
		if run.NoSaveRegs && p.SaveRegs {
			pt.Note = NoSaveRegsMsg + " (measured without)"
		}
	}
	if len(pt.RunsNs) > 0 {
		// A point with some numbers is a point; the error of a lost run
		// stays in the log.
		pt.NsPerCall = round(median(pt.RunsNs), 2)
		pt.BestNs = slices.Min(pt.RunsNs)
		pt.Error = ""
	}
	emit.Logf(r.cfg.Emit, "bench: ops relevant=%d irrelevant=%d save_regs=%v: %.2f ns/call (runs %v)",
		p.Relevant, p.Irrelevant, p.SaveRegs, pt.NsPerCall, pt.RunsNs)
	return pt
}

// opsParams is the module parameter string for p.
func opsParams(calls int, p benchopts.OpsPoint) string {
	regs := "N"
	if p.SaveRegs {
		regs = "Y"
	}
	return fmt.Sprintf("nr_function_calls=%d nr_ops_relevant=%d nr_ops_irrelevant=%d save_regs=%s", calls, p.Relevant, p.Irrelevant, regs)
}

// loadOps loads the module once and reads its result from the kernel log.
// The module's init runs the benchmark and then returns -EINVAL on purpose,
// so EINVAL is the expected answer of finit_module; the log says whether
// the benchmark ran. records are the raw kmsg records read on the way.
func loadOps(path, params, kmsgPath string) (OpsRun, []string, error) {
	if kmsgPath == "" {
		kmsgPath = DefaultKmsg
	}
	k, err := openKmsg(kmsgPath)
	if err != nil {
		return OpsRun{}, nil, err
	}
	defer k.close()
	lerr := modload.Load(path, params)
	switch {
	case errors.Is(lerr, unix.EINVAL):
	case lerr == nil:
		// Only persist=1 keeps it; unload so that its ops do not
		// weigh on the next point.
		if uerr := modload.Unload(modload.Name(path)); uerr != nil {
			return OpsRun{}, nil, fmt.Errorf("module stayed loaded and would not unload: %w", uerr)
		}
	default:
		return OpsRun{}, nil, lerr
	}
	lines, err := k.until(time.Now().Add(kmsgWait), func(lines []string) bool {
		_, ok := ParseOpsRun(lines)
		return ok
	})
	if err != nil {
		return OpsRun{}, k.raw, err
	}
	run, ok := ParseOpsRun(lines)
	if !ok {
		return OpsRun{}, k.raw, fmt.Errorf("finit_module %s: %v, and no result line in the kernel log within %v", params, lerr, kmsgWait)
	}
	return run, k.raw, nil
}

// kmsg reads the records the kernel logs after it was opened.
type kmsg struct {
	fd  int
	buf []byte
	// raw holds the records read so far, as the kernel wrote them.
	raw []string
}

// openKmsg opens path non-blocking and seeks to its end: reads then return
// only records logged from now on (SEEK_END on /dev/kmsg skips the backlog).
func openKmsg(path string) (*kmsg, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if _, err := unix.Seek(fd, 0, unix.SEEK_END); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seek to the end of %s: %w", path, err)
	}
	// One read returns one record; the kernel refuses (EINVAL) a buffer
	// shorter than the record, and records stay under 8 KiB.
	return &kmsg{fd: fd, buf: make([]byte, 8192)}, nil
}

func (k *kmsg) close() { unix.Close(k.fd) }

// until reads record messages until done accepts the lines so far or the
// deadline passes, and returns the lines.
func (k *kmsg) until(deadline time.Time, done func([]string) bool) ([]string, error) {
	var lines []string
	for {
		n, err := unix.Read(k.fd, k.buf)
		switch {
		case err == nil && n > 0:
			rec := string(k.buf[:n])
			k.raw = append(k.raw, strings.TrimRight(rec, "\n"))
			lines = append(lines, KmsgMessage(rec))
			if done(lines) {
				return lines, nil
			}
			continue
		case errors.Is(err, unix.EPIPE), errors.Is(err, unix.EINTR):
			// EPIPE: records were overwritten before we read them;
			// the next read goes on from the oldest one left.
			continue
		case err != nil && !errors.Is(err, unix.EAGAIN):
			return lines, fmt.Errorf("read kmsg: %w", err)
		}
		if time.Now().After(deadline) {
			return lines, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}
