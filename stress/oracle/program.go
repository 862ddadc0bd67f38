// Package oracle holds the churn scenario's correctness checks that run
// inside the kernel: a tracing program that compares bpf_get_func_ip with
// the address it was attached to and counts its hits, the map it counts in,
// the calibration of the address offset, and the exact-count window.
package oracle

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Kind is the attach type of a func-ip program.
type Kind int

// Attach kinds.
const (
	FEntry Kind = iota
	FExit
)

// String names the kind as transition names use it.
func (k Kind) String() string {
	if k == FExit {
		return "fexit"
	}
	return "fentry"
}

// AttachType is the kind as the loader wants it.
func (k Kind) AttachType() ebpf.AttachType {
	if k == FExit {
		return ebpf.AttachTraceFExit
	}
	return ebpf.AttachTraceFEntry
}

// LinkType is the kind as BPF_LINK_CREATE wants it: it must equal the
// program's expected attach type.
func (k Kind) LinkType() uint32 {
	if k == FExit {
		return unix.BPF_TRACE_FEXIT
	}
	return unix.BPF_TRACE_FENTRY
}

// Layout of one slot of the counters map: four native-endian u64.
const (
	OffHits    = 0  // every run of a program using the slot
	OffBad     = 8  // runs where bpf_get_func_ip != expected
	OffLastBad = 16 // the last address that did not match
	OffLastIP  = 24 // the last address seen, matching or not (calibration)
	ValueSize  = 32
)

// FuncIP describes one func-ip program.
type FuncIP struct {
	// MapFD is the counters map (see Map).
	MapFD int
	// Slot is the map index the program counts in.
	Slot uint32
	// Expected is the address bpf_get_func_ip must return: the kallsyms
	// address of the target plus the calibrated delta.
	Expected uint64
	// Check enables the comparison. Without it the program only counts
	// hits and records the last address: that is how calibration measures
	// the delta, and what runs when kallsyms hides addresses.
	Check bool
}

// Instructions returns the program. The expected address is baked in as a
// 64-bit immediate rather than read from a map, so that nothing user space
// does while the program runs can change what it compares against. Counters
// use atomic adds because several programs (an fentry and an fexit on the
// same function, or the same program on two CPUs) share a slot.
func (p FuncIP) Instructions() asm.Instructions {
	insns := asm.Instructions{
		// R1 holds the tracing context, bpf_get_func_ip's argument.
		asm.FnGetFuncIp.Call(),
		asm.Mov.Reg(asm.R6, asm.R0),
		asm.StoreImm(asm.R10, -4, int64(p.Slot), asm.Word),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, -4),
		asm.LoadMapPtr(asm.R1, p.MapFD),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, OffHits),
		asm.StoreMem(asm.R0, OffLastIP, asm.R6, asm.DWord),
	}
	if p.Check {
		insns = append(insns,
			asm.LoadImm(asm.R2, int64(p.Expected), asm.DWord),
			asm.JEq.Reg(asm.R6, asm.R2, "out"),
			asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, OffBad),
			asm.StoreMem(asm.R0, OffLastBad, asm.R6, asm.DWord),
		)
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// ProgName is the name every func-ip program is loaded with, so that
// bpftool output and kernel stacks show which programs are the harness's.
const ProgName = "fth_funcip"

// Spec returns the spec of p attached as kind to fn.
func (p FuncIP) Spec(fn string, kind Kind) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:       ProgName,
		Type:       ebpf.Tracing,
		AttachType: kind.AttachType(),
		AttachTo:   fn,
		// bpf_get_func_ip is GPL-only.
		License:      "GPL",
		Instructions: p.Instructions(),
	}
}

// String describes p for logs.
func (p FuncIP) String() string {
	return fmt.Sprintf("func-ip slot %d expected %#x check %v", p.Slot, p.Expected, p.Check)
}
