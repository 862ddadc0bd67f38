package attach

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/wire/event"
)

// kernelErrnos names errnos as the kernel source does where libc's names
// differ or are missing: above all the errnos above 511 that the kernel uses
// internally (include/linux/errno.h). They are not meant to reach user space
// but some do, ENOTSUPP (524) from BPF above all.
var kernelErrnos = map[unix.Errno]string{
	512: "ERESTARTSYS",
	513: "ERESTARTNOINTR",
	514: "ERESTARTNOHAND",
	515: "ENOIOCTLCMD",
	516: "ERESTART_RESTARTBLOCK",
	517: "EPROBE_DEFER",
	518: "EOPENSTALE",
	519: "ENOPARAM",
	521: "EBADHANDLE",
	522: "ENOTSYNC",
	523: "EBADCOOKIE",
	524: "ENOTSUPP",
	525: "ETOOSMALL",
	526: "ESERVERFAULT",
	527: "EBADTYPE",
	528: "EJUKEBOX",
	529: "EIOCBQUEUED",
	530: "ERECALLCONFLICT",
	531: "ENOGRACE",
	// x/sys/unix calls 95 "ENOTSUP", the libc alias. The kernel source
	// says EOPNOTSUPP, and "ENOTSUP" next to "ENOTSUPP" (524) invites
	// misreading, so the kernel's name wins.
	unix.EOPNOTSUPP: "EOPNOTSUPP",
}

// ErrnoName returns the kernel's name for e ("EINVAL", "ENOTSUPP"), or
// "errno<N>" when it has none.
func ErrnoName(e unix.Errno) string {
	if name, ok := kernelErrnos[e]; ok {
		return name
	}
	if name := unix.ErrnoName(e); name != "" {
		return name
	}
	return fmt.Sprintf("errno%d", int(e))
}

// OtherErrno is the Phase.Errnos key for failures that carry no errno (the
// loader refused before any syscall, e.g. the target has no BTF).
const OtherErrno = "other"

// errnoOf finds the errno that cilium/ebpf wraps inside err. ok is false if
// the failure did not come from a syscall.
func errnoOf(err error) (name string, ok bool) {
	var e unix.Errno
	if errors.As(err, &e) && e != 0 {
		return ErrnoName(e), true
	}
	return "", false
}

// maxMsg bounds a failure message: the host stores one per failure.
const maxMsg = 400

// message is the first line of err, plus the first line of the verifier log
// when err carries one that the error text does not already show: for an
// attach-target rejection that line is the reason (e.g. "arg0 type ... is
// not supported").
func message(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		for _, l := range ve.Log {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if !strings.Contains(msg, l) {
				msg += " (verifier: " + l + ")"
			}
			break
		}
	}
	if len(msg) > maxMsg {
		msg = msg[:maxMsg] + "…"
	}
	return msg
}

// ErrnoOf returns the kernel's name of the errno wrapped in err (see
// ErrnoName), for callers outside this package that time their own
// syscalls. ok is false if err carries no errno.
func ErrnoOf(err error) (name string, ok bool) { return errnoOf(err) }

// Message is the one-line form of err used in Failure events: its first
// line, plus the first verifier log line when err is a verifier error, at
// most a few hundred bytes.
func Message(err error) string { return message(err) }

// FeatureErr is the Feature event saying that name is not supported
// here, with the errno and message of err, why not.
func FeatureErr(name string, err error) event.Feature {
	errno, _ := ErrnoOf(err)
	return event.Feature{Name: name, Errno: errno, Msg: Message(err)}
}
