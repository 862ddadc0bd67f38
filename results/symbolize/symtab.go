package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// symbol is one code symbol of the ELF symbol table.
type symbol struct {
	name string
	addr uint64
	// size is the ELF st_size; gap runs to the next symbol at a higher
	// address, which is the size kallsyms prints after the slash
	// ("up_read+0x1/0xc0" for a 0xb1-byte function padded to 16 bytes).
	size, gap uint64
	// fn is true for STT_FUNC, false for assembler labels (STT_NOTYPE).
	fn bool
}

// symtab indexes code symbols by address and by name.
type symtab struct {
	// byAddr is sorted by address; at equal addresses labels come before
	// functions, so that the last match of a search is the function.
	byAddr []symbol
	byName map[string][]int
}

func readSymtab(f *elf.File) (*symtab, error) {
	raw, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("read symbol table: %w", err)
	}
	t := &symtab{byName: map[string][]int{}}
	for _, sym := range raw {
		typ := elf.ST_TYPE(sym.Info)
		if typ != elf.STT_FUNC && typ != elf.STT_NOTYPE {
			continue
		}
		if sym.Section == elf.SHN_UNDEF || int(sym.Section) >= len(f.Sections) {
			continue
		}
		if f.Sections[sym.Section].Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		// Mapping symbols ($x, $d on arm) and local labels are not functions.
		if sym.Name == "" || strings.HasPrefix(sym.Name, "$") || strings.HasPrefix(sym.Name, ".L") {
			continue
		}
		t.byAddr = append(t.byAddr, symbol{name: sym.Name, addr: sym.Value, size: sym.Size, fn: typ == elf.STT_FUNC})
	}
	sort.SliceStable(t.byAddr, func(i, j int) bool {
		a, b := t.byAddr[i], t.byAddr[j]
		if a.addr != b.addr {
			return a.addr < b.addr
		}
		return !a.fn && b.fn
	})
	for i := range t.byAddr {
		next := i + 1
		for next < len(t.byAddr) && t.byAddr[next].addr == t.byAddr[i].addr {
			next++
		}
		if next < len(t.byAddr) {
			t.byAddr[i].gap = t.byAddr[next].addr - t.byAddr[i].addr
		} else {
			t.byAddr[i].gap = t.byAddr[i].size
		}
		t.byName[t.byAddr[i].name] = append(t.byName[t.byAddr[i].name], i)
	}
	return t, nil
}

// at returns the symbol containing pc, the way kallsyms would name it: the
// nearest symbol at or below pc.
func (t *symtab) at(pc uint64) (symbol, bool) {
	i := sort.Search(len(t.byAddr), func(i int) bool { return t.byAddr[i].addr > pc }) - 1
	if i < 0 {
		return symbol{}, false
	}
	s := t.byAddr[i]
	if end := s.addr + max(s.size, s.gap); pc >= end && end > s.addr {
		return symbol{}, false
	}
	return s, true
}

// lookup finds name, preferring the candidate whose size matches the one
// the console printed: static functions share names across files.
// ambiguous reports that several candidates fit equally well.
func (t *symtab) lookup(name string, off, size uint64) (sym symbol, ambiguous bool, ok bool) {
	idx := t.byName[name]
	if len(idx) == 0 {
		return symbol{}, false, false
	}
	var fits []symbol
	for _, i := range idx {
		s := t.byAddr[i]
		if size != 0 && s.printedSize(size) {
			fits = append(fits, s)
		}
	}
	if len(fits) == 0 {
		for _, i := range idx {
			if s := t.byAddr[i]; off < max(s.size, s.gap) {
				fits = append(fits, s)
			}
		}
	}
	if len(fits) == 0 {
		fits = []symbol{t.byAddr[idx[0]]}
	}
	return fits[0], len(fits) > 1, true
}

// printedSize reports whether kallsyms could print size after the slash
// for s: the distance to the next symbol, or the ELF size.
func (s symbol) printedSize(size uint64) bool { return s.size == size || s.gap == size }

// kallsymsSize is the size kallsyms prints for s: the distance to the next
// symbol.
func (s symbol) kallsymsSize() uint64 {
	if s.gap != 0 {
		return s.gap
	}
	return s.size
}

// cloneSuffix is a compiler clone suffix (".cold", ".isra.0",
// ".constprop.0", ".part.3", clang LTO's ".llvm.123"), as results/console
// cuts it from function names.
var cloneSuffix = regexp.MustCompile(`(?:\.(?:cold|isra|constprop|part|llvm|lto_priv|\d+))+$`)

// candidates returns, for each name, the symbols a log's frame of that
// name can be: those of the name, else those whose name is it plus a clone
// suffix (kallsyms of a clang LTO kernel prints "foo" for "foo.llvm.123").
// Names the vmlinux has neither way are absent. The second kind costs one
// pass over the table, and only for names the first misses.
func (t *symtab) candidates(names []string) map[string][]symbol {
	out := map[string][]symbol{}
	missing := map[string]bool{}
	for _, name := range names {
		if _, done := out[name]; done || missing[name] {
			continue
		}
		for _, i := range t.byName[name] {
			out[name] = append(out[name], t.byAddr[i])
		}
		if len(out[name]) == 0 {
			missing[name] = true
		}
	}
	if len(missing) == 0 {
		return out
	}
	for _, s := range t.byAddr {
		if !strings.Contains(s.name, ".") {
			continue
		}
		if base := cloneSuffix.ReplaceAllString(s.name, ""); base != s.name && missing[base] {
			out[base] = append(out[base], s)
		}
	}
	return out
}
