package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/multi"
	"github.com/ftrace-harness/fth/wire/event"
)

// multi times one multi-function link over N functions, for tracing_multi
// and kprobe_multi, and compares it with N single links from the scaling
// part.
func (r *runner) multi(ctx context.Context) (*event.BenchMulti, error) {
	out := &event.BenchMulti{}
	ns := capCounts(r.cfg.MultiN, len(r.order))
	if len(ns) == 0 {
		out.Skipped = fmt.Sprintf("no count to measure (multin %v, %d candidates)", r.cfg.MultiN, len(r.order))
		return out, nil
	}
	out.Supported = true
	emit.Logf(r.cfg.Emit, "bench: multi: %s", multi.Note)
	out.TracingMulti = r.tracingMulti(ctx, ns)
	if s := out.TracingMulti.Skipped; s != "" {
		emit.Logf(r.cfg.Emit, "bench: multi: tracing_multi skipped: %s", s)
	}
	if err := ctx.Err(); err != nil {
		return out, err
	}
	out.KprobeMulti = r.kprobeMulti(ctx, ns)
	if s := out.KprobeMulti.Skipped; s != "" {
		emit.Logf(r.cfg.Emit, "bench: multi: kprobe_multi skipped: %s", s)
	}
	return out, ctx.Err()
}

// singles returns the scaling part's totals for n single links.
func (r *runner) singles(n int) (attachS, detachS float64, ok bool) {
	if r.scaled == nil {
		return 0, 0, false
	}
	for _, p := range r.scaled.Points {
		if p.N == n && p.Attached == n {
			return p.AttachSeconds, p.DetachSeconds, true
		}
	}
	return 0, 0, false
}

// compare sets pt's ratios to the single links of the same N.
func (r *runner) compare(pt *event.BenchMultiPoint) {
	if a, d, ok := r.singles(pt.N); ok {
		pt.AttachRatio, pt.DetachRatio = Ratio(pt.AttachSeconds, a), Ratio(pt.DetachSeconds, d)
	}
}

// tracingMulti measures BPF_TRACE_FENTRY_MULTI links.
func (r *runner) tracingMulti(ctx context.Context, ns []int) event.BenchMultiLink {
	var out event.BenchMultiLink
	spec, err := r.cfg.Cache.Kernel()
	if err != nil {
		out.Skipped = fmt.Sprintf("vmlinux BTF: %v", err)
		return out
	}
	ids, err := multi.IDs(spec, r.order[:ns[len(ns)-1]])
	if err != nil {
		out.Skipped = err.Error()
		return out
	}
	// The program has no target of its own: the link names them.
	prog, err := ebpf.NewProgram(tracingSpec("", ebpf.AttachType(multi.AttachFEntryMulti)))
	if err != nil {
		out.Errno, _ = attach.ErrnoOf(err)
		out.Skipped = fmt.Sprintf("the kernel refused a BPF_TRACE_FENTRY_MULTI program (no tracing_multi before Linux 7.3): %s", attach.Message(err))
		return out
	}
	defer prog.Close()
	for _, n := range ns {
		if ctx.Err() != nil {
			break
		}
		pt := event.BenchMultiPoint{N: n}
		prof := r.profileAt(ns, n)
		var fd int
		var errno unix.Errno
		pt.AttachProfile, _ = r.profiled(prof, fmt.Sprintf("tracing_multi attach N=%d", n), func() error {
			t0 := time.Now()
			fd, errno = multi.Link(prog.FD(), ids[:n])
			pt.AttachSeconds = seconds(time.Since(t0))
			return nil
		})
		if errno != 0 {
			// A refusal costs nothing worth a profile.
			pt.AttachProfile = nil
			pt.Error = fmt.Sprintf("BPF_LINK_CREATE tracing_multi over %d functions: %s (%v)", n, attach.ErrnoName(errno), errno)
			if !out.Supported {
				// Refused before any success: the kernel lacks it
				// (EOPNOTSUPP without the single direct ops), or
				// refuses these functions.
				out.Errno = attach.ErrnoName(errno)
			}
			out.Points = append(out.Points, pt)
			emit.Logf(r.cfg.Emit, "bench: multi: %s", pt.Error)
			continue
		}
		var cerr error
		pt.DetachProfile, _ = r.profiled(prof, fmt.Sprintf("tracing_multi detach N=%d", n), func() error {
			t0 := time.Now()
			cerr = unix.Close(fd)
			pt.DetachSeconds = seconds(time.Since(t0))
			return nil
		})
		if cerr != nil {
			pt.Error = fmt.Sprintf("close tracing_multi link: %v", cerr)
		}
		out.Supported = true
		r.compare(&pt)
		out.Points = append(out.Points, pt)
		emit.Logf(r.cfg.Emit, "bench: multi: tracing_multi N=%d: attach %.3fs (x%.3f of singles), detach %.3fs (x%.3f)",
			n, pt.AttachSeconds, pt.AttachRatio, pt.DetachSeconds, pt.DetachRatio)
	}
	if !out.Supported && out.Skipped == "" {
		out.Skipped = "every tracing_multi link was refused: " + out.Points[0].Error
	}
	return out
}

// kprobeMulti measures BPF_TRACE_KPROBE_MULTI links (fprobe underneath).
func (r *runner) kprobeMulti(ctx context.Context, ns []int) event.BenchMultiLink {
	var out event.BenchMultiLink
	prog, err := ebpf.NewProgram(kprobeSpec(ebpf.AttachTraceKprobeMulti))
	if err != nil {
		out.Errno, _ = attach.ErrnoOf(err)
		out.Skipped = "load kprobe_multi program: " + attach.Message(err)
		return out
	}
	defer prog.Close()
	for _, n := range ns {
		if ctx.Err() != nil {
			break
		}
		pt := event.BenchMultiPoint{N: n}
		prof := r.profileAt(ns, n)
		var l link.Link
		var err error
		pt.AttachProfile, _ = r.profiled(prof, fmt.Sprintf("kprobe_multi attach N=%d", n), func() error {
			t0 := time.Now()
			l, err = link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: r.order[:n]})
			pt.AttachSeconds = seconds(time.Since(t0))
			return nil
		})
		if errors.Is(err, ebpf.ErrNotSupported) {
			out.Skipped = "the kernel has no kprobe_multi links (CONFIG_FPROBE is off): " + err.Error()
			out.Points = nil
			return out
		}
		if err != nil {
			pt.AttachProfile = nil
			pt.Error = fmt.Sprintf("kprobe_multi over %d functions: %v", n, err)
			out.Points = append(out.Points, pt)
			emit.Logf(r.cfg.Emit, "bench: multi: %s", pt.Error)
			continue
		}
		var cerr error
		pt.DetachProfile, _ = r.profiled(prof, fmt.Sprintf("kprobe_multi detach N=%d", n), func() error {
			t0 := time.Now()
			cerr = l.Close()
			pt.DetachSeconds = seconds(time.Since(t0))
			return nil
		})
		if cerr != nil {
			pt.Error = fmt.Sprintf("close kprobe_multi link: %v", cerr)
		}
		out.Supported = true
		r.compare(&pt)
		out.Points = append(out.Points, pt)
		emit.Logf(r.cfg.Emit, "bench: multi: kprobe_multi N=%d: attach %.3fs (x%.3f of fentry singles), detach %.3fs (x%.3f)",
			n, pt.AttachSeconds, pt.AttachRatio, pt.DetachSeconds, pt.DetachRatio)
	}
	if !out.Supported && out.Skipped == "" && len(out.Points) > 0 {
		out.Skipped = "every kprobe_multi link was refused: " + out.Points[0].Error
	}
	return out
}
