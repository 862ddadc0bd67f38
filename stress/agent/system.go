package main

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/inventory"
	"github.com/ftrace-harness/fth/stress/modload"
)

// Kernel files the agent reads directly.
const (
	cmdlinePath = "/proc/cmdline"
	preemptPath = "/sys/kernel/debug/sched/preempt"
	sysrqPath   = "/proc/sysrq-trigger"
	printkPath  = "/proc/sys/kernel/printk"
	mountinfo   = "/proc/self/mountinfo"
	kmsgDev     = "/dev/kmsg"
)

// flushDelay gives the host time to read the last events before the guest
// goes away: virtio-serial writes complete when the data is queued, not when
// the host has read it.
const flushDelay = 300 * time.Millisecond

// system is everything run touches outside the process, so tests can run the
// agent's control flow without a VM.
type system struct {
	stdout, stderr io.Writer
	// stdin is watched for EOF with the stdinwatch option.
	stdin      io.Reader
	readFile   func(string) ([]byte, error)
	getenv     func(string) string
	virtioDir  string
	devDir     string
	ppid       int
	pid        int
	numCPU     int
	now        func() time.Time
	release    func() string
	mountFS    func() error
	sync       func()
	sleep      func(time.Duration)
	reboot     func() error
	sysrqCrash func() error
	// hangTask leaves one thread in D state (crash=hung-task).
	hangTask func() error
	// provoke makes the kernel print one report (crash=lkdtm:*, bug:*).
	provoke func(mode string) error
	// consoleLevel sets the kernel's console log level.
	consoleLevel func(int) error
	// kmsgPath is the kernel log device the kmsgstream option reads.
	kmsgPath string
	// kmsg writes a line to the kernel log, best effort.
	kmsg func(string)
	// exit ends the process (the orphan guard).
	exit func(int)
}

func realSystem() system {
	return system{
		stdout:    os.Stdout,
		stdin:     os.Stdin,
		stderr:    os.Stderr,
		readFile:  os.ReadFile,
		getenv:    os.Getenv,
		virtioDir: emit.VirtioPortsDir,
		devDir:    emit.DevDir,
		ppid:      os.Getppid(),
		pid:       os.Getpid(),
		numCPU:    runtime.NumCPU(),
		now:       time.Now,
		release:   kernelRelease,
		mountFS:   func() error { return inventory.MountFS(mountinfo, inventory.DefaultMounts) },
		sync:      unix.Sync,
		sleep:     time.Sleep,
		// The harness's QEMU turns a restart into a stop; a restart
		// also needs no ACPI or PSCI support in the guest kernel.
		reboot: func() error { return unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART) },
		sysrqCrash: func() error {
			return os.WriteFile(sysrqPath, []byte("c"), 0)
		},
		hangTask: func() error { return injectHungTask(modload.DefaultDir) },
		provoke:  func(mode string) error { return provoke(modload.DefaultDir, mode) },
		// One value sets only the first of printk's four: the console's.
		consoleLevel: func(n int) error { return os.WriteFile(printkPath, []byte(strconv.Itoa(n)), 0) },
		kmsgPath:     kmsgDev,
		kmsg: func(line string) {
			_ = os.WriteFile(kmsgDev, []byte(line+"\n"), 0)
		},
		exit: os.Exit,
	}
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// parsePreempt returns the selected model from /sys/kernel/debug/sched/preempt,
// whose content lists the models with the current one in parentheses, e.g.
// "none voluntary (full) lazy". "" if none is marked.
func parsePreempt(s string) string {
	for _, f := range strings.Fields(s) {
		if len(f) > 2 && f[0] == '(' && f[len(f)-1] == ')' {
			return f[1 : len(f)-1]
		}
	}
	return ""
}
