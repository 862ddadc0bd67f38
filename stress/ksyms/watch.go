package ksyms

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/perfring"
)

// Symbol types of an Event, as the kernel names them in
// PERF_RECORD_KSYMBOL_TYPE_*.
const (
	// TypeBPF is a BPF program's JIT image or a BPF trampoline image
	// (bpf_trampoline_<key>, bpf_dispatcher_*).
	TypeBPF uint16 = unix.PERF_RECORD_KSYMBOL_TYPE_BPF
	// TypeOOL is out-of-line code, such as an ftrace_ops trampoline
	// (ftrace_trampoline).
	TypeOOL uint16 = unix.PERF_RECORD_KSYMBOL_TYPE_OOL
)

// Event is one PERF_RECORD_KSYMBOL: the kernel added a symbol to kallsyms,
// or removed one, at run time.
type Event struct {
	// Addr is the symbol's start address.
	Addr uint64
	// Len is the symbol's length in bytes: the code lies in [Addr, Addr+Len).
	Len uint32
	// Type is the symbol's kind: TypeBPF, TypeOOL, or another
	// PERF_RECORD_KSYMBOL_TYPE_* a newer kernel defines.
	Type uint16
	// Unregister is true when the kernel removed the symbol: its memory may
	// be freed and reused from now on.
	Unregister bool
	// Name is the symbol's kallsyms name, such as "bpf_trampoline_<key>",
	// "bpf_prog_<tag>_<name>" or "ftrace_trampoline".
	Name string
}

// ErrLost means the kernel dropped symbol events because a ring was full:
// the events read are not the whole story, and a caller must read
// /proc/kallsyms instead. A LostError matches it with errors.Is.
var ErrLost = errors.New("ksyms: symbol events lost")

// LostError counts the events the kernel dropped on one CPU's ring.
type LostError struct {
	CPU     int
	Records uint64
}

func (e *LostError) Error() string {
	return fmt.Sprintf("ksyms: %d symbol events lost on cpu %d (ring full)", e.Records, e.CPU)
}

// Is makes a LostError match ErrLost.
func (e *LostError) Is(target error) bool { return target == ErrLost }

// onlinePath lists the online CPUs, such as "0-3,5".
const onlinePath = "/sys/devices/system/cpu/online"

// ringPages is the data size of each ring in pages (a power of two, as
// perf requires). A symbol event is under 300 bytes, and a caller drains
// after every attach: 32 KiB per CPU leaves room for a burst of hundreds.
const ringPages = 8

// perfBitKsymbol is perf_event_attr.ksymbol, bit 29 of the attribute
// bit-field; x/sys/unix names bits up to write_backward (27) only. The
// CBitFieldMask constant places the bit where the C compiler does on this
// architecture's byte order.
const perfBitKsymbol = unix.CBitFieldMaskBit29

// Watcher reads the kernel's symbol events from one ring per online CPU.
// The kernel writes a symbol event into the rings of the CPU that registers
// the symbol only, so every CPU needs its own. A Watcher is not safe for
// concurrent use.
type Watcher struct {
	rings []*ring
	// backlog holds the events Wait read and did not return, for the next
	// Drain or Wait.
	backlog []Event
}

// ring is one CPU's perf event and its mapped buffer.
type ring struct {
	cpu int
	fd  int
	buf *perfring.Ring
}

// Watch starts recording the kernel's symbol events on every online CPU.
// Only events from now on are seen: the symbols already registered are in
// /proc/kallsyms. It needs CAP_PERFMON (or CAP_SYS_ADMIN) unless
// perf_event_paranoid is below 1, and a kernel of 5.1 or later; the
// perf_event_open errno is wrapped (EACCES, EINVAL, ...).
func Watch() (*Watcher, error) {
	text, err := os.ReadFile(onlinePath)
	if err != nil {
		return nil, fmt.Errorf("ksyms.Watch: %w", err)
	}
	cpus, err := parseCPUList(string(text))
	if err != nil {
		return nil, fmt.Errorf("ksyms.Watch: %s: %w", onlinePath, err)
	}
	w := &Watcher{}
	for _, cpu := range cpus {
		r, err := openRing(cpu)
		if errors.Is(err, unix.ENODEV) {
			// The CPU went offline after the list was read: it
			// registers nothing while offline.
			continue
		}
		if err != nil {
			w.Close()
			return nil, fmt.Errorf("ksyms.Watch: %w", err)
		}
		w.rings = append(w.rings, r)
	}
	if len(w.rings) == 0 {
		return nil, fmt.Errorf("ksyms.Watch: no online CPU in %q", strings.TrimSpace(string(text)))
	}
	return w, nil
}

// openRing opens a dummy software event on cpu that records symbol events
// only, and maps its ring.
func openRing(cpu int) (*ring, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_DUMMY,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		// Wakeup counts samples unless watermark is set, and a
		// symbol event is not a sample: without a watermark of one
		// byte, poll would wake only once half the ring is full.
		Bits:   perfBitKsymbol | unix.PerfBitWatermark,
		Wakeup: 1,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open on cpu %d: %w", cpu, err)
	}
	buf, err := perfring.Map(fd, ringPages)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("cpu %d: %w", cpu, err)
	}
	return &ring{cpu: cpu, fd: fd, buf: buf}, nil
}

// Drain returns the events kept by Wait, then every whole event in the
// rings now, each ring's in the order the kernel wrote them. Rings are read
// one after the other, so events of different CPUs are not ordered between
// them. An error wrapping ErrLost comes with the events that were read.
func (w *Watcher) Drain() ([]Event, error) {
	evs := w.backlog
	w.backlog = nil
	var errs []error
	for _, r := range w.rings {
		got, err := r.drain()
		evs = append(evs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return evs, errors.Join(errs...)
}

// drain reads r's whole records and gives their space back to the kernel.
func (r *ring) drain() ([]Event, error) {
	var b batch
	err := r.buf.Read(b.add)
	if err != nil {
		err = fmt.Errorf("ksyms: cpu %d's ring: %w", r.cpu, err)
	}
	if b.lost > 0 {
		err = errors.Join(err, &LostError{CPU: r.cpu, Records: b.lost})
	}
	return b.events, err
}

// Wait returns the first event for which match is true, reading the rings
// as the kernel fills them, or an error wrapping os.ErrDeadlineExceeded
// once timeout passes. Events read that do not match are kept, in order,
// for the next Drain or Wait: a caller that only ever Waits should Drain
// now and then to let them go. If a ring lost events, Wait returns the
// error wrapping ErrLost and keeps every event it read, matching or not.
func (w *Watcher) Wait(timeout time.Duration, match func(Event) bool) (Event, error) {
	deadline := time.Now().Add(timeout)
	fds := make([]unix.PollFd, len(w.rings))
	for i, r := range w.rings {
		fds[i] = unix.PollFd{Fd: int32(r.fd), Events: unix.POLLIN}
	}
	for {
		evs, err := w.Drain()
		if err != nil {
			w.backlog = evs
			return Event{}, fmt.Errorf("ksyms.Wait: %w", err)
		}
		if i := slices.IndexFunc(evs, match); i >= 0 {
			ev := evs[i]
			w.backlog = slices.Delete(evs, i, i+1)
			return ev, nil
		}
		w.backlog = evs
		left := time.Until(deadline)
		if left <= 0 {
			return Event{}, fmt.Errorf("ksyms.Wait: no matching symbol event in %v: %w", timeout, os.ErrDeadlineExceeded)
		}
		// Round up: a poll of 0 ms would spin until the deadline.
		ms := min((left+time.Millisecond-1)/time.Millisecond, math.MaxInt32)
		if _, err := unix.Poll(fds, int(ms)); err != nil && !errors.Is(err, unix.EINTR) {
			return Event{}, fmt.Errorf("ksyms.Wait: poll: %w", err)
		}
	}
}

// Close stops the events and unmaps their rings.
func (w *Watcher) Close() error {
	var errs []error
	for _, r := range w.rings {
		if err := r.buf.Close(); err != nil {
			errs = append(errs, fmt.Errorf("ksyms: cpu %d: %w", r.cpu, err))
		}
		if err := unix.Close(r.fd); err != nil {
			errs = append(errs, fmt.Errorf("ksyms: close of cpu %d's perf event: %w", r.cpu, err))
		}
	}
	w.rings, w.backlog = nil, nil
	return errors.Join(errs...)
}

// Record layouts after the header, from include/uapi/linux/perf_event.h.
const (
	// ksymbolSize is the fixed part of a KSYMBOL record: u64 addr, u32
	// len, u16 ksym_type, u16 flags; the name follows.
	ksymbolSize = 16
	// lostSize is a LOST record: u64 id, u64 lost.
	lostSize = 16
)

// batch is what one read of a ring found.
type batch struct {
	events []Event
	// lost sums the LOST records: events the kernel dropped.
	lost uint64
}

// add keeps a KSYMBOL record, counts a LOST one, and skips other types.
func (b *batch) add(rec perfring.Record) error {
	switch rec.Type {
	case unix.PERF_RECORD_KSYMBOL:
		ev, err := parseKsymbol(rec.Body)
		if err != nil {
			return err
		}
		b.events = append(b.events, ev)
	case unix.PERF_RECORD_LOST:
		if len(rec.Body) < lostSize {
			return fmt.Errorf("%w: LOST has %d bytes", perfring.ErrMalformed, len(rec.Body))
		}
		b.lost += binary.NativeEndian.Uint64(rec.Body[8:])
	}
	return nil
}

// parseKsymbol decodes the body of a KSYMBOL record, after its header.
func parseKsymbol(body []byte) (Event, error) {
	if len(body) < ksymbolSize {
		return Event{}, fmt.Errorf("%w: %d bytes, under the %d of addr, len, type and flags", perfring.ErrMalformed, len(body), ksymbolSize)
	}
	name := body[ksymbolSize:]
	end := slices.Index(name, 0)
	if end < 0 {
		return Event{}, fmt.Errorf("%w: the name %q has no NUL", perfring.ErrMalformed, name)
	}
	flags := binary.NativeEndian.Uint16(body[14:])
	return Event{
		Addr:       binary.NativeEndian.Uint64(body[0:]),
		Len:        binary.NativeEndian.Uint32(body[8:]),
		Type:       binary.NativeEndian.Uint16(body[12:]),
		Unregister: flags&unix.PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER != 0,
		Name:       string(name[:end]),
	}, nil
}

// parseCPUList reads a kernel CPU list such as "0-3,5\n".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if first < 0 || last < first {
			return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
