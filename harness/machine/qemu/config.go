// Package qemu boots a kernel and initramfs under QEMU, with the serial console
// on QEMU's stdout, the agent's events on a virtio-serial port, and QMP on a
// unix socket for status, register dumps and teardown.
package qemu

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/shell"
	"github.com/ftrace-harness/fth/wire/event"
)

// Accel selects how QEMU executes the guest.
type Accel string

// Accelerators. TCG's thread mode matters to the bugs this harness hunts: with
// one thread, vCPUs interleave only at TB boundaries; with many they really run
// in parallel, which also exposes QEMU's own cross-modifying-code handling.
const (
	AccelAuto      Accel = "auto"
	AccelKVM       Accel = "kvm"
	AccelTCGSingle Accel = "tcg-single"
	AccelTCGMulti  Accel = "tcg-multi"
)

// ErrBadAccel is wrapped by ParseAccel.
var ErrBadAccel = errors.New("unknown accelerator")

// ParseAccel validates an --accel value.
func ParseAccel(s string) (Accel, error) {
	switch a := Accel(s); a {
	case AccelAuto, AccelKVM, AccelTCGSingle, AccelTCGMulti:
		return a, nil
	}
	return "", fmt.Errorf("%w %q: use auto, kvm, tcg-single or tcg-multi", ErrBadAccel, s)
}

func (a Accel) qemuArg() string {
	switch a {
	case AccelKVM:
		return "kvm"
	case AccelTCGMulti:
		return "tcg,thread=multi"
	default:
		return "tcg,thread=single"
	}
}

// Widening are emulator settings that let an interrupt or a vCPU switch land
// between any two guest instructions, at a cost in speed (see `fth bench
// widening`). They need TCG; Icount also needs one TCG thread, because QEMU
// cannot count instructions deterministically across parallel vCPU threads.
type Widening struct {
	// Singlestep makes every translation block one instruction long, so
	// that TCG checks for interrupts (and, single-threaded, switches vCPUs)
	// after each: QEMU 7.2's -singlestep, one-insn-per-tb in 8.1 and later.
	Singlestep bool `json:"singlestep,omitempty"`
	// Icount is the -icount option ("shift=auto", "shift=0,sleep=off"):
	// virtual time advances per instruction, so timer interrupts arrive at
	// instruction counts rather than host time, and runs become more
	// repeatable.
	Icount string `json:"icount,omitempty"`
}

// String names the widening for cell names and reports: "" for none.
func (w Widening) String() string {
	var parts []string
	if w.Singlestep {
		parts = append(parts, "singlestep")
	}
	if w.Icount != "" {
		parts = append(parts, "icount")
	}
	return strings.Join(parts, "+")
}

// Check reports a widening that cannot work with accel.
func (w Widening) Check(accel Accel) error {
	if w == (Widening{}) {
		return nil
	}
	if accel == AccelKVM {
		return fmt.Errorf("race widening (%s) needs TCG, not kvm: use --accel tcg-single", w)
	}
	if w.Icount != "" && accel == AccelTCGMulti {
		return errors.New("-icount needs one TCG thread: use --accel tcg-single with --icount")
	}
	return nil
}

// AgentPortName is the virtio-serial port the guest agent looks for.
const AgentPortName = "fth.agent"

// RacePortName is the race control port (event.RacePortName).
const RacePortName = event.RacePortName

// Config describes one VM. It holds no state: Args derives the command line.
type Config struct {
	Arch   arch.Arch
	Kernel string
	Initrd string
	// Cmdline is appended after the harness's own kernel parameters.
	Cmdline []string
	CPUs    int
	// MemoryMB is the guest RAM.
	MemoryMB int
	// Accel must be resolved (not AccelAuto) before Args is called.
	Accel Accel
	// SocketDir holds qmp.sock and agent.sock; keep it short (unix socket paths
	// are limited to 108 bytes).
	SocketDir string
	// Widen holds the race-widening settings.
	Widen Widening
	// SSHPort, when non-zero, gives the guest a NIC on QEMU's user-mode
	// network with the guest's port 22 forwarded from 127.0.0.1:SSHPort
	// (never another host address): the VM that stands in for a board.
	SSHPort int
	// Reboot lets a guest reboot (a board that panics comes back) instead
	// of making QEMU exit.
	Reboot bool
	// Race gives the VM a gdbstub (gdb.sock) and a second virtio-serial
	// port, fth.race (race.sock), on which the agent's race scenario asks
	// the host to stop a vCPU at an exact instruction (harness/race).
	Race bool
	// QEMUVersion is the emulator's major*100+minor (702 for 7.2); 0 means
	// 7.2, the version Debian 12 ships. It picks the spelling of Singlestep.
	QEMUVersion int
	// Emulator is the --qemu choice; "" is the host's QEMU.
	Emulator Emulator
	// Root is the toolchain root's directory, for an Emulator in it.
	Root string
}

// QMPSocket is the path of the QMP socket.
func (c Config) QMPSocket() string { return filepath.Join(c.SocketDir, "qmp.sock") }

// AgentSocket is the path of the agent channel's socket.
func (c Config) AgentSocket() string { return filepath.Join(c.SocketDir, "agent.sock") }

// GDBSocket is the gdbstub's socket (Race).
func (c Config) GDBSocket() string { return filepath.Join(c.SocketDir, "gdb.sock") }

// RaceSocket is the race control port's socket (Race).
func (c Config) RaceSocket() string { return filepath.Join(c.SocketDir, "race.sock") }

// ResetLog is where QEMU logs CPU resets (-d cpu_reset) on a VM without
// Reboot. On x86 it is the only place a triple fault is named.
func (c Config) ResetLog() string { return filepath.Join(c.SocketDir, "qemu-reset.log") }

// KernelCmdline is the full guest command line.
func (c Config) KernelCmdline() string {
	params := []string{
		"console=" + c.Arch.Console,
		// An oops does not panic (PANIC_ON_OOPS=n), but a real panic reboots at
		// once, and -no-reboot turns that into QEMU exiting.
		"panic=-1",
		// Stable addresses make console stacks symbolizable against vmlinux.
		"nokaslr",
		"printk.time=1",
	}
	params = append(params, c.Arch.Cmdline...)
	params = append(params, c.Cmdline...)
	return strings.Join(params, " ")
}

// Args is the QEMU command line, without the binary. It is a pure function of
// c, so it can be golden-tested and printed as a repro.
func (c Config) Args() []string { return c.args(false) }

// args builds the command line; byHand is for a person at a shell, who has
// no QMP client to read a paused VM and quit it.
func (c Config) args(byHand bool) []string {
	args := []string{
		"-machine", c.Arch.Machine,
		"-accel", c.Accel.qemuArg(),
		"-cpu", c.Arch.CPU,
		"-smp", strconv.Itoa(c.CPUs),
		"-m", strconv.Itoa(c.MemoryMB),
		"-kernel", c.Kernel,
		"-append", c.KernelCmdline(),
		"-display", "none",
		"-monitor", "none",
		"-qmp", "unix:" + c.QMPSocket() + ",server=on,wait=off",
		"-chardev", "stdio,id=" + ConsoleID + ",signal=off",
		"-serial", "chardev:" + ConsoleID,
		// The agent channel waits for the harness to connect, so no event the
		// guest writes early is lost.
		"-chardev", "socket,id=agent0,path=" + c.AgentSocket() + ",server=on,wait=on",
		"-device", c.Arch.VirtioSerial + ",id=vser0",
		"-device", "virtserialport,bus=vser0.0,chardev=agent0,name=" + AgentPortName,
		"-nodefaults",
	}
	if c.Initrd != "" {
		args = append(args, "-initrd", c.Initrd)
	}
	if c.Race {
		// Both wait=off: the guest runs until the agent asks for its first
		// injection, and the host connects to the gdbstub only then (a
		// connecting client stops the VM).
		args = append(args,
			"-gdb", "unix:"+c.GDBSocket()+",server=on,wait=off",
			"-chardev", "socket,id=race0,path="+c.RaceSocket()+",server=on,wait=off",
			"-device", "virtserialport,bus=vser0.0,chardev=race0,name="+RacePortName)
	}
	switch {
	case c.Reboot:
	case byHand:
		args = append(args, "-no-reboot")
	default:
		// Like -no-reboot, a reset ends the run, but the guest stays paused
		// where it was, so the registers of a reset that printed nothing
		// (an x86 triple fault) can still be read. VM quits QEMU on an
		// orderly poweroff.
		args = append(args, "-action", "reboot=shutdown,shutdown=pause", "-d", "cpu_reset", "-D", c.ResetLog())
	}
	if c.SSHPort != 0 {
		args = append(args,
			"-netdev", fmt.Sprintf("user,id=%s,hostfwd=tcp:127.0.0.1:%d-:22", NetDev, c.SSHPort),
			"-device", "virtio-net-pci,netdev="+NetDev)
	}
	if c.Widen.Singlestep {
		if c.QEMUVersion >= 801 {
			args[3] += ",one-insn-per-tb=on"
		} else {
			args = append(args, "-singlestep")
		}
	}
	if c.Widen.Icount != "" {
		args = append(args, "-icount", c.Widen.Icount)
	}
	return args
}

// Repro is the command line a developer can paste to boot the same VM by
// hand (through bwrap for a QEMU in the toolchain root).
// QEMU then waits for a reader on the agent socket: `socat - UNIX-CONNECT:<path>`.
// It has -no-reboot where Args pauses on shutdown: by hand there is no QMP
// client to read the registers and quit, and a VM that ends should exit.
func (c Config) Repro() string {
	var b strings.Builder
	b.WriteString(c.reproPrefix())
	b.WriteString(c.Arch.QEMU)
	for _, a := range c.args(true) {
		b.WriteByte(' ')
		b.WriteString(shell.Quote(a))
	}
	return b.String()
}

// versionRe finds "version 7.2.11" in `qemu-system-x86_64 --version`.
var versionRe = regexp.MustCompile(`version (\d+)\.(\d+)`)

// Version returns binary's major*100+minor (702 for QEMU 7.2).
func Version(ctx context.Context, binary string) (int, error) {
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", binary, err)
	}
	return parseVersion(string(out))
}

func parseVersion(s string) (int, error) {
	m := versionRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("no version in %q", strings.TrimSpace(s))
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major*100 + minor, nil
}
