// Package perfring reads a perf event's mmapped ring buffer: the records the
// kernel writes for one event, or for several redirected into it with
// PERF_EVENT_IOC_SET_OUTPUT. The symbol watcher (stress/ksyms) and the
// profiler (stress/profile) decode different records from the same kind of
// ring, so the ring's arithmetic lives here once.
package perfring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HeaderSize is struct perf_event_header: u32 type, u16 misc, u16 size.
const HeaderSize = 8

// ErrMalformed means a ring held a record its header could not describe.
var ErrMalformed = errors.New("malformed perf record")

// Record is one record of a ring, its header decoded. Body is valid only
// during the callback that receives it.
type Record struct {
	Type uint32
	Misc uint16
	// Body is the record after its header.
	Body []byte
}

// Ring is one perf event's mapped buffer. It is not safe for concurrent
// use.
type Ring struct {
	fd   int
	mem  []byte                  // the whole mapping, for Munmap
	meta *unix.PerfEventMmapPage // mem's first page
	data []byte                  // the data pages the kernel writes records to
}

// Map maps the ring of the perf event fd with pages data pages (a power of
// two, as perf requires). The ring does not own fd: Close unmaps only.
func Map(fd, pages int) (*Ring, error) {
	page := unix.Getpagesize()
	// PROT_WRITE lets the kernel see data_tail, so it never overwrites a
	// record not yet read: it counts a lost record instead.
	mem, err := unix.Mmap(fd, 0, (1+pages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("perfring: mmap: %w", err)
	}
	r := &Ring{fd: fd, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	r.data = mem[page:]
	// Kernels before 4.1 leave data_offset and data_size zero; the data
	// then starts at the second page.
	if off, size := r.meta.Data_offset, r.meta.Data_size; size != 0 && off+size <= uint64(len(mem)) {
		r.data = mem[off : off+size]
	}
	return r, nil
}

// Read calls fn for every whole record in the ring now, in the order the
// kernel wrote them, and gives their space back to the kernel. A malformed
// record skips the rest of what the ring holds (the records after it
// cannot be found) and is returned as an error wrapping ErrMalformed; an
// error from fn stops the read there and is returned.
func (r *Ring) Read(fn func(Record) error) error {
	// The kernel writes a record before it moves data_head past it.
	head := atomic.LoadUint64(&r.meta.Data_head)
	// Only this process writes data_tail.
	tail := r.meta.Data_tail
	next, err := Records(r.data, tail, head, fn)
	if errors.Is(err, ErrMalformed) {
		next = head
	}
	// The store must follow the reads of the records: the kernel reuses
	// their space after it.
	atomic.StoreUint64(&r.meta.Data_tail, next)
	return err
}

// Close unmaps the ring.
func (r *Ring) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem, r.meta, r.data = nil, nil, nil
	if err != nil {
		return fmt.Errorf("perfring: munmap: %w", err)
	}
	return nil
}

// Records calls fn for the records in data, a ring buffer, from position
// tail up to head (positions grow without bound; the byte of position p is
// data[p%len(data)]). A record may wrap from the end of data to its start.
// It returns the position after the last record fn accepted; on a malformed
// record or an error from fn, that record's position.
func Records(data []byte, tail, head uint64, fn func(Record) error) (uint64, error) {
	if head-tail > uint64(len(data)) {
		return tail, fmt.Errorf("%w: head %d is %d bytes past tail %d in a ring of %d", ErrMalformed, head, head-tail, tail, len(data))
	}
	for tail != head {
		left := head - tail
		if left < HeaderSize {
			return tail, fmt.Errorf("%w: %d bytes left at %d, under a header", ErrMalformed, left, tail)
		}
		hdr := bytesAt(data, tail, HeaderSize)
		typ := binary.NativeEndian.Uint32(hdr[0:])
		misc := binary.NativeEndian.Uint16(hdr[4:])
		size := uint64(binary.NativeEndian.Uint16(hdr[6:]))
		if size < HeaderSize || size > left {
			return tail, fmt.Errorf("%w: record of size %d at %d, with %d bytes left", ErrMalformed, size, tail, left)
		}
		body := bytesAt(data, tail, int(size))[HeaderSize:]
		if err := fn(Record{Type: typ, Misc: misc, Body: body}); err != nil {
			return tail, fmt.Errorf("record of type %d at %d: %w", typ, tail, err)
		}
		tail += size
	}
	return tail, nil
}

// bytesAt returns the n bytes of the ring data from position pos, copied
// when they wrap around its end.
func bytesAt(data []byte, pos uint64, n int) []byte {
	off := int(pos % uint64(len(data)))
	if off+n <= len(data) {
		return data[off : off+n]
	}
	out := make([]byte, 0, n)
	out = append(out, data[off:]...)
	return append(out, data[:n-len(out)]...)
}
