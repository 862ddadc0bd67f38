package profile

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/stress/ksyms"
)

// Symbols names kernel addresses from a copy of kallsyms.
type Symbols struct {
	addrs []uint64
	names []string
}

// ReadSymbols reads /proc/kallsyms (or path). Read it after the profiled
// work and before BPF images it ran through go away, if they matter.
func ReadSymbols(path string) (*Symbols, error) {
	if path == "" {
		path = "/proc/kallsyms"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	defer f.Close()
	type sym struct {
		addr uint64
		name string
	}
	var all []sym
	if err := ksyms.Each(f, func(s ksyms.Sym) {
		if s.Addr != 0 && !marker(s.Name) {
			all = append(all, sym{s.Addr, baseName(s.Name)})
		}
	}); err != nil {
		return nil, fmt.Errorf("profile: %s: %w", path, err)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("profile: %s: %w", path, ksyms.ErrHidden)
	}
	slices.SortStableFunc(all, func(a, b sym) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	s := &Symbols{addrs: make([]uint64, len(all)), names: make([]string, len(all))}
	for i, x := range all {
		s.addrs[i], s.names[i] = x.addr, x.name
	}
	return s, nil
}

// NewSymbols builds a table from parallel slices sorted by address, for
// tests, as ReadSymbols would from kallsyms lines in that order.
func NewSymbols(addrs []uint64, names []string) *Symbols {
	s := &Symbols{}
	for i, n := range names {
		if !marker(n) {
			s.addrs, s.names = append(s.addrs, addrs[i]), append(s.names, baseName(n))
		}
	}
	return s
}

// Name names the function that holds addr: the nearest symbol at or below
// it (the first of several at one address, as the kernel's own lookup
// picks), or its hex value when none is.
func (s *Symbols) Name(addr uint64) string {
	i, found := slices.BinarySearch(s.addrs, addr)
	if !found {
		i--
	}
	if i < 0 {
		return "0x" + strconv.FormatUint(addr, 16)
	}
	for i > 0 && s.addrs[i-1] == s.addrs[i] {
		i--
	}
	return s.names[i]
}

// marker says whether a kallsyms name is a linker section marker
// (__sched_text_start, __irqentry_text_end, ...), which shares its address
// with the section's first function or follows its last.
func marker(name string) bool {
	return strings.HasPrefix(name, "__") && (strings.HasSuffix(name, "_start") || strings.HasSuffix(name, "_end")) &&
		strings.Contains(name, "text")
}

// baseName drops the suffix of a compiler's copy of a function
// (do_jit.constprop.0, foo.isra.0, bar.part.1, baz.cold): a rule names the
// function, and each copy is its code.
func baseName(name string) string {
	if i := strings.IndexByte(name, '.'); i > 0 {
		return name[:i]
	}
	return name
}

// Names names a stack's frames. Every frame but the innermost is a return
// address, which may lie just past a call that ends its function: it is
// looked up one byte back.
func (s *Symbols) Names(st Stack) []string {
	out := make([]string, len(st))
	for i, a := range st {
		if i > 0 {
			a--
		}
		out[i] = s.Name(a)
	}
	return out
}
