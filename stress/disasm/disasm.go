// Package disasm splits a run of kernel code read from a live guest into
// instructions, for the race scenario's windows: every instruction a task
// passes through from a trampoline's entry to its return is a place to
// preempt it at. Decoding is golang.org/x/arch's, per arch.
package disasm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/ppc64/ppc64asm"
	"golang.org/x/arch/riscv64/riscv64asm"
	"golang.org/x/arch/x86/x86asm"
)

// Insn is one decoded instruction.
type Insn struct {
	// Off is its offset from the start of the code.
	Off int
	// Len is its length in bytes.
	Len int
	// Text is its disassembly in the decoder's (GNU-like) syntax.
	Text string
}

// Window decodes code, which starts at addr in the guest, from its first
// instruction to the first one that leaves it for good: a return, or on
// x86 a jump out of code (the return thunk) or an INT3 (the fill after
// the end). The instructions before that are the straight path a task
// takes through a trampoline; a branch target beyond the return (a path
// the task does not take) is not in it. goarch is Go's name of the arch.
func Window(goarch string, addr uint64, code []byte) ([]Insn, error) {
	var out []Insn
	for off := 0; off < len(code); {
		in, end, err := decode(goarch, addr, code, off)
		if err != nil {
			return out, fmt.Errorf("disasm %s at %#x (+%#x, % x): %w", goarch, addr+uint64(off), off, head(code[off:]), err)
		}
		out = append(out, in)
		off += in.Len
		if end {
			return out, nil
		}
	}
	return out, fmt.Errorf("disasm %s at %#x: no return in the %d bytes read", goarch, addr, len(code))
}

// One decodes the single instruction code starts with: a window of one
// place, such as a callsite's second instruction.
func One(goarch string, addr uint64, code []byte) (Insn, error) {
	if len(code) == 0 {
		return Insn{}, errors.New("no code")
	}
	in, _, err := decode(goarch, addr, code, 0)
	return in, err
}

// CallTarget is where in, an instruction of code (which starts at addr),
// calls: a direct call's target. Only x86_64's call rel32 is known; an
// indirect call, any other instruction, or another arch says false.
func CallTarget(goarch string, addr uint64, code []byte, in Insn) (uint64, bool) {
	if goarch != "amd64" || in.Off < 0 || in.Off+in.Len > len(code) {
		return 0, false
	}
	x, err := x86asm.Decode(code[in.Off:in.Off+in.Len], 64)
	if err != nil || x.Op != x86asm.CALL {
		return 0, false
	}
	rel, ok := x.Args[0].(x86asm.Rel)
	if !ok {
		return 0, false
	}
	return addr + uint64(in.Off+in.Len) + uint64(int64(rel)), true
}

// head is up to the first 8 bytes of b, for an error.
func head(b []byte) []byte {
	return b[:min(len(b), 8)]
}

// ErrUnknownArch is returned for an arch with no decoder here.
var ErrUnknownArch = errors.New("no decoder for this arch")

// decode reads the instruction at off and says whether it ends the
// window.
func decode(goarch string, addr uint64, code []byte, off int) (Insn, bool, error) {
	b := code[off:]
	switch goarch {
	case "amd64":
		// x86asm does not know the CET marker every kernel entry
		// starts with under IBT.
		if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa {
			return Insn{Off: off, Len: 4, Text: "endbr64"}, false, nil
		}
		x, err := x86asm.Decode(b, 64)
		if err != nil {
			return Insn{}, false, err
		}
		in := Insn{Off: off, Len: x.Len, Text: x86asm.GNUSyntax(x, addr+uint64(off), nil)}
		switch x.Op {
		case x86asm.RET, x86asm.INT, x86asm.UD2:
			return in, true, nil
		case x86asm.JMP:
			// A jump out of the code is the return thunk
			// (jmp __x86_return_thunk) or a tail call: the task
			// leaves for good.
			if rel, ok := x.Args[0].(x86asm.Rel); ok {
				to := off + x.Len + int(rel)
				return in, to < 0 || to >= len(code), nil
			}
			return in, true, nil
		}
		return in, false, nil
	case "arm64":
		if len(b) < 4 {
			return Insn{}, false, errors.New("truncated")
		}
		x, err := arm64asm.Decode(b)
		if err != nil {
			return Insn{}, false, err
		}
		// ret, or br: a jump through a register with no link. Not
		// when the instruction before linked to the one after it
		// (adr x30, .+8): that is a call which keeps the
		// return-address predictor's stack, as a BPF trampoline calls
		// the traced function (ret x10), and the task comes back.
		end := x.Op == arm64asm.RET || x.Op == arm64asm.BR
		if end && off >= 4 && linksPastNext(code[off-4:off]) {
			end = false
		}
		return Insn{Off: off, Len: 4, Text: arm64asm.GNUSyntax(x)}, end, nil
	case "riscv64":
		x, err := riscv64asm.Decode(b)
		if err != nil {
			return Insn{}, false, err
		}
		in := Insn{Off: off, Len: x.Len, Text: riscv64asm.GNUSyntax(x)}
		// jalr zero, …: a return or a jump through a register with no
		// link (the trampoline's way back into the function).
		end := (x.Op == riscv64asm.JALR || x.Op == riscv64asm.C_JR) && linkless(x)
		return in, end, nil
	case "ppc64le":
		x, err := ppc64asm.Decode(b, binary.LittleEndian)
		if err != nil {
			return Insn{}, false, err
		}
		// blr or bctr: a branch to LR or CTR with no link (bclrl and
		// bcctrl are calls) whose BO says "always" (beqlr is not an end).
		end := (x.Op == ppc64asm.BCLR || x.Op == ppc64asm.BCCTR) && branchAlways(x)
		return Insn{Off: off, Len: x.Len, Text: ppc64asm.GNUSyntax(x, addr+uint64(off))}, end, nil
	}
	return Insn{}, false, fmt.Errorf("%s: %w", goarch, ErrUnknownArch)
}

// linksPastNext reports whether the arm64 instruction b is adr x30, .+8:
// the link register set to the instruction after the next one.
func linksPastNext(b []byte) bool {
	x, err := arm64asm.Decode(b)
	if err != nil || x.Op != arm64asm.ADR {
		return false
	}
	rel, ok := x.Args[1].(arm64asm.PCRel)
	return ok && x.Args[0] == arm64asm.X30 && rel == 8
}

// branchAlways reports whether a powerpc conditional branch's BO field
// (its first operand) ignores the condition and the counter: 1z1zz.
func branchAlways(x ppc64asm.Inst) bool {
	bo, ok := x.Args[0].(ppc64asm.Imm)
	return ok && bo&0x14 == 0x14
}

// linkless reports whether a riscv64 jalr writes no link register.
func linkless(x riscv64asm.Inst) bool {
	if x.Op == riscv64asm.C_JR {
		return true
	}
	r, ok := x.Args[0].(riscv64asm.Reg)
	return ok && r == riscv64asm.X0
}

// Steps decodes code, a whole function from its symbol to the next, and
// returns the instructions that follow a call or a locked instruction:
// the places where the function has finished a step another CPU can see
// (a text_poke, an IPI sync, a reference dropped), in address order. The
// INT3 window holds the patcher at each. x86 only: the other arches
// patch no INT3.
func Steps(goarch string, addr uint64, code []byte) ([]Insn, error) {
	if goarch != "amd64" {
		return nil, fmt.Errorf("steps of %s: %w", goarch, ErrUnknownArch)
	}
	var out []Insn
	after := false
	for off := 0; off < len(code); {
		in, _, err := decode(goarch, addr, code, off)
		if err != nil {
			return out, fmt.Errorf("disasm %s at %#x (+%#x, % x): %w", goarch, addr+uint64(off), off, head(code[off:]), err)
		}
		if after {
			out = append(out, in)
		}
		after = false
		if in.Text != "endbr64" {
			x, _ := x86asm.Decode(code[off:], 64)
			after = x.Op == x86asm.CALL || locked(x)
		}
		off += in.Len
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("disasm %s at %#x: no call or locked instruction in %d bytes", goarch, addr, len(code))
	}
	return out, nil
}

// locked reports an instruction with the lock prefix.
func locked(x x86asm.Inst) bool {
	for _, p := range x.Prefix {
		if p == 0 {
			break
		}
		if p&0xff == x86asm.PrefixLOCK {
			return true
		}
	}
	return false
}

// OpsCall decodes code, ftrace_caller from its symbol, and returns the
// instructions during which a task holds a CALL_OPS callsite's ftrace_ops
// pointer: from the first load (the ops literal) to the first call through
// a register (to op->func), both included. arm64, riscv64 and ppc64le
// (whose literal is in the callsite's out-of-line stub, read through the
// return address).
func OpsCall(goarch string, addr uint64, code []byte) ([]Insn, error) {
	if goarch != "arm64" && goarch != "riscv64" && goarch != "ppc64le" {
		return nil, fmt.Errorf("ops call of %s: %w", goarch, ErrUnknownArch)
	}
	var out []Insn
	for off := 0; off < len(code); {
		in, _, err := decode(goarch, addr, code, off)
		if err != nil {
			return out, fmt.Errorf("disasm %s at %#x (+%#x, % x): %w", goarch, addr+uint64(off), off, head(code[off:]), err)
		}
		load, call := opsCallKind(goarch, code[off:])
		if len(out) > 0 || load {
			out = append(out, in)
		}
		if len(out) > 0 && call {
			return out, nil
		}
		off += in.Len
	}
	return nil, fmt.Errorf("disasm %s at %#x: no load followed by a call through a register in %d bytes", goarch, addr, len(code))
}

// opsCallKind says whether the instruction b starts with is a load from
// memory, or a call through a register that links.
func opsCallKind(goarch string, b []byte) (load, call bool) {
	switch goarch {
	case "arm64":
		x, err := arm64asm.Decode(b)
		if err != nil {
			return false, false
		}
		return x.Op == arm64asm.LDR || x.Op == arm64asm.LDUR, x.Op == arm64asm.BLR
	case "riscv64":
		x, err := riscv64asm.Decode(b)
		if err != nil {
			return false, false
		}
		load = x.Op == riscv64asm.LD || x.Op == riscv64asm.C_LD
		call = (x.Op == riscv64asm.JALR || x.Op == riscv64asm.C_JALR) && !linkless(x)
		return load, call
	case "ppc64le":
		x, err := ppc64asm.Decode(b, binary.LittleEndian)
		if err != nil {
			return false, false
		}
		return x.Op == ppc64asm.LD, x.Op == ppc64asm.BCCTRL
	}
	return false, false
}

// x86GDBRegs numbers x86_64's general registers as GDB's remote protocol
// does (its amd64 target description): what a conditional breakpoint on a
// register names.
var x86GDBRegs = map[x86asm.Reg]int{
	x86asm.RAX: 0, x86asm.RBX: 1, x86asm.RCX: 2, x86asm.RDX: 3,
	x86asm.RSI: 4, x86asm.RDI: 5, x86asm.RBP: 6, x86asm.RSP: 7,
	x86asm.R8: 8, x86asm.R9: 9, x86asm.R10: 10, x86asm.R11: 11,
	x86asm.R12: 12, x86asm.R13: 13, x86asm.R14: 14, x86asm.R15: 15,
}

// FieldCompare is a compare of a register with the memory at a field's
// offset from a base register (FieldCompares).
type FieldCompare struct {
	Insn
	// Reg is the base register's GDB number.
	Reg int
}

// FieldCompares finds the compares in code of a register with the memory
// at disp from a base register, in order: a hash lookup's "is this
// entry's ip the one I want", where the base register holds the entry (a
// loop the compiler unrolled once has two: the bucket's head, the rest).
// x86_64 only: the arch whose call path looks direct calls up in a hash
// (7.3's HAVE_SINGLE_FTRACE_DIRECT_OPS).
func FieldCompares(goarch string, addr uint64, code []byte, disp int64) ([]FieldCompare, error) {
	if goarch != "amd64" {
		return nil, fmt.Errorf("field compare of %s: %w", goarch, ErrUnknownArch)
	}
	var out []FieldCompare
	for off := 0; off < len(code); {
		x, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			if len(out) > 0 {
				// Past the function's end, the fill may not decode.
				return out, nil
			}
			return nil, fmt.Errorf("disasm %s at %#x (+%#x, % x): %w", goarch, addr+uint64(off), off, head(code[off:]), err)
		}
		// A register against the field: a compare with an immediate
		// is a count's test (the hash's own count is at 0x10 too).
		if x.Op == x86asm.CMP {
			_, reg0 := x.Args[0].(x86asm.Reg)
			_, reg1 := x.Args[1].(x86asm.Reg)
			for _, a := range x.Args[:2] {
				m, ok := a.(x86asm.Mem)
				if !ok || m.Disp != disp || m.Index != 0 || !(reg0 || reg1) {
					continue
				}
				if n, ok := x86GDBRegs[m.Base]; ok {
					out = append(out, FieldCompare{Insn{Off: off, Len: x.Len, Text: x86asm.GNUSyntax(x, addr+uint64(off), nil)}, n})
				}
			}
		}
		off += x.Len
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("disasm %s at %#x: no compare with the memory at %#x from a register in %d bytes", goarch, addr, disp, len(code))
	}
	return out, nil
}
