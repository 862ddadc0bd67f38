package ksyms

import (
	"github.com/ftrace-harness/fth/stress/perfring"

	"encoding/binary"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// ksymRecord encodes ev as the kernel writes a KSYMBOL record: the name
// NUL-terminated and padded to 8 bytes.
func ksymRecord(ev Event) []byte {
	body := binary.NativeEndian.AppendUint64(nil, ev.Addr)
	body = binary.NativeEndian.AppendUint32(body, ev.Len)
	body = binary.NativeEndian.AppendUint16(body, ev.Type)
	var flags uint16
	if ev.Unregister {
		flags = unix.PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER
	}
	body = binary.NativeEndian.AppendUint16(body, flags)
	body = append(body, ev.Name...)
	body = append(body, 0)
	for len(body)%8 != 0 {
		body = append(body, 0)
	}
	return record(unix.PERF_RECORD_KSYMBOL, body)
}

// record prefixes body with a perf_event_header of type typ.
func record(typ uint32, body []byte) []byte {
	r := binary.NativeEndian.AppendUint32(nil, typ)
	r = binary.NativeEndian.AppendUint16(r, 0)
	r = binary.NativeEndian.AppendUint16(r, uint16(perfring.HeaderSize+len(body)))
	return append(r, body...)
}

// lostRecord is a LOST record of n events.
func lostRecord(n uint64) []byte {
	body := binary.NativeEndian.AppendUint64(nil, 7) // the event's id
	return record(unix.PERF_RECORD_LOST, binary.NativeEndian.AppendUint64(body, n))
}

// ringOf writes recs into a ring of size bytes from position start, and
// returns the ring with the tail and head that bound them.
func ringOf(size int, start uint64, recs ...[]byte) (data []byte, tail, head uint64) {
	data = make([]byte, size)
	head = start
	for _, r := range recs {
		for _, c := range r {
			data[head%uint64(size)] = c
			head++
		}
	}
	return data, start, head
}

var (
	image = Event{Addr: 0xffffffffa0001000, Len: 4096, Type: TypeBPF, Name: "bpf_trampoline_10737479715"}
	freed = Event{Addr: 0xffffffffa0001000, Len: 4096, Type: TypeBPF, Unregister: true, Name: "bpf_trampoline_10737479715"}
	ops   = Event{Addr: 0xffffffffa0200000, Len: 310, Type: TypeOOL, Name: "ftrace_trampoline"}
)

// ringRead is what one read of a ring returns: its events and lost count,
// and the position it stopped at.
type ringRead struct {
	batch
	tail uint64
}

// readRing reads data as a Watcher reads each ring.
func readRing(data []byte, tail, head uint64) (ringRead, error) {
	var r ringRead
	next, err := perfring.Records(data, tail, head, r.add)
	r.tail = next
	return r, err
}

func TestReadRing(t *testing.T) {
	imageRec := ksymRecord(image) // 56 bytes
	for _, tc := range []struct {
		name   string
		size   int
		start  uint64
		recs   [][]byte
		cut    uint64 // bytes of the last record the head leaves out
		want   []Event
		lost   uint64
		tailAt int // records read when tail stops: -1 for all of them
		bad    bool
	}{
		{name: "one", size: 256, recs: [][]byte{imageRec}, want: []Event{image}, tailAt: -1},
		{name: "in order", size: 256, recs: [][]byte{ksymRecord(ops), imageRec, ksymRecord(freed)}, want: []Event{ops, image, freed}, tailAt: -1},
		// The record starts 16 bytes before the end of a 128-byte ring,
		// many laps in.
		{name: "wraps the end", size: 128, start: 128*1000 + 112, recs: [][]byte{imageRec}, want: []Event{image}, tailAt: -1},
		{name: "header wraps", size: 128, start: 128*3 + 124, recs: [][]byte{imageRec}, want: []Event{image}, tailAt: -1},
		{name: "unregister", size: 256, recs: [][]byte{ksymRecord(freed)}, want: []Event{freed}, tailAt: -1},
		{name: "other types skipped", size: 256, recs: [][]byte{record(unix.PERF_RECORD_MMAP, make([]byte, 24)), imageRec, record(unix.PERF_RECORD_BPF_EVENT, make([]byte, 32))}, want: []Event{image}, tailAt: -1},
		{name: "lost counted", size: 256, recs: [][]byte{imageRec, lostRecord(3), lostRecord(2)}, want: []Event{image}, lost: 5, tailAt: -1},
		{name: "empty", size: 64, start: 64 * 5, tailAt: -1},
		{name: "truncated by the head", size: 256, recs: [][]byte{imageRec, ksymRecord(ops)}, cut: 8, want: []Event{image}, tailAt: 1, bad: true},
		{name: "KSYMBOL under its fields", size: 256, recs: [][]byte{imageRec, record(unix.PERF_RECORD_KSYMBOL, make([]byte, 8))}, want: []Event{image}, tailAt: 1, bad: true},
		{name: "name without NUL", size: 256, recs: [][]byte{record(unix.PERF_RECORD_KSYMBOL, append(make([]byte, ksymbolSize), "abcdefgh"...))}, tailAt: 0, bad: true},
		{name: "size zero", size: 256, recs: [][]byte{imageRec, make([]byte, 8)}, want: []Event{image}, tailAt: 1, bad: true},
		{name: "LOST under its fields", size: 256, recs: [][]byte{record(unix.PERF_RECORD_LOST, make([]byte, 8))}, tailAt: 0, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, tail, head := ringOf(tc.size, tc.start, tc.recs...)
			head -= tc.cut
			b, err := readRing(data, tail, head)
			if tc.bad != errors.Is(err, perfring.ErrMalformed) {
				t.Errorf("err = %v, want malformed: %v", err, tc.bad)
			}
			if !slices.Equal(b.events, tc.want) {
				t.Errorf("events = %+v, want %+v", b.events, tc.want)
			}
			if b.lost != tc.lost {
				t.Errorf("lost = %d, want %d", b.lost, tc.lost)
			}
			wantTail := head
			if tc.tailAt >= 0 {
				wantTail = tail
				for _, r := range tc.recs[:tc.tailAt] {
					wantTail += uint64(len(r))
				}
			}
			if b.tail != wantTail {
				t.Errorf("tail = %d, want %d", b.tail, wantTail)
			}
		})
	}
}

func TestReadRingOverfull(t *testing.T) {
	data, tail, _ := ringOf(64, 0)
	if _, err := readRing(data, tail, tail+65); !errors.Is(err, perfring.ErrMalformed) {
		t.Errorf("a head more than a ring past the tail: err = %v", err)
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{in: "0\n", want: []int{0}},
		{in: "0-1\n", want: []int{0, 1}},
		{in: "0-2,4,6-7", want: []int{0, 1, 2, 4, 6, 7}},
		{in: "", bad: true},
		{in: "0-", bad: true},
		{in: "3-1", bad: true},
		{in: "x", bad: true},
	} {
		got, err := parseCPUList(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// TestWatchBPFProgram loads a program and waits for the kernel to announce
// its JIT image, then its removal.
func TestWatchBPFProgram(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for CPU-wide perf events and BPF")
	}
	if jit, err := os.ReadFile("/proc/sys/net/core/bpf_jit_enable"); err != nil || strings.TrimSpace(string(jit)) == "0" {
		t.Skipf("the BPF JIT is off (%q, %v): an interpreted program has no image symbol", jit, err)
	}
	w, err := Watch()
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("no perf symbol events here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "fth_ksyms_test",
		Type:         ebpf.SocketFilter,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		t.Skipf("loading a BPF program: %v", err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	// Other programs on the host come and go: only ours has this name.
	name := "bpf_prog_" + info.Tag + "_fth_ksyms_test"

	start := time.Now()
	add, err := w.Wait(5*time.Second, func(e Event) bool { return e.Name == name && !e.Unregister })
	if err != nil {
		t.Fatalf("waiting for %s: %v", name, err)
	}
	t.Logf("registered after %v: %+v", time.Since(start), add)
	if add.Addr == 0 || add.Len == 0 || add.Type != TypeBPF {
		t.Errorf("registered %+v: want an address, a length and TypeBPF", add)
	}

	// Close while Wait sleeps in poll: the ring must wake it for one
	// record, not once half full.
	const delay = 100 * time.Millisecond
	closed := make(chan error, 1)
	go func() {
		time.Sleep(delay)
		closed <- prog.Close()
	}()
	start = time.Now()
	del, err := w.Wait(5*time.Second, func(e Event) bool { return e.Unregister && e.Addr == add.Addr })
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("waiting for %s's removal: %v", name, err)
	}
	took := time.Since(start)
	t.Logf("unregistered after %v (closed after %v): %+v", took, delay, del)
	if took > delay+time.Second {
		t.Errorf("the removal took %v to wake Wait", took)
	}
	if del.Name != name || del.Len != add.Len {
		t.Errorf("unregistered %+v, registered %+v", del, add)
	}
}
