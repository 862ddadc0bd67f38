// Package profile records where one thread's wall time goes inside the
// kernel, and sorts it into cost centres: the bench's answer to "where does
// every second of attach and detach go".
//
// The thread's time is either on a CPU or off it. On-CPU time is sampled
// (perf's cpu-clock, every Period of the thread's CPU time, with the kernel
// stack); off-CPU time is measured, not sampled: every switch out records
// the stack the thread slept or was preempted in (the context-switches
// event), and the switch back in (PERF_RECORD_SWITCH) closes the interval.
// The two added up must give the wall time the caller measured, within
// Margin: a profile that does not is reported as such, never scaled to fit.
// Both are the kernel's own profilers, so the functions of kernel/trace,
// built without -pg and invisible to the function tracer, show as well.
package profile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/perfring"
)

// DefaultPeriod is the on-CPU sampling period: 250 samples per second of
// CPU time keep the cost under a percent and give hundreds of samples to a
// one-second phase.
const DefaultPeriod = 4 * time.Millisecond

// Margin is how far the recorded on-CPU plus off-CPU time may be from the
// measured wall time for the profile to count as adding up. The on-CPU
// time is the cpu-clock event's count, exact; the off-CPU time the sum of
// the measured intervals; the rest is the time between the caller's clock
// reads and the events' enable and disable.
const Margin = 0.10

// MinWall is the shortest operation whose sum is checked: below it the
// events' enable and disable, a few microseconds each, are a visible part
// of the wall time.
const MinWall = 10 * time.Millisecond

// ringBytes is the ring's data size: 512 KiB hold some 1,500 samples with
// 40-frame stacks, several seconds of records between two drains. It is
// given in bytes because a 64 KiB-page kernel would make 128 pages 8 MiB,
// over perf_event_mlock_kb.
const ringBytes = 512 << 10

// drainEvery is how often the ring is read while the thread runs.
const drainEvery = 20 * time.Millisecond

// sampleType is what each sample carries, in the kernel's order:
// identifier, pid/tid, time, period, callchain. Both events use it, so one
// decoder reads the shared ring, the identifier telling them apart.
const sampleType = unix.PERF_SAMPLE_IDENTIFIER | unix.PERF_SAMPLE_TID | unix.PERF_SAMPLE_TIME |
	unix.PERF_SAMPLE_PERIOD | unix.PERF_SAMPLE_CALLCHAIN

// idTrailer is the sample_id every other record ends with under
// sample_id_all, for sampleType: u32 pid, u32 tid, u64 time, u64 identifier.
const idTrailer = 24

// contextMax is PERF_CONTEXT_MAX: callchain entries at or above it
// (as unsigned) are context markers (PERF_CONTEXT_KERNEL, ...), not
// addresses.
const contextMax = ^uint64(4095) + 1

// Stack is a kernel stack, innermost address first. Empty means the thread
// was in user space.
type Stack []uint64

// Recording is what a Profiler recorded, stacks not yet named.
type Recording struct {
	// Period is the on-CPU sampling period.
	Period time.Duration
	// OnCPU is the sampled CPU time per stack, OffCPU the measured time
	// off the CPU per stack it switched out in, and Preempted the part of
	// it the thread was runnable (the kernel's SWITCH_OUT_PREEMPT); all
	// keyed by stackKey.
	OnCPU     map[string]time.Duration
	OffCPU    map[string]time.Duration
	Preempted map[string]time.Duration
	// CPUTime is the thread's exact CPU time over the profile, the
	// cpu-clock event's count: the samples estimate how it divides.
	CPUTime time.Duration
	// Stacks maps each key back to its stack.
	Stacks map[string]Stack
	// Samples and Switches count the on-CPU samples and the switches out;
	// Throttled the times the kernel throttled the sampling.
	Samples, Switches, Throttled int
	// Lost counts records the kernel dropped because the ring was full.
	Lost uint64
}

// SampledTotal and OffCPUTotal sum the recording's samples and intervals
// (OffCPUTotal includes the preempted ones).
func (r *Recording) SampledTotal() time.Duration { return sum(r.OnCPU) }
func (r *Recording) OffCPUTotal() time.Duration  { return sum(r.OffCPU) + sum(r.Preempted) }

func sum(m map[string]time.Duration) time.Duration {
	var t time.Duration
	for _, d := range m {
		t += d
	}
	return t
}

// stackKey is a map key for s.
func stackKey(s Stack) string {
	if len(s) == 0 {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Pointer(&s[0])), len(s)*8)
}

// decoder turns ring records into a Recording.
type decoder struct {
	rec           *Recording
	clockID, swID uint64
	out           Stack // the stack of the switch out not yet closed
	outAt         uint64
	outOpen       bool
	// outPreempt says the open switch out left the thread runnable.
	outPreempt bool
}

func newDecoder(period time.Duration, clockID, swID uint64) *decoder {
	return &decoder{
		rec: &Recording{Period: period, OnCPU: map[string]time.Duration{}, OffCPU: map[string]time.Duration{},
			Preempted: map[string]time.Duration{}, Stacks: map[string]Stack{}},
		clockID: clockID, swID: swID,
	}
}

// add decodes one record.
func (d *decoder) add(r perfring.Record) error {
	switch r.Type {
	case unix.PERF_RECORD_SAMPLE:
		return d.sample(r.Body)
	case unix.PERF_RECORD_SWITCH:
		if len(r.Body) < idTrailer {
			return fmt.Errorf("%w: SWITCH has %d bytes", perfring.ErrMalformed, len(r.Body))
		}
		if r.Misc&unix.PERF_RECORD_MISC_SWITCH_OUT != 0 {
			// It follows the context-switch sample of the same switch
			// and says whether the thread stayed runnable.
			d.outPreempt = r.Misc&unix.PERF_RECORD_MISC_SWITCH_OUT_PREEMPT != 0
			return nil
		}
		at := binary.NativeEndian.Uint64(r.Body[len(r.Body)-idTrailer+8:])
		if d.outOpen && at >= d.outAt {
			k := d.keep(d.out)
			if d.outPreempt {
				d.rec.Preempted[k] += time.Duration(at - d.outAt)
			} else {
				d.rec.OffCPU[k] += time.Duration(at - d.outAt)
			}
		}
		d.outOpen = false
	case unix.PERF_RECORD_THROTTLE:
		d.rec.Throttled++
	case unix.PERF_RECORD_LOST:
		if len(r.Body) < 16 {
			return fmt.Errorf("%w: LOST has %d bytes", perfring.ErrMalformed, len(r.Body))
		}
		d.rec.Lost += binary.NativeEndian.Uint64(r.Body[8:])
		// The switch in that closes an open interval may be lost.
		d.outOpen = false
	}
	return nil
}

// sample decodes a SAMPLE body of sampleType.
func (d *decoder) sample(b []byte) error {
	const fixed = 8 + 8 + 8 + 8 + 8 // identifier, pid/tid, time, period, nr
	if len(b) < fixed {
		return fmt.Errorf("%w: SAMPLE has %d bytes", perfring.ErrMalformed, len(b))
	}
	id := binary.NativeEndian.Uint64(b[0:])
	at := binary.NativeEndian.Uint64(b[16:])
	period := binary.NativeEndian.Uint64(b[24:])
	nr := binary.NativeEndian.Uint64(b[32:])
	if nr > uint64(len(b)-fixed)/8 {
		return fmt.Errorf("%w: SAMPLE claims %d frames in %d bytes", perfring.ErrMalformed, nr, len(b))
	}
	var s Stack
	for i := range int(nr) {
		ip := binary.NativeEndian.Uint64(b[fixed+8*i:])
		if ip >= contextMax {
			continue
		}
		s = append(s, ip)
	}
	switch id {
	case d.clockID:
		d.rec.Samples++
		d.rec.OnCPU[d.keep(s)] += time.Duration(period)
	case d.swID:
		d.rec.Switches++
		d.out, d.outAt, d.outOpen, d.outPreempt = s, at, true, false
	}
	return nil
}

// keep records s under its key and returns the key.
func (d *decoder) keep(s Stack) string {
	k := stackKey(s)
	if _, ok := d.rec.Stacks[k]; !ok {
		d.rec.Stacks[k] = s
	}
	return k
}

// Profiler records one thread. It is not safe for concurrent use.
type Profiler struct {
	clockFD, swFD int
	ring          *perfring.Ring
	dec           *decoder
	mu            sync.Mutex // orders drains of the ring
	stop          chan struct{}
	done          chan struct{}
	errs          []error
}

// Start profiles the calling thread. The caller must hold it with
// runtime.LockOSThread until Stop, or the events follow a thread the
// goroutine left. period 0 takes DefaultPeriod. It needs perf events for
// other tasks' kernel stacks (root, or perf_event_paranoid below 2).
func Start(period time.Duration) (*Profiler, error) {
	if period <= 0 {
		period = DefaultPeriod
	}
	tid := unix.Gettid()
	p := &Profiler{clockFD: -1, swFD: -1}
	var err error
	if p.clockFD, err = open(tid, unix.PERF_COUNT_SW_CPU_CLOCK, uint64(period.Nanoseconds()), 0); err != nil {
		return nil, fmt.Errorf("profile: cpu-clock event: %w", err)
	}
	if p.swFD, err = open(tid, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, 1, unix.PerfBitContextSwitch); err != nil {
		p.close()
		return nil, fmt.Errorf("profile: context-switches event: %w", err)
	}
	// The switches' records go to the clock's ring, which must exist
	// first: one ring keeps the thread's records in the order they
	// happened.
	if p.ring, err = perfring.Map(p.clockFD, max(ringBytes/unix.Getpagesize(), 1)); err != nil {
		p.close()
		return nil, fmt.Errorf("profile: %w", err)
	}
	if err := unix.IoctlSetInt(p.swFD, unix.PERF_EVENT_IOC_SET_OUTPUT, p.clockFD); err != nil {
		p.close()
		return nil, fmt.Errorf("profile: redirect the switches into the clock's ring: %w", err)
	}
	clockID, err1 := eventID(p.clockFD)
	swID, err2 := eventID(p.swFD)
	if err := errors.Join(err1, err2); err != nil {
		p.close()
		return nil, fmt.Errorf("profile: %w", err)
	}
	p.dec = newDecoder(period, clockID, swID)
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.drainLoop()
	for _, fd := range []int{p.swFD, p.clockFD} {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			close(p.stop)
			<-p.done
			p.close()
			return nil, fmt.Errorf("profile: enable: %w", err)
		}
	}
	return p, nil
}

// open opens a disabled software event of the thread tid, sampling every
// period events with its kernel stack.
func open(tid int, config, period, bits uint64) (int, error) {
	attr := unix.PerfEventAttr{
		Type:        unix.PERF_TYPE_SOFTWARE,
		Config:      config,
		Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample:      period,
		Sample_type: sampleType,
		Bits: unix.PerfBitDisabled | unix.PerfBitSampleIDAll | unix.PerfBitExcludeCallchainUser |
			unix.PerfBitExcludeHv | bits,
	}
	return unix.PerfEventOpen(&attr, tid, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
}

// eventID returns the kernel's id of the event fd, as samples carry it.
func eventID(fd int) (uint64, error) {
	var id uint64
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&id))); errno != 0 {
		return 0, fmt.Errorf("PERF_EVENT_IOC_ID: %w", errno)
	}
	return id, nil
}

func (p *Profiler) drainLoop() {
	defer close(p.done)
	t := time.NewTicker(drainEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.drain()
		}
	}
}

func (p *Profiler) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ring.Read(p.dec.add); err != nil && len(p.errs) < 5 {
		p.errs = append(p.errs, err)
	}
}

// Stop ends the profile and returns the recording. An error means records
// could not be decoded; the recording holds what could.
func (p *Profiler) Stop() (*Recording, error) {
	var errs []error
	for _, fd := range []int{p.clockFD, p.swFD} {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0); err != nil {
			errs = append(errs, fmt.Errorf("profile: disable: %w", err))
		}
	}
	close(p.stop)
	<-p.done
	p.drain()
	var count [8]byte
	if _, err := unix.Read(p.clockFD, count[:]); err != nil {
		errs = append(errs, fmt.Errorf("profile: read the thread's CPU time: %w", err))
	} else {
		p.dec.rec.CPUTime = time.Duration(binary.NativeEndian.Uint64(count[:]))
	}
	errs = append(errs, p.errs...)
	errs = append(errs, p.close())
	runtime.KeepAlive(p)
	return p.dec.rec, errors.Join(errs...)
}

func (p *Profiler) close() error {
	var errs []error
	if p.ring != nil {
		errs = append(errs, p.ring.Close())
	}
	for _, fd := range []int{p.swFD, p.clockFD} {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	p.swFD, p.clockFD = -1, -1
	return errors.Join(errs...)
}
