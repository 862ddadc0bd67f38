// Package arch is the one place that knows about architectures: how to build a
// kernel for one, how to boot it under QEMU, and which ftrace features it has.
// Adding an architecture means adding one row to the table and one kconfig
// fragment (kconfigs/arch/<name>).
package arch

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Name is an architecture name as the harness spells it (Linux's uname -m
// spelling, except ppc64le).
type Name string

// The architectures the harness knows.
const (
	X86_64  Name = "x86_64"
	ARM64   Name = "arm64"
	RISCV64 Name = "riscv64"
	PPC64LE Name = "ppc64le"
)

// ErrUnknown is wrapped by Lookup for a name that has no row.
var ErrUnknown = errors.New("unknown architecture")

// Feature is an ftrace capability that only some architectures have.
type Feature string

// Features the variant matrix selects on.
const (
	CallOps     Feature = "call-ops"
	DirectCalls Feature = "direct-calls"
)

// Arch is everything the harness needs to know about one architecture.
type Arch struct {
	Name Name
	// GOARCH is what the guest agent is built for.
	GOARCH string
	// Uname is what `uname -m` prints on this arch: how a board is
	// recognised.
	Uname string
	// KernelArch is the kernel's ARCH= value.
	KernelArch string
	// CrossCompile is the CROSS_COMPILE prefix when the host is not this arch.
	CrossCompile string
	// CrossPackage is the Debian package that provides CrossCompile-gcc.
	CrossPackage string
	// LLVM, when set, builds with clang and lld instead of gcc: it is the
	// kernel's LLVM= value, a version suffix such as "-19".
	LLVM string
	// Image is the kernel image QEMU boots, relative to the build directory.
	Image string
	// MakeTarget builds Image.
	MakeTarget string

	// QEMU is the emulator binary, and QEMUPackage the Debian package holding it.
	QEMU        string
	QEMUPackage string
	Machine     string
	CPU         string
	// Console is the guest device of the serial console (console= value).
	Console string
	// VirtioSerial is the virtio-serial controller device for this machine.
	VirtioSerial string
	// Cmdline is appended to every boot's kernel command line.
	Cmdline []string
	// RegFormat names how the kernel and QEMU print this arch's registers:
	// its Format in results/regs (the kernel's arch/ directory), whose
	// data every console reader's register patterns are built from.
	RegFormat string
	// GDBPC is the program counter's register number in GDB's numbering
	// for the arch, as QEMU's gdbstub answers p requests.
	GDBPC int
	// KVMCapable says whether KVM can run this guest on this host arch at all.
	KVMCapable bool
	// NoRace says why the race injection (the race scenario, the
	// campaign's race stage) cannot run on the arch; "" where it can.
	NoRace string

	// BoardCmdline is added when the arch boots as a stand-in board (fth
	// boardvm): ramoops where the machine keeps RAM across a reboot, so
	// the panic that rebooted the "board" is in /sys/fs/pstore afterwards.
	BoardCmdline []string

	// Features lists the ftrace capabilities Linux offers on this arch.
	Features []Feature
	// DefaultVariants are the matrix variants worth a nightly run here
	// (harness/matrix names them); empty means the matrix's default for
	// the arch's features.
	DefaultVariants []string
	// TimeoutScale multiplies every guest deadline: some arches emulate slower.
	TimeoutScale float64
	// DefaultToolchain and DefaultQEMU are what --toolchain default and
	// --qemu default (the flags' defaults) pick for this arch: the best
	// combination measured to work here (docs/toolchains.md). Empty
	// is the host's: Debian 12's compilers and QEMU 7.2.
	DefaultToolchain string
	DefaultQEMU      string
	// ToolchainNote, when set, says what this machine's toolchain cannot
	// build for the arch, and what can run instead: it is added to the
	// error of a cell whose symbols the toolchain rules out.
	ToolchainNote string
}

// Has reports whether a offers feature f.
func (a *Arch) Has(f Feature) bool { return slices.Contains(a.Features, f) }

// Fragment is the kconfig fragment for this arch, relative to kconfigs/.
func (a *Arch) Fragment() string { return "arch/" + string(a.Name) }

// table holds one row per architecture. Facts here were measured on QEMU 7.2
// and Linux 7.3; see docs/architectures.md and docs/toolchains.md for the
// measurements behind them.
var table = []Arch{
	{
		Name:         X86_64,
		Uname:        "x86_64",
		GOARCH:       "amd64",
		KernelArch:   "x86_64",
		CrossCompile: "x86_64-linux-gnu-",
		CrossPackage: "gcc-x86-64-linux-gnu",
		Image:        "arch/x86/boot/bzImage",
		MakeTarget:   "bzImage",
		QEMU:         "qemu-system-x86_64",
		QEMUPackage:  "qemu-system-x86",
		Machine:      "q35",
		CPU:          "max",
		Console:      "ttyS0",
		VirtioSerial: "virtio-serial-pci",
		RegFormat:    "x86",
		GDBPC:        16, // rip, after the 16 general registers
		KVMCapable:   true,
		// The top 16 MiB of a 1 GiB guest: QEMU keeps guest RAM across a
		// guest reboot, as a board with ramoops does.
		BoardCmdline: []string{"memmap=16M$0x3f000000", "ramoops.mem_address=0x3f000000", "ramoops.mem_size=0x1000000", "ramoops.record_size=0x100000"},
		// x86 has no CALL_OPS: it patches a 5-byte call through an INT3 state.
		Features:        []Feature{DirectCalls},
		DefaultVariants: []string{"direct-calls-full"},
		TimeoutScale:    1,
	},
	{
		Name:         ARM64,
		Uname:        "aarch64",
		GOARCH:       "arm64",
		KernelArch:   "arm64",
		CrossCompile: "aarch64-linux-gnu-",
		CrossPackage: "gcc-aarch64-linux-gnu",
		Image:        "arch/arm64/boot/Image",
		MakeTarget:   "Image",
		QEMU:         "qemu-system-aarch64",
		QEMUPackage:  "qemu-system-arm",
		Machine:      "virt",
		// pauth and SVE make TCG markedly slower and add nothing to ftrace.
		CPU:          "max,pauth=off,sve=off",
		Console:      "ttyAMA0",
		VirtioSerial: "virtio-serial-pci",
		RegFormat:    "arm64",
		GDBPC:        32, // pc, after x0-x30 and sp
		Features:     []Feature{CallOps, DirectCalls},
		// arm64 can turn CALL_OPS off and keep direct calls: both are
		// worth a nightly run.
		DefaultVariants: []string{"call-ops-full", "no-call-ops-full"},
		TimeoutScale:    2,
	},
	{
		Name:         RISCV64,
		Uname:        "riscv64",
		GOARCH:       "riscv64",
		KernelArch:   "riscv",
		CrossCompile: "riscv64-linux-gnu-",
		CrossPackage: "gcc-riscv64-linux-gnu",
		// gcc 12 lacks -fmin-function-alignment, so with gcc riscv CALL_OPS only
		// comes with RVC off, and every real board uses RVC. clang keeps both.
		LLVM:         "-19",
		Image:        "arch/riscv/boot/Image",
		MakeTarget:   "Image",
		QEMU:         "qemu-system-riscv64",
		QEMUPackage:  "qemu-system-misc",
		Machine:      "virt",
		CPU:          "rv64",
		Console:      "ttyS0",
		VirtioSerial: "virtio-serial-pci",
		RegFormat:    "riscv",
		GDBPC:        32, // pc, after x0-x31
		// QEMU 7.2's OpenSBI has no DBCN, so earlycon=sbi prints nothing, and its
		// device tree has only the old riscv,isa property.
		Cmdline:  []string{"earlycon=uart8250,mmio,0x10000000", "riscv_isa_fallback"},
		Features: []Feature{CallOps, DirectCalls},
		// riscv cannot turn CALL_OPS off and keep direct calls (they hang
		// without it).
		DefaultVariants: []string{"call-ops-full"},
		TimeoutScale:    2,
		// QEMU 11.1 runs the vCPUs in parallel (tcg-multi): the campaign
		// detects the same mutants in 0.38x the time and a 30-minute
		// campaign of the correct kernel passed (docs/tcg.md).
		DefaultQEMU: "11.1",
	},
	{
		Name:         PPC64LE,
		Uname:        "ppc64le",
		GOARCH:       "ppc64le",
		KernelArch:   "powerpc",
		CrossCompile: "powerpc64le-linux-gnu-",
		CrossPackage: "gcc-powerpc64le-linux-gnu",
		Image:        "vmlinux",
		MakeTarget:   "vmlinux",
		QEMU:         "qemu-system-ppc64",
		QEMUPackage:  "qemu-system-ppc",
		Machine:      "pseries",
		CPU:          "power9",
		Console:      "hvc0",
		VirtioSerial: "virtio-serial-pci",
		RegFormat:    "powerpc",
		GDBPC:        64, // pc, after r0-r31 and f0-f31
		Features:     []Feature{CallOps, DirectCalls},
		// Direct calls come only with CALL_OPS on powerpc, so
		// direct-calls-full covers both.
		DefaultVariants: []string{"direct-calls-full"},
		TimeoutScale:    3,
		// The host's gcc 12 and clang 19 cannot build powerpc's
		// trampolines (ToolchainNote); gcc 14 can. Its storm passes
		// under QEMU 7.2 and 11.1 alike, and 7.2 attached twice as
		// fast side by side (docs/toolchains.md): the host's.
		DefaultToolchain: "gcc-14",
		ToolchainNote: "Linux selects CALL_OPS and DIRECT_CALLS on powerpc only with ARCH_USING_PATCHABLE_FUNCTION_ENTRY; Debian 12's gcc 12 fails the kernel's check-fpatchable-function-entry.sh probe and clang-19 rejects the flag, so no BPF trampoline can be built with the host's compilers (docs/architectures.md). " +
			"gcc 14 from the toolchain root (make deps), the default --toolchain for ppc64le, builds them: `make test-arch=ppc64le` (docs/toolchains.md). " +
			"What runs: the boot, the agent and the hammer without trampolines, `make test-arch=ppc64le FTH_RUN_FLAGS=\"--n 0 --toolchain host --fragments base,arch/ppc64le,preempt/full --agent-arg scenario=storm\"`",
	},
}

// All returns every known architecture, in table order.
func All() []Arch { return slices.Clone(table) }

// Names returns the names of every known architecture.
func Names() []Name {
	names := make([]Name, len(table))
	for i := range table {
		names[i] = table[i].Name
	}
	return names
}

// Lookup returns the row for name. Both the harness spelling and GOARCH are
// accepted, since developers type either.
func Lookup(name string) (Arch, error) {
	for _, a := range table {
		if string(a.Name) == name || a.GOARCH == name {
			return a, nil
		}
	}
	known := make([]string, len(table))
	for i, a := range table {
		known[i] = string(a.Name)
	}
	return Arch{}, fmt.Errorf("%w %q: choose one of %s", ErrUnknown, name, strings.Join(known, ", "))
}

// HostName maps a machine name — uname -m, GOARCH or the harness's own
// spelling — to an arch name, from the table alone.
func HostName(machine string) (Name, bool) {
	for _, a := range table {
		if a.Uname == machine || a.GOARCH == machine || string(a.Name) == machine {
			return a.Name, true
		}
	}
	return "", false
}

// ByUname returns the row whose Uname is m (`uname -m` on a board).
func ByUname(m string) (Arch, error) {
	for _, a := range table {
		if a.Uname == m {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("%w: uname -m says %q; fth knows %s", ErrUnknown, m, knownUnames())
}

func knownUnames() string {
	var out []string
	for _, a := range table {
		out = append(out, a.Uname)
	}
	return strings.Join(out, ", ")
}
