package kbuild

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// ErrUnusableBTF is wrapped when a kernel's own BTF breaks a rule the
// kernel checks when it loads it at boot. That kernel then has no
// /sys/kernel/btf/vmlinux, and every BPF program the agent loads fails
// with EINVAL: a cell would boot only to attach nothing. Caught on the
// host, before a boot, with the reason.
var ErrUnusableBTF = errors.New("the kernel will refuse its own BTF at boot")

// CheckBTF reads the BTF of vmlinux and applies the rules the kernel's
// btf_datasec_check_meta() applies to each data section's variables: in
// order, not overlapping, inside the section. Those are the rules a real
// toolchain has broken: clang 20 and later merge globals, so two per-CPU
// variables can share an address, and pahole 1.30 encodes both (riscv64
// with clang 21 puts kprobe_ctlblk on current_kprobe; the kernel prints
// "BPF: Invalid offset"). A vmlinux without BTF is not checked.
func CheckBTF(vmlinux string) error {
	spec, err := btf.LoadSpec(vmlinux)
	if errors.Is(err, btf.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the BTF of %s: %w", vmlinux, err)
	}
	for typ, err := range spec.All() {
		if err != nil {
			return fmt.Errorf("read the BTF of %s: %w", vmlinux, err)
		}
		if ds, ok := typ.(*btf.Datasec); ok {
			if err := checkDatasec(ds); err != nil {
				return fmt.Errorf("%w: %v", ErrUnusableBTF, err)
			}
		}
	}
	return nil
}

// checkDatasec is btf_datasec_check_meta()'s loop over the variables,
// worded for a person: which variable, which neighbour.
func checkDatasec(ds *btf.Datasec) error {
	var end uint32
	prev := ""
	for _, v := range ds.Vars {
		name := v.Type.TypeName()
		switch {
		case v.Offset < end:
			return fmt.Errorf("section %s: %s at offset %d overlaps %s, which ends at %d (the kernel's \"Invalid offset\")", ds.Name, name, v.Offset, prev, end)
		case v.Offset >= ds.Size:
			return fmt.Errorf("section %s: %s at offset %d is past the section's %d bytes (the kernel's \"Invalid offset\")", ds.Name, name, v.Offset, ds.Size)
		case v.Size == 0 || v.Size > ds.Size:
			return fmt.Errorf("section %s: %s has size %d in a section of %d bytes (the kernel's \"Invalid size\")", ds.Name, name, v.Size, ds.Size)
		case v.Offset+v.Size > ds.Size:
			return fmt.Errorf("section %s: %s at offset %d, size %d, ends past the section's %d bytes (the kernel's \"Invalid offset+size\")", ds.Name, name, v.Offset, v.Size, ds.Size)
		}
		end, prev = v.Offset+v.Size, name
	}
	return nil
}
