// Package inventory finds the kernel functions the agent can put a BPF fentry
// trampoline on: traceable by ftrace, described by vmlinux BTF, unambiguous,
// not denied, and with a signature the verifier accepts.
package inventory

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/wire/event"
)

// Mount is a pseudo file system the agent needs.
type Mount struct {
	FSType string
	Target string
}

// DefaultMounts are debugfs (for sched/preempt and, on old kernels, tracing)
// and tracefs (for available_filter_functions). u-root's init mounts neither.
var DefaultMounts = []Mount{
	{FSType: "debugfs", Target: "/sys/kernel/debug"},
	{FSType: "tracefs", Target: "/sys/kernel/tracing"},
}

// MountFS mounts each of mounts that mountinfo (normally
// /proc/self/mountinfo) does not show already mounted. Checking first matters:
// mounting debugfs or tracefs again on the same directory stacks a second
// mount instead of failing. EBUSY is ignored for races with another mounter.
// All failures are returned joined; the caller decides whether they matter.
func MountFS(mountinfo string, mounts []Mount) error {
	have, err := mounted(mountinfo)
	if err != nil {
		// Without mountinfo, try anyway: a stacked mount is harmless.
		have = nil
	}
	var errs []error
	for _, m := range mounts {
		if have[m.Target] == m.FSType {
			continue
		}
		err := unix.Mount(m.FSType, m.Target, m.FSType, 0, "")
		if err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("inventory.MountFS: mount %s on %s: %w", m.FSType, m.Target, err))
		}
	}
	return errors.Join(errs...)
}

// mounted maps mount points to their file-system type.
func mounted(mountinfo string) (map[string]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		m[pf[4]] = qf[0]
	}
	return m, sc.Err()
}

// Paths are the kernel files the inventory reads.
type Paths struct {
	// Available lists candidate locations of available_filter_functions;
	// the first that exists is used.
	Available []string
	// Kallsyms is /proc/kallsyms; "" skips the kallsyms uniqueness check.
	Kallsyms string
}

// DefaultPaths are the standard locations.
var DefaultPaths = Paths{
	Available: []string{
		"/sys/kernel/tracing/available_filter_functions",
		"/sys/kernel/debug/tracing/available_filter_functions",
	},
	Kallsyms: "/proc/kallsyms",
}

// SpecSource is a FuncSource over a parsed BTF spec.
type SpecSource struct{ Spec *btf.Spec }

// Funcs implements FuncSource.
func (s SpecSource) Funcs(name string) ([]*btf.Func, error) {
	types, err := s.Spec.AnyTypesByName(name)
	if errors.Is(err, btf.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*btf.Func
	for _, t := range types {
		if fn, ok := t.(*btf.Func); ok {
			out = append(out, fn)
		}
	}
	return out, nil
}

// Take reads the traceable functions and the kallsyms names and applies the
// filter with spec as vmlinux BTF, and to the functions of the modules in
// mods with each one's BTF. A missing kallsyms only disables that check; a
// missing available_filter_functions is an error.
func Take(ctx context.Context, spec *btf.Spec, filter Filter, paths Paths, mods map[string]*btf.Spec) (Result, error) {
	avail, err := readAvailable(paths.Available)
	if err != nil {
		return Result{}, err
	}
	var kallsyms map[string]int
	if paths.Kallsyms != "" {
		if f, err := os.Open(paths.Kallsyms); err == nil {
			kallsyms, err = ParseKallsyms(f)
			f.Close()
			if err != nil {
				kallsyms = nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("inventory.Take: %w", err)
	}
	in := Input{Available: avail, BTF: SpecSource{spec}, Kallsyms: kallsyms, Filter: filter}
	for m, ms := range mods {
		if in.Modules == nil {
			in.Modules = map[string]FuncSource{}
		}
		in.Modules[m] = SpecSource{ms}
	}
	return Compute(in)
}

func readAvailable(paths []string) (Available, error) {
	var errs []error
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return Available{}, fmt.Errorf("inventory: %w", err)
		}
		a, err := ParseAvailable(f)
		f.Close()
		if err != nil {
			return Available{}, fmt.Errorf("inventory: %s: %w", p, err)
		}
		return a, nil
	}
	return Available{}, fmt.Errorf("inventory: no available_filter_functions (is tracefs mounted, CONFIG_FUNCTION_TRACER set?): %w", errors.Join(errs...))
}

// Event returns the wire form of r with selected functions chosen.
func (r Result) Event(selected int) *event.Inventory {
	return &event.Inventory{
		Traceable:  r.Traceable,
		WithBTF:    r.WithBTF,
		Candidates: len(r.Candidates),
		Selected:   selected,
	}
}
