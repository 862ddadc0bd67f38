package bench

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// progName is the name of every program the bench loads, so that bpftool
// output and kernel stacks show which programs are the bench's.
const progName = "fth_bench"

// nopInsns return 0 and do nothing else: what is measured is the cost of
// getting to a program, not of the program.
func nopInsns() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	}
}

// tracingSpec is a do-nothing tracing program of attach type at (fentry,
// fexit, or a multi type with no target) on fn.
func tracingSpec(fn string, at ebpf.AttachType) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:         progName,
		Type:         ebpf.Tracing,
		AttachType:   at,
		AttachTo:     fn,
		License:      "GPL",
		Instructions: nopInsns(),
	}
}

// kprobeSpec is a do-nothing kprobe program of attach type at (AttachNone
// for a perf-event kprobe, AttachTraceKprobeMulti for kprobe_multi).
func kprobeSpec(at ebpf.AttachType) *ebpf.ProgramSpec {
	return &ebpf.ProgramSpec{
		Name:         progName,
		Type:         ebpf.Kprobe,
		AttachType:   at,
		License:      "GPL",
		Instructions: nopInsns(),
	}
}

// load loads spec with the shared BTF cache. It goes through a collection
// because CollectionOptions is where cilium/ebpf takes the cache that spares
// each load a parse of vmlinux BTF.
func load(cache *btf.Cache, spec *ebpf.ProgramSpec) (*ebpf.Program, error) {
	coll, err := ebpf.NewCollectionWithOptions(
		&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"p": spec}},
		ebpf.CollectionOptions{Cache: cache},
	)
	if err != nil {
		return nil, fmt.Errorf("load %v program %s: %w", spec.AttachType, spec.AttachTo, err)
	}
	defer coll.Close()
	return coll.DetachProgram("p"), nil
}
