package multi

import (
	"fmt"

	"github.com/cilium/ebpf/btf"
)

// OwnFirst returns funcs with vmlinux's functions first and those inMod
// says are a module's after them, each part in funcs' order: a
// population grown by prefixes reaches the module only once vmlinux's are
// all held.
func OwnFirst(funcs []string, inMod func(string) bool) []string {
	out := make([]string, 0, len(funcs))
	var theirs []string
	for _, fn := range funcs {
		if inMod(fn) {
			theirs = append(theirs, fn)
		} else {
			out = append(out, fn)
		}
	}
	return append(out, theirs...)
}

// Split groups funcs by the BTF object their program must be loaded
// against: vmlinux's functions, then those inMod says belong to module
// mod, each in funcs' order; a group with no function is left out. The
// returned release closes the module's BTF handle: call it once Hold has
// loaded the programs (the programs keep the module's BTF).
func Split(cache *btf.Cache, funcs []string, mod string, inMod func(string) bool) ([]Group, func(), error) {
	var own, theirs []string
	for _, fn := range funcs {
		if inMod != nil && inMod(fn) {
			theirs = append(theirs, fn)
		} else {
			own = append(own, fn)
		}
	}
	release := func() {}
	var groups []Group
	if len(own) > 0 {
		spec, err := cache.Kernel()
		if err != nil {
			return nil, release, fmt.Errorf("vmlinux BTF: %w", err)
		}
		groups = append(groups, Group{Name: "vmlinux", Spec: spec, Funcs: own})
	}
	if len(theirs) > 0 {
		spec, err := cache.Module(mod)
		if err != nil {
			return nil, release, fmt.Errorf("BTF of %s: %w", mod, err)
		}
		h, err := ModuleHandle(mod)
		if err != nil {
			return nil, release, err
		}
		release = func() { h.Close() }
		groups = append(groups, Group{Name: mod, Spec: spec, BTFFD: h.FD(), Funcs: theirs})
	}
	return groups, release, nil
}
