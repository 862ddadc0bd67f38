// Package multi makes BPF tracing_multi links (BPF_TRACE_FENTRY_MULTI,
// Linux 7.3): one program attached to many functions by one
// BPF_LINK_CREATE, through the kernel's one shared direct ops. Neither
// cilium/ebpf v0.22 nor x/sys knows the attach type, so the package issues
// the two syscalls itself: the program's load, against vmlinux BTF or a
// module's, and the link over a list of BTF ids of that BTF object.
//
// Hold keeps such links live over a population of functions, as seed 001's
// series attaches tens of thousands of them; the bench times single links
// (stress/bench).
package multi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// AttachFEntryMulti is BPF_TRACE_FENTRY_MULTI of enum bpf_attach_type as
// Linux 7.3 numbers it (after BPF_TRACE_FSESSION, 58). A kernel without it
// refuses the program's load with EINVAL.
const AttachFEntryMulti = 59

// Note says where the tracing_multi support comes from, for logs.
const Note = "cilium/ebpf v0.22 has no tracing-multi link; raw BPF_PROG_LOAD and BPF_LINK_CREATE with BPF_TRACE_FENTRY_MULTI (59)"

// progTypeTracing is BPF_PROG_TYPE_TRACING.
const progTypeTracing = 26

// progName names every program the package loads, so that bpftool and
// kernel stacks show whose programs they are.
const progName = "fth_multi"

// linkAttr is the link_create member of union bpf_attr with its
// tracing_multi variant (Linux 7.3): ids is a user pointer to cnt u32 BTF
// ids of the target functions, cookies an optional pointer to cnt u64.
type linkAttr struct {
	progFD     uint32
	targetFD   uint32
	attachType uint32
	flags      uint32
	ids        uint64
	cookies    uint64
	cnt        uint32
	_          uint32
}

// progLoadAttr is the BPF_PROG_LOAD member of union bpf_attr up to
// log_true_size (include/uapi/linux/bpf.h); the kernel zero-fills the rest.
type progLoadAttr struct {
	progType           uint32
	insnCnt            uint32
	insns              uint64
	license            uint64
	logLevel           uint32
	logSize            uint32
	logBuf             uint64
	kernVersion        uint32
	progFlags          uint32
	progName           [16]byte
	progIfindex        uint32
	expectedAttachType uint32
	progBTFFD          uint32
	funcInfoRecSize    uint32
	funcInfo           uint64
	funcInfoCnt        uint32
	lineInfoRecSize    uint32
	lineInfo           uint64
	lineInfoCnt        uint32
	attachBTFID        uint32
	attachBTFObjFD     uint32
	coreReloCnt        uint32
	fdArray            uint64
	coreRelos          uint64
	coreReloRecSize    uint32
	logTrueSize        uint32
}

// LoadProgram loads a do-nothing BPF_TRACE_FENTRY_MULTI program whose link
// names functions of the BTF object btfFD (0: vmlinux; a module's BTF
// handle otherwise, which is how a module's functions are reached). It
// returns the program's file descriptor; on a refusal the error carries
// the verifier's log.
func LoadProgram(btfFD int) (int, error) {
	var buf bytes.Buffer
	insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	if err := insns.Marshal(&buf, nativeOrder()); err != nil {
		return -1, fmt.Errorf("marshal the program: %w", err)
	}
	code := buf.Bytes()
	license := []byte("GPL\x00")
	attr := progLoadAttr{
		progType:           progTypeTracing,
		insnCnt:            uint32(len(code) / asm.InstructionSize),
		insns:              uint64(uintptr(unsafe.Pointer(&code[0]))),
		license:            uint64(uintptr(unsafe.Pointer(&license[0]))),
		expectedAttachType: AttachFEntryMulti,
		attachBTFObjFD:     uint32(btfFD),
	}
	copy(attr.progName[:], progName)
	fd, errno := bpf(unix.BPF_PROG_LOAD, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if errno == 0 {
		runtime.KeepAlive(code)
		runtime.KeepAlive(license)
		return fd, nil
	}
	// Again with the verifier's log, to say why.
	log := make([]byte, 64<<10)
	attr.logLevel, attr.logSize, attr.logBuf = 1, uint32(len(log)), uint64(uintptr(unsafe.Pointer(&log[0])))
	if fd, e := bpf(unix.BPF_PROG_LOAD, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); e == 0 {
		return fd, nil
	}
	runtime.KeepAlive(code)
	runtime.KeepAlive(license)
	msg := string(bytes.TrimRight(log[:bytes.IndexByte(append(log, 0), 0)], "\n"))
	if msg == "" {
		return -1, fmt.Errorf("BPF_PROG_LOAD of a BPF_TRACE_FENTRY_MULTI program: %w", errno)
	}
	return -1, fmt.Errorf("BPF_PROG_LOAD of a BPF_TRACE_FENTRY_MULTI program: %w: %s", errno, msg)
}

// Link creates one tracing_multi link of progFD over ids, BTF ids of the
// BTF object the program was loaded against. It returns the link's file
// descriptor, or the kernel's errno.
func Link(progFD int, ids []uint32) (int, unix.Errno) {
	if len(ids) == 0 {
		return -1, unix.EINVAL
	}
	attr := linkAttr{
		progFD:     uint32(progFD),
		attachType: AttachFEntryMulti,
		ids:        uint64(uintptr(unsafe.Pointer(&ids[0]))),
		cnt:        uint32(len(ids)),
	}
	fd, errno := bpf(unix.BPF_LINK_CREATE, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	runtime.KeepAlive(ids)
	return fd, errno
}

// bpf issues one bpf(2) command. The Go runtime preempts with signals:
// EINTR says nothing about the kernel, and the call is made again.
func bpf(cmd uintptr, attr unsafe.Pointer, size uintptr) (int, unix.Errno) {
	for i := 0; ; i++ {
		fd, _, errno := unix.Syscall(unix.SYS_BPF, cmd, uintptr(attr), size)
		if errno == unix.EINTR && i < 5 {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), 0
	}
}

// nativeOrder is the byte order of the machine the program runs on:
// instructions are marshalled in it. cilium/ebpf takes only
// binary.LittleEndian and binary.BigEndian, not binary.NativeEndian.
func nativeOrder() binary.ByteOrder {
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return binary.LittleEndian
	}
	return binary.BigEndian
}

// Refused says whether err is the kernel's refusal (it carries an errno),
// rather than the harness failing to ask.
func Refused(err error) bool {
	var errno unix.Errno
	return errors.As(err, &errno)
}

// IDs returns the BTF id in spec of each function of fns. The inventory
// keeps only functions with exactly one BTF FUNC, so a name is an id; spec
// is vmlinux's or a module's (split on vmlinux's: its ids follow
// vmlinux's, as the kernel numbers them).
func IDs(spec *btf.Spec, fns []string) ([]uint32, error) {
	ids := make([]uint32, 0, len(fns))
	for _, fn := range fns {
		types, err := spec.AnyTypesByName(fn)
		if err != nil {
			return nil, fmt.Errorf("BTF of %s: %w", fn, err)
		}
		var f *btf.Func
		for _, t := range types {
			if tf, ok := t.(*btf.Func); ok {
				f = tf
			}
		}
		if f == nil {
			return nil, fmt.Errorf("BTF of %s: no FUNC", fn)
		}
		id, err := spec.TypeID(f)
		if err != nil {
			return nil, fmt.Errorf("BTF id of %s: %w", fn, err)
		}
		ids = append(ids, uint32(id))
	}
	return ids, nil
}
