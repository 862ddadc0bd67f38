package attach

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// linkCreateAttr is the link_create member of union bpf_attr up to the
// first 8 bytes of its trailing union, where target_btf_id (and, aliasing it,
// tracing.cookie) live. The kernel accepts an attr shorter than its own and
// treats the rest as zero. A plain fentry link on vmlinux needs only prog_fd
// and attach_type: target_fd and target_btf_id are for attaching to another
// BPF program, and a zero cookie is no cookie.
type linkCreateAttr struct {
	progFD      uint32
	targetFD    uint32
	attachType  uint32
	flags       uint32
	targetBTFID uint32 // union: target_btf_id / tracing.cookie (low half)
	_           uint32 // union: high half of the 8-byte-aligned members
}

// maxEINTR bounds retries of a link create interrupted by a signal. The Go
// runtime preempts goroutines with signals, so EINTR says nothing about the
// kernel; a retry is the honest answer. A kernel that keeps returning EINTR is
// reported as such.
const maxEINTR = 5

// LinkCreate attaches the tracing program progFD with a raw BPF_LINK_CREATE
// of attachType (unix.BPF_TRACE_FENTRY, unix.BPF_TRACE_FEXIT), which must be
// the program's expected attach type: the kernel refuses any other with
// EINVAL. It returns the link fd or the kernel's errno. cilium/ebpf's
// link.AttachTracing is not used because on failure it retries with
// BPF_RAW_TRACEPOINT_OPEN and returns that errno instead of the one the link
// create got.
func LinkCreate(progFD int, attachType uint32) (int, unix.Errno) {
	attr := linkCreateAttr{
		progFD:     uint32(progFD),
		attachType: attachType,
	}
	for i := 0; ; i++ {
		fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == unix.EINTR && i < maxEINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), 0
	}
}

// linkUpdateAttr is the link_update member of union bpf_attr.
type linkUpdateAttr struct {
	linkFD    uint32
	newProgFD uint32
	flags     uint32
	oldProgFD uint32 // only with BPF_F_REPLACE in flags
}

// LinkUpdate replaces the program of link linkFD by newProgFD with a raw
// BPF_LINK_UPDATE and returns the kernel's errno (0 on success). Tracing
// links have no update_prog operation up to at least Linux 7.3, so there the
// answer is EINVAL; callers probe once and report that.
func LinkUpdate(linkFD, newProgFD int) unix.Errno {
	attr := linkUpdateAttr{linkFD: uint32(linkFD), newProgFD: uint32(newProgFD)}
	for i := 0; ; i++ {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_LINK_UPDATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		if errno == unix.EINTR && i < maxEINTR {
			continue
		}
		return errno
	}
}
