package qemu

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/choice"
	"github.com/ftrace-harness/fth/harness/internal/shell"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

// Emulator is a --qemu choice: which QEMU boots the cell.
type Emulator string

// The emulators. Host is the machine's own QEMU (Debian 12's 7.2); 7.2
// names it explicitly and checks its version; 11.1 is trixie-backports'
// QEMU inside the toolchain root (scripts/toolroot.sh), run through bwrap.
const (
	// EmulatorDefault is the arch row's measured best (arch.Arch's
	// DefaultQEMU): 11.1 on riscv64, the host's elsewhere. Resolve turns it into a
	// real choice before anything boots or is recorded.
	EmulatorDefault Emulator = "default"
	EmulatorHost    Emulator = "host"
	QEMU72          Emulator = "7.2"
	QEMU111         Emulator = "11.1"
)

// Emulators lists every choice, in the order help and errors name them.
var Emulators = []Emulator{EmulatorDefault, EmulatorHost, QEMU72, QEMU111}

// ErrBadEmulator is wrapped by ParseEmulator.
var ErrBadEmulator = errors.New("unknown QEMU")

// ParseEmulator validates a --qemu value; "" is host.
func ParseEmulator(s string) (Emulator, error) {
	return choice.Parse(s, Emulators, EmulatorHost, ErrBadEmulator)
}

// Resolve turns default into a's DefaultQEMU, or host where the row has
// none; any other choice is itself.
func (e Emulator) Resolve(a arch.Arch) Emulator {
	return choice.Resolve(e, EmulatorDefault, a.DefaultQEMU, EmulatorHost)
}

// IsHost reports whether e is the host's (host or unset).
func (e Emulator) IsHost() bool { return e == "" || e == EmulatorHost }

// InRoot reports whether e runs inside the toolchain root.
func (e Emulator) InRoot() bool { return e == QEMU111 }

// version is the major*100+minor e promises; 0 for host (any).
func (e Emulator) version() int {
	switch e {
	case QEMU72:
		return 702
	case QEMU111:
		return 1101
	}
	return 0
}

// Same reports whether e and f run the same binary: host and 7.2 on a
// machine whose QEMU is 7.2 (Debian 12's, which HostVersion names).
func (e Emulator) Same(f Emulator) bool {
	norm := func(x Emulator) Emulator {
		if x.IsHost() {
			return HostVersion
		}
		return x
	}
	return norm(e) == norm(f)
}

// HostVersion is the QEMU Debian 12 ships, which host means on the
// machines fth is measured on; a run with --qemu 7.2 checks it.
const HostVersion = QEMU72

// Command is the program and arguments that start the VM: the arch's QEMU
// with Args on the host, or bwrap running it inside the toolchain root with
// every path QEMU touches bound at its own path (the socket directory,
// where the reset log is too, the kernel and the initramfs; /dev/kvm when
// the VM uses KVM).
func (c Config) Command() (string, []string, error) {
	return c.command(c.Args())
}

func (c Config) command(args []string) (string, []string, error) {
	if !c.Emulator.InRoot() {
		bin, err := exec.LookPath(c.Arch.QEMU)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %s not found: apt-get install %s (or run make deps)", ErrQEMU, c.Arch.QEMU, c.Arch.QEMUPackage)
		}
		return bin, args, nil
	}
	root, err := c.root()
	if err != nil {
		return "", nil, err
	}
	return root.Command(c.mounts(), "", c.Arch.QEMU, args...)
}

// root opens the toolchain root and checks it has the arch's QEMU and
// that bwrap is installed.
func (c Config) root() (toolroot.Root, error) {
	root, err := toolroot.Open(c.Root)
	if err != nil {
		return toolroot.Root{}, fmt.Errorf("%w: --qemu %s: %w", ErrQEMU, c.Emulator, err)
	}
	if err := root.Has(c.Arch.QEMU); err != nil {
		return toolroot.Root{}, fmt.Errorf("%w: --qemu %s: %w", ErrQEMU, c.Emulator, err)
	}
	if _, err := exec.LookPath(toolroot.Bwrap); err != nil {
		return toolroot.Root{}, fmt.Errorf("%w: bwrap not found, needed for --qemu %s: apt-get install bubblewrap (or run make deps)", ErrQEMU, c.Emulator)
	}
	return root, nil
}

// mounts are the host paths QEMU in the root needs.
func (c Config) mounts() []toolroot.Mount {
	var ms []toolroot.Mount
	if c.SocketDir != "" {
		ms = append(ms, toolroot.Mount{Path: c.SocketDir, Mode: toolroot.RW})
	}
	if c.Kernel != "" {
		ms = append(ms, toolroot.Mount{Path: c.Kernel, Mode: toolroot.RO})
	}
	if c.Initrd != "" {
		ms = append(ms, toolroot.Mount{Path: c.Initrd, Mode: toolroot.RO})
	}
	if c.Accel == AccelKVM {
		ms = append(ms, toolroot.Mount{Path: "/dev/kvm", Mode: toolroot.DevTry})
	}
	return ms
}

// ProbeVersion runs the VM's QEMU with --version and returns its
// major*100+minor (702 for 7.2) and first line. An emulator named by
// version must be that version.
func (c Config) ProbeVersion(ctx context.Context) (int, string, error) {
	bin, args, err := c.command([]string{"--version"})
	if err != nil {
		return 0, "", err
	}
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s --version: %v", ErrQEMU, c.Arch.QEMU, err)
	}
	v, err := parseVersion(string(out))
	if err != nil {
		return 0, "", fmt.Errorf("%w: %s: %v", ErrQEMU, c.Arch.QEMU, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if want := c.Emulator.version(); want != 0 && v != want {
		where := "the host's"
		if c.Emulator.InRoot() {
			where = "the toolchain root's"
		}
		return 0, "", fmt.Errorf("%w: --qemu %s: %s %s is %d.%d (%s)", ErrQEMU, c.Emulator, where, c.Arch.QEMU, v/100, v%100, line)
	}
	return v, line, nil
}

// reproPrefix is the bwrap part of a root VM's repro line, "" on the host.
func (c Config) reproPrefix() string {
	if !c.Emulator.InRoot() {
		return ""
	}
	root, err := toolroot.Open(c.Root)
	if err != nil {
		return ""
	}
	args, err := root.Args(c.mounts())
	if err != nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(toolroot.Bwrap)
	for _, a := range append(args, "--") {
		b.WriteByte(' ')
		b.WriteString(shell.Quote(a))
	}
	b.WriteByte(' ')
	return b.String()
}
