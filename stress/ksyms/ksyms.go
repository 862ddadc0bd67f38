// Package ksyms reads kernel symbol addresses from /proc/kallsyms, for the
// oracles that compare what the kernel reports with where a function is.
package ksyms

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// DefaultPath is the kernel's symbol table.
const DefaultPath = "/proc/kallsyms"

// ErrHidden means kallsyms prints zero addresses: the reader lacks
// CAP_SYSLOG or kptr_restrict hides them. An address oracle cannot run then.
var ErrHidden = errors.New("ksyms: /proc/kallsyms shows zero addresses (needs CAP_SYSLOG and kptr_restrict < 2)")

// Table maps built-in symbol names to addresses. A name the kernel has more
// than once maps to 0, because no single address is the right one.
type Table map[string]uint64

// bpfModule is the module name kallsyms gives BPF programs and trampoline
// images.
const bpfModule = "bpf"

// Sym is one line of kallsyms: "addr type name [module]".
type Sym struct {
	Addr uint64
	Name string
	// Module is the module's name without its brackets ("bpf" for BPF
	// programs and trampoline images), or "" for vmlinux.
	Module string
}

// Each calls fn for every line of kallsyms text that has a hexadecimal
// address, a type, a name and at most a bracketed module; other lines are
// skipped. Its error is the reader's.
func Each(r io.Reader, fn func(Sym)) error { return each(r, fn, false) }

// EachBeforeBPF is Each up to the first BPF image ("[bpf]"), for readers
// of vmlinux's and modules' symbols, which kallsyms lists first. The
// kernel finds the i-th BPF symbol by walking its list from the start
// (bpf_get_kallsym), so reading them all costs the square of their
// number: with 40,000 trampolines and their programs one whole read took
// over 90 s under TCG.
func EachBeforeBPF(r io.Reader, fn func(Sym)) error { return each(r, fn, true) }

func each(r io.Reader, fn func(Sym), stopAtBPF bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var mod string
		switch len(f) {
		case 3:
		case 4:
			// A module is never nameless: "[]" would pass for vmlinux.
			m := f[3]
			if len(m) < 3 || m[0] != '[' || m[len(m)-1] != ']' {
				continue
			}
			mod = m[1 : len(m)-1]
		default:
			continue
		}
		addr, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			continue
		}
		if stopAtBPF && mod == bpfModule {
			return nil
		}
		fn(Sym{Addr: addr, Name: f[2], Module: mod})
	}
	return sc.Err()
}

// Parse reads kallsyms text and keeps the built-in symbols among want (all
// of them if want is nil). Module symbols are skipped: the agent traces
// vmlinux only.
func Parse(r io.Reader, want map[string]bool) (Table, error) {
	t := Table{}
	nonzero, seen := false, false
	err := EachBeforeBPF(r, func(s Sym) {
		if s.Module != "" {
			return
		}
		seen = true
		if s.Addr != 0 {
			nonzero = true
		}
		if want != nil && !want[s.Name] {
			return
		}
		t.add(s)
	})
	if err != nil {
		return nil, fmt.Errorf("ksyms.Parse: %w", err)
	}
	if seen && !nonzero {
		return nil, ErrHidden
	}
	return t, nil
}

// add records s, or 0 for a name seen twice.
func (t Table) add(s Sym) {
	if _, dup := t[s.Name]; dup {
		t[s.Name] = 0
		return
	}
	t[s.Name] = s.Addr
}

// Read parses the kallsyms file at path, keeping the names in want.
func Read(path string, want []string) (Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ksyms.Read: %w", err)
	}
	defer f.Close()
	w := make(map[string]bool, len(want))
	for _, n := range want {
		w[n] = true
	}
	return Parse(f, w)
}

// Addr returns the unique address of name. ok is false when the name is
// missing or ambiguous.
func (t Table) Addr(name string) (addr uint64, ok bool) {
	a := t[name]
	return a, a != 0
}

// moduleReads is how many times ReadModule reads kallsyms while a symbol
// it wants is missing.
const moduleReads = 4

// ReadModule parses the kallsyms file at path for the symbols of module
// among want. A module's addresses change on every load: read them after
// each one. The kernel lists kallsyms by position, counting each
// module's symbols as it goes: a read while another module loads or
// unloads can skip lines (the delivery oracle's fth_deliver_seq went
// missing that way on riscv64 while the module churn cycled fth_target),
// so a read that lacks a wanted symbol is made again, moduleReads in all.
func ReadModule(path, module string, want []string) (Table, error) {
	return readModule(func() (io.ReadCloser, error) { return os.Open(path) }, module, want)
}

func readModule(open func() (io.ReadCloser, error), module string, want []string) (Table, error) {
	var t Table
	for range moduleReads {
		f, err := open()
		if err != nil {
			return nil, fmt.Errorf("ksyms.ReadModule: %w", err)
		}
		t, err = ParseModule(f, module, want)
		f.Close()
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(want, func(n string) bool { _, ok := t[n]; return !ok }) {
			break
		}
	}
	return t, nil
}

// ParseModule reads kallsyms text and keeps the symbols of module among
// want (all of its symbols if want is nil).
func ParseModule(r io.Reader, module string, want []string) (Table, error) {
	keep := map[string]bool{}
	for _, w := range want {
		keep[w] = true
	}
	t := Table{}
	err := EachBeforeBPF(r, func(s Sym) {
		if s.Module == module && (want == nil || keep[s.Name]) {
			t.add(s)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("ksyms.ParseModule: %w", err)
	}
	return t, nil
}

// Nearest names each of addrs as "symbol+0xoff" (with " [module]" for a
// module's), the closest symbol at or below it in kallsyms text; an
// address below every symbol is left out. One pass over r, whole: a BPF
// image's address is named too.
func Nearest(r io.Reader, addrs []uint64) (map[uint64]string, error) {
	best := make(map[uint64]Sym, len(addrs))
	err := Each(r, func(s Sym) {
		if s.Addr == 0 {
			return
		}
		for _, a := range addrs {
			if b, ok := best[a]; s.Addr <= a && (!ok || s.Addr > b.Addr) {
				best[a] = s
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("ksyms.Nearest: %w", err)
	}
	out := make(map[uint64]string, len(best))
	for a, s := range best {
		name := fmt.Sprintf("%s+%#x", s.Name, a-s.Addr)
		if s.Module != "" {
			name += " [" + s.Module + "]"
		}
		out[a] = name
	}
	return out, nil
}
