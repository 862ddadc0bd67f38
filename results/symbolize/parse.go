package symbolize

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/results/printk"
	"github.com/ftrace-harness/fth/results/regs"
)

// Ref is what one console line says about one frame, before symbolization:
// a symbol with offset and size ("up_read+0x1/0xc0"), an address
// ("[<ffffffff8145b513>]"), or both.
type Ref struct {
	// Text is the frame as printed, without the line's timestamp.
	Text string `json:"text"`
	// LogLine is the 1-based line of the text Parse was given.
	LogLine int `json:"-"`
	// Func is the symbol of a "func+0xOFF/0xLEN" reference, "" if none.
	Func string `json:"symbol,omitempty"`
	// Offset is OFF: how far into Func the address is.
	Offset uint64 `json:"-"`
	// Size is LEN: the distance kallsyms saw to the next symbol.
	Size uint64 `json:"-"`
	// Addr is the printed address, valid when HasAddr.
	Addr Addr `json:"addr,omitempty"`
	// HasAddr tells a printed address of 0 from none.
	HasAddr bool `json:"-"`
	// Module is the module a symbol belongs to ("func+0x1/0x2 [mod]").
	Module string `json:"module,omitempty"`
	// Return means the address is a return address (a call-trace frame, a
	// link register) rather than the instruction that was executing.
	Return bool `json:"-"`
	// Register means the line is a register dump (RIP:, pc :, NIP ...).
	Register bool `json:"-"`
	// Unreliable is a "? " frame: a stale value found on the stack.
	Unreliable bool `json:"unreliable,omitempty"`
}

// syntax holds the patterns Parse uses; they never change after init.
type syntax struct {
	sym, addr, bareHex, traceFrame *regexp.Regexp
}

// rx is the immutable pattern table.
var rx = syntax{
	// func+0xOFF/0xLEN, optionally "? " before and " [module]" after.
	sym: regexp.MustCompile(`(?:^|[\s(:\]])(\?\s+)?([A-Za-z_.$][\w.$]*)\+0x([0-9a-fA-F]+)/0x([0-9a-fA-F]+)(?:\s+\[([\w-]+)\])?`),
	// [<ffffffff81000000>] (x86, riscv, arm) and [c000000000d15c68] (powerpc).
	addr: regexp.MustCompile(`\[<?([0-9a-fA-F]{8,16})>?\]`),
	// A register printed without a symbol: "RIP: 0010:0xffffffff81000000".
	bareHex: regexp.MustCompile(`(?:^|[\s:])0x([0-9a-fA-F]{8,16})\b`),
	// A call-trace line: markers, up to two addresses, "? ", then a frame.
	traceFrame: regexp.MustCompile(`^\s*(?:<\w+>\s+)?(?:\[<?[0-9a-fA-F]{8,}>?\]\s*){0,2}(?:\?\s+)?(?:\(?[A-Za-z_.$][\w.$]*\+0x|\(|$)`),
}

// Parse finds every frame reference in text, in order. Lines that name no
// code (register values, "Code:" bytes) yield nothing.
func Parse(text string) []Ref {
	var refs []Ref
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r \t")
		refs = append(refs, parseLine(i+1, printk.Text(line))...)
	}
	return refs
}

func parseLine(num int, line string) []Ref {
	// QEMU's "info registers" (registers.txt): "RIP=ffffffff8145b513"
	// on x86, " pc       ffffffff8040d4d0" on riscv64.
	if name, pc, ok := regs.QEMUPC(line); ok {
		return []Ref{{LogLine: num, Text: name + "=" + pc, Addr: Addr(hex(pc)), HasAddr: true, Register: true}}
	}
	// The kernel's register dump lines that name code addresses: RIP:,
	// pc :, NIP [...], LR is at ...
	reg := regs.CodeReg().FindStringSubmatch(line)
	base := Ref{LogLine: num, Register: reg != nil}
	switch {
	case reg != nil:
		base.Return = regs.IsLink(reg[1])
	default:
		base.Return = rx.traceFrame.MatchString(line)
	}
	syms := rx.sym.FindAllStringSubmatchIndex(line, -1)
	addrs := rx.addr.FindAllStringSubmatchIndex(line, -1)
	var out []Ref
	if len(syms) == 0 {
		if strings.HasPrefix(strings.TrimSpace(line), "Code:") {
			return nil
		}
		if !base.Return && reg == nil {
			return nil
		}
		for _, a := range addrs {
			// Bare brackets without angles are too common in other
			// messages ("mask [00022c8c]") to count without a symbol.
			if !strings.HasPrefix(line[a[0]:], "[<") {
				continue
			}
			r := base
			r.Text = strings.TrimSpace(line)
			r.Addr, r.HasAddr = Addr(hex(line[a[2]:a[3]])), true
			out = append(out, r)
		}
		if len(out) == 0 && reg != nil {
			if m := rx.bareHex.FindStringSubmatch(line); m != nil {
				r := base
				r.Text = strings.TrimSpace(line)
				r.Addr, r.HasAddr = Addr(hex(m[1])), true
				out = append(out, r)
			}
		}
		return out
	}
	prevEnd := 0
	for _, m := range syms {
		r := base
		// m[2..3] is "? ", m[4..5] the name, then offset, size, module.
		start := m[4]
		if m[2] >= 0 {
			start = m[2]
			r.Unreliable = true
		}
		r.Text = strings.TrimSpace(line[start:m[1]])
		r.Func = line[m[4]:m[5]]
		r.Offset, r.Size = hex(line[m[6]:m[7]]), hex(line[m[8]:m[9]])
		if m[10] >= 0 {
			r.Module = line[m[10]:m[11]]
		}
		// The address that goes with a symbol is the last one printed
		// between the previous symbol and this one: powerpc prints the
		// stack pointer first and the address second.
		for _, a := range addrs {
			if a[0] >= prevEnd && a[1] <= m[4] {
				r.Addr, r.HasAddr = Addr(hex(line[a[2]:a[3]])), true
			}
		}
		if strings.HasSuffix(strings.TrimSpace(line[m[1]:]), "(unreliable)") {
			r.Unreliable = true
		}
		prevEnd = m[1]
		out = append(out, r)
	}
	return out
}

func hex(s string) uint64 {
	v, _ := strconv.ParseUint(s, 16, 64)
	return v
}
