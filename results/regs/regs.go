// Package regs is how each kernel architecture prints its registers: the
// program counter's and link register's names and line forms in the
// kernel's register dumps, the register line of a task interrupted in user
// mode, and where QEMU's `info registers` prints the program counter and
// stack pointer. It is data, one Format per kernel arch; the patterns the
// console readers use are built from all of it once (match.go), because a
// reader seldom knows which arch printed a log.
//
// A new arch's register format is one Format here and its key in the arch
// row (harness/arch, Arch.RegFormat).
package regs

import (
	"errors"
	"fmt"
	"strings"
)

// Form is how a register dump prints a register holding a code address.
type Form int

const (
	// Colon is "name: value" or "name : value": x86's "RIP: 0010:func+0x",
	// arm64's "pc : func+0x", riscv's "epc : ffffffff80001234".
	Colon Form = iota + 1
	// Bracket is "name [address] symbol": powerpc's
	// "NIP [c000000000293cdc] lockdep_hardirqs_on_prepare+0x26c/0x320".
	Bracket
	// IsAt is "name is at symbol": arm's and pre-v4.16 arm64's
	// "PC is at io_serial_out+0x40/0x48".
	IsAt
)

// Reg is a register of the kernel's dumps and the forms it is printed in.
type Reg struct {
	Name  string
	Forms []Form
}

// QEMUReg is where QEMU's `info registers` prints a register.
type QEMUReg struct {
	// Label is the word the value follows: "RSP" of "RSP=ffff…", "x2/sp"
	// of "x2/sp ffff…", "GPR00" of powerpc's row "GPR00 r0 r1 r2 r3".
	Label string
	// Eq says the value is in the label's own word, after "=".
	Eq bool
	// Skip is how many words after the label come before the value: 1
	// for r1, the stack pointer, in powerpc's GPR00 row.
	Skip int
}

// Format is how one kernel architecture prints its registers.
type Format struct {
	// Arch is the kernel's name for the arch, its arch/ directory, where
	// show_regs prints these: the key Lookup takes.
	Arch string
	// PC are the names the program counter is printed under, current
	// kernels' first; older kernels' names follow (x86's IP and i386's
	// EIP), since the corpus has their logs.
	PC []Reg
	// Link is the link register, whose value is a return address; x86
	// has none.
	Link []Reg
	// User starts the register line of a task interrupted in user mode:
	// x86's user code segment ("RIP: 0033:"), elsewhere the program
	// counter holding a user address. "" where no log has shown one.
	User string
	// QEMUPC and QEMUSP are the program counter and stack pointer in
	// QEMU's `info registers` (registers.txt); zero for an arch fth does
	// not boot.
	QEMUPC, QEMUSP QEMUReg
}

// ErrUnknown is wrapped by Lookup for an arch without a Format.
var ErrUnknown = errors.New("no register format")

// Formats returns every arch's Format. The logs behind each line form
// are in results/console/testdata/<arch> and regs_test.go.
func Formats() []Format {
	return []Format{
		{
			Arch: "x86",
			PC: []Reg{
				{"RIP", []Form{Colon}},
				// Pre-v4.15 page faults: "IP: [<ffffffff81234567>] func+0x".
				{"IP", []Form{Colon}},
				// i386: "EIP: 0060:[<c1234567>]", older "EIP is at func+0x".
				{"EIP", []Form{Colon, IsAt}},
			},
			User:   "RIP: 0033:",
			QEMUPC: QEMUReg{Label: "RIP", Eq: true},
			QEMUSP: QEMUReg{Label: "RSP", Eq: true},
		},
		{
			Arch: "arm64",
			PC:   []Reg{{"pc", []Form{Colon}}, {"PC", []Form{IsAt}}},
			Link: []Reg{{"lr", []Form{Colon}}, {"LR", []Form{IsAt}}},
			User: "pc : 0000",
			// " PC=ffff800080001234 X00=…", " SP=…" in a later row.
			QEMUPC: QEMUReg{Label: "PC", Eq: true},
			QEMUSP: QEMUReg{Label: "SP", Eq: true},
		},
		{
			Arch: "riscv",
			PC:   []Reg{{"epc", []Form{Colon}}},
			Link: []Reg{{"ra", []Form{Colon}}},
			User: "epc : 0000",
			// " pc       ffffffff8040d4d0", " x2/sp    ff20000000123456".
			QEMUPC: QEMUReg{Label: "pc"},
			QEMUSP: QEMUReg{Label: "x2/sp"},
		},
		{
			Arch: "powerpc",
			// "NIP:  c000000000293cdc LR: c000000000293cd8 CTR: …", then
			// "NIP [c000000000293cdc] func+0x26c/0x320" and "LR […] …".
			PC:   []Reg{{"NIP", []Form{Colon, Bracket}}},
			Link: []Reg{{"LR", []Form{Bracket}}},
			// A syscall or interrupt from user mode prints a user NIP
			// ("NIP:  00000000000a7d50", MSR with PR set):
			// testdata/powerpc/churn-sched-while-atomic-futex-null-gcc14-fth-7.3.4.
			User:   "NIP:  0000",
			QEMUPC: QEMUReg{Label: "NIP"},
			QEMUSP: QEMUReg{Label: "GPR00", Skip: 1},
		},
		{
			// 32-bit arm, in the corpus only: fth boots no arm guest.
			Arch: "arm",
			PC:   []Reg{{"PC", []Form{IsAt}}, {"pc", []Form{Colon}}},
			Link: []Reg{{"LR", []Form{IsAt}}, {"lr", []Form{Colon}}},
		},
	}
}

// Lookup returns the Format of the kernel arch arch.
func Lookup(arch string) (Format, error) {
	var known []string
	for _, f := range Formats() {
		if f.Arch == arch {
			return f, nil
		}
		known = append(known, f.Arch)
	}
	return Format{}, fmt.Errorf("%w for arch %q: regs knows %s", ErrUnknown, arch, strings.Join(known, ", "))
}

// Bootable says what f lacks for an arch fth boots, nil if nothing: the
// user-mode marker (results/hang) and QEMU's program counter
// (results/symbolize) and stack pointer (the hang forensics).
func (f Format) Bootable() error {
	var missing []string
	if len(f.PC) == 0 {
		missing = append(missing, "PC")
	}
	if f.User == "" {
		missing = append(missing, "User")
	}
	if f.QEMUPC.Label == "" {
		missing = append(missing, "QEMUPC")
	}
	if f.QEMUSP.Label == "" {
		missing = append(missing, "QEMUSP")
	}
	if len(missing) > 0 {
		return fmt.Errorf("register format %s lacks %s", f.Arch, strings.Join(missing, ", "))
	}
	return nil
}
