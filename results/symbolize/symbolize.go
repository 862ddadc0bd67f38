// Package symbolize turns the frames of a kernel report into source
// locations, inlined frames included: the job of the kernel's
// scripts/decode_stacktrace.sh, done with debug/elf and debug/dwarf alone so
// that triage needs no binutils for the target architecture.
//
// A Symbolizer opens a vmlinux once and indexes it lazily: the ELF symbol
// table when it opens (tens of milliseconds for a 120 MB vmlinux), the DWARF
// sections and the address ranges of every compilation unit on the first
// lookup (about 0.4 s), and each compilation unit's line table and scope tree
// only when an address in it is first asked for. A 30-frame stack touches a
// few dozen units at most, so a cold Symbolizer answers it in about a second
// and a warm one in milliseconds (see BenchmarkReport).
//
// A Symbolizer is safe for concurrent use. Close releases the file.
package symbolize

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Errors wrapped by Symbolizer methods, for errors.Is.
var (
	// ErrNoDebugInfo means the vmlinux has no DWARF: frames still get their
	// function from the symbol table, but no file:line.
	ErrNoDebugInfo = errors.New("vmlinux has no DWARF debug info (build with CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT=y or CONFIG_DEBUG_INFO_DWARF5=y)")
	// ErrUnknownSymbol means a frame names a function the vmlinux does not
	// have: a module's, or a different kernel build's.
	ErrUnknownSymbol = errors.New("symbol not in this vmlinux")
	// ErrNotInText means an address lies outside the vmlinux's code: user
	// space, a module, BPF JIT code or a trampoline, or a KASLR-shifted
	// address with nothing in the report to tell the shift.
	ErrNotInText = errors.New("address not in the vmlinux's code")
)

// Options tunes a Symbolizer. The zero value is ready to use.
type Options struct {
	// SourceRoots are directory prefixes cut from file names so that
	// locations read "kernel/sys.c:1360". The kernel source root (found from
	// the unit compiled from init/main.c) and each unit's build directory are
	// always cut; these are tried first.
	SourceRoots []string
}

// Symbolizer answers address and symbol lookups against one vmlinux.
type Symbolizer struct {
	path string
	opts Options
	file *elf.File
	// text holds the [start, end) of every executable section: anything
	// outside is not the vmlinux's code.
	text [][2]uint64
	syms *symtab

	mu        sync.Mutex
	dwarfDone bool
	dwarfErr  error
	dw        *dwarf.Data
	units     *unitIndex
	loaded    map[dwarf.Offset]*unit
	names     map[dwarf.Offset]string
	roots     []string
}

// Open opens the vmlinux at path and reads its symbol table. DWARF is read
// on the first lookup that needs it.
func Open(path string, opts Options) (*Symbolizer, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open vmlinux %s: %w (pass the vmlinux of the kernel that printed the log; fth build prints its path)", path, err)
	}
	s := &Symbolizer{path: path, opts: opts, file: f, loaded: map[dwarf.Offset]*unit{}, names: map[dwarf.Offset]string{}}
	for _, sec := range f.Sections {
		if sec.Flags&elf.SHF_EXECINSTR != 0 && sec.Flags&elf.SHF_ALLOC != 0 && sec.Size > 0 {
			s.text = append(s.text, [2]uint64{sec.Addr, sec.Addr + sec.Size})
		}
	}
	s.syms, err = readSymtab(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("vmlinux %s: %w", path, err)
	}
	return s, nil
}

// Close releases the vmlinux.
func (s *Symbolizer) Close() error { return s.file.Close() }

// Path is the vmlinux the Symbolizer reads.
func (s *Symbolizer) Path() string { return s.path }

func (s *Symbolizer) inText(pc uint64) bool {
	for _, r := range s.text {
		if r[0] <= pc && pc < r[1] {
			return true
		}
	}
	return false
}

// loadDWARF reads the debug sections and indexes unit ranges, once. It must
// be called with s.mu held.
func (s *Symbolizer) loadDWARF() error {
	if s.dwarfDone {
		return s.dwarfErr
	}
	s.dwarfDone = true
	if s.file.Section(".debug_info") == nil {
		s.dwarfErr = fmt.Errorf("%s: %w", s.path, ErrNoDebugInfo)
		return s.dwarfErr
	}
	d, err := readDWARF(s.file)
	if err != nil {
		s.dwarfErr = fmt.Errorf("%s: read DWARF: %w", s.path, err)
		return s.dwarfErr
	}
	s.dw = d
	s.units, err = indexUnits(d)
	if err != nil {
		s.dwarfErr = fmt.Errorf("%s: index compilation units: %w", s.path, err)
		return s.dwarfErr
	}
	s.roots = append(s.roots, s.opts.SourceRoots...)
	if s.units.sourceRoot != "" {
		s.roots = append(s.roots, s.units.sourceRoot)
	}
	return nil
}

// relPath cuts the longest known root from a file name.
func (s *Symbolizer) relPath(name, compDir string) string {
	best := ""
	for _, r := range append(s.roots, compDir) {
		// "/" is no root: a unit compiled there (some clang .S units) would
		// otherwise turn every absolute path into a rootless one.
		if r == "" || r == "/" {
			continue
		}
		r = strings.TrimSuffix(r, "/") + "/"
		if strings.HasPrefix(name, r) && len(r) > len(best) {
			best = r
		}
	}
	out := strings.TrimPrefix(name, best)
	// clang's .S units name their files relative to "/" in the line table,
	// and Go's line reader joins that with DW_AT_comp_dir — with ccache's
	// NOHASHDIR, another cache entry's build dir:
	// "<other build>/var/cache/.../arch/riscv/lib/memcpy.S". What is left
	// after cutting the comp dir is then an absolute path without its "/".
	if best != "" && !strings.HasPrefix(out, "/") {
		for _, r := range s.roots {
			if r == "" || r == "/" {
				continue
			}
			if r = strings.TrimSuffix(r, "/") + "/"; strings.HasPrefix("/"+out, r) {
				return strings.TrimPrefix("/"+out, r)
			}
		}
	}
	return out
}

// readDWARF reads only the sections symbolization needs (not locations, not
// call frame info), each with one exact-size read: elf.File.DWARF reads every
// debug section through a growing buffer, which for a 120 MB vmlinux doubles
// both the time and the garbage. Relocatable files (modules) still go
// through elf.File.DWARF, which applies their relocations.
func readDWARF(f *elf.File) (*dwarf.Data, error) {
	if f.Type == elf.ET_REL {
		return f.DWARF()
	}
	read := func(name string) ([]byte, error) {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS {
			return nil, nil
		}
		if sec.Flags&elf.SHF_COMPRESSED != 0 {
			// Data decompresses; the size is only known afterwards.
			return sec.Data()
		}
		b := make([]byte, sec.Size)
		if _, err := sec.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		return b, nil
	}
	var core [5][]byte
	for i, name := range []string{".debug_abbrev", ".debug_info", ".debug_line", ".debug_ranges", ".debug_str"} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		core[i] = b
	}
	d, err := dwarf.New(core[0], nil, nil, core[1], core[2], nil, core[3], core[4])
	if err != nil {
		return nil, err
	}
	// DWARF 5 keeps addresses, line-table strings, string offsets and
	// range lists in sections of their own.
	for _, name := range []string{".debug_addr", ".debug_line_str", ".debug_str_offsets", ".debug_rnglists"} {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		if b != nil {
			if err := d.AddSection(name, b); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return d, nil
}
