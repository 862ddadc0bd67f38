package regs

import (
	"fmt"
	"strings"
)

// registers.txt is QEMU's `info registers -a` with a section per vCPU of
// the words on top of its stack, which harness/machine/qemu appends:
//
//	CPU#0
//	RIP=ffffffff81234567 RFL=00000246 ...
//	stack of CPU#0 at ffffc90000013e58:
//	+0x008 ffffffff81234567
//
// Its writer and its readers share these functions, so the layout is
// spelled in one place.

// stackPrefix starts a vCPU's stack section.
const stackPrefix = "stack of "

// DumpCPU reads the line that starts a vCPU's registers in QEMU's dump
// ("CPU#0"): its name as printed, "CPU#0".
func DumpCPU(line string) (cpu string, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "CPU#") {
		return "", false
	}
	return line, true
}

// StackHeader is the line that starts vCPU cpu's stack section, read at
// stack pointer sp.
func StackHeader(cpu int, sp uint64) string {
	return fmt.Sprintf("%sCPU#%d at %016x:", stackPrefix, cpu, sp)
}

// ParseStackHeader reads a StackHeader line: the vCPU it names ("CPU#0").
func ParseStackHeader(line string) (cpu string, ok bool) {
	rest, ok := strings.CutPrefix(line, stackPrefix)
	if !ok {
		return "", false
	}
	cpu, _, _ = strings.Cut(rest, " ")
	return cpu, true
}

// StackWord is the line of the stack word at offset off from the stack
// pointer.
func StackWord(off int, w uint64) string { return fmt.Sprintf("+%#03x %016x", off, w) }

// ParseStackWord reads a StackWord line: its offset ("+0x008") and word
// (16 hex digits) as printed.
func ParseStackWord(line string) (off, word string, ok bool) {
	f := strings.Fields(line)
	if len(f) != 2 || !strings.HasPrefix(f[0], "+") {
		return "", "", false
	}
	return f[0], f[1], true
}
