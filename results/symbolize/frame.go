package symbolize

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Addr is a code address. It marshals as a hex string, since JSON numbers
// cannot hold a 64-bit kernel address exactly.
type Addr uint64

// MarshalText implements encoding.TextMarshaler.
func (a Addr) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Addr) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(string(b), "0x"), 16, 64)
	if err != nil {
		return fmt.Errorf("address %q: want hex like 0xffffffff81000000: %w", b, err)
	}
	*a = Addr(v)
	return nil
}

// String formats a as 0x-prefixed hex.
func (a Addr) String() string { return fmt.Sprintf("%#x", uint64(a)) }

// Location is one level of a frame: a function and a source position in it.
type Location struct {
	// Function is the function's name, inlined or not.
	Function string `json:"function"`
	// File is relative to the kernel source root when the root is known.
	File string `json:"file,omitempty"`
	// Line is 0 when the address has no line-table row.
	Line int `json:"line,omitempty"`
	// Inline is true when Function was inlined into the next location.
	Inline bool `json:"inline,omitempty"`
}

// String formats l like syzkaller and decode_stacktrace.sh do.
func (l Location) String() string {
	s := l.Function
	if l.File != "" {
		s += " " + l.position()
	}
	if l.Inline {
		s += " [inline]"
	}
	return s
}

// position is file:line, with "?" for line 0 (code the compiler made up,
// attributed to no line), as addr2line prints it.
func (l Location) position() string {
	if l.Line == 0 {
		return l.File + ":?"
	}
	return l.File + ":" + strconv.Itoa(l.Line)
}

// Frame is a symbolized Ref.
type Frame struct {
	Ref
	// PC is the address the frame stands for.
	PC Addr `json:"pc,omitempty"`
	// Locations run from the innermost inlined function out to the function
	// the code belongs to, like `addr2line -i`. Empty when the frame could not
	// be placed.
	Locations []Location `json:"locations,omitempty"`
	// Ambiguous means several functions of that name fit the console's size;
	// the first was used.
	Ambiguous bool `json:"ambiguous,omitempty"`
	// Err says why the frame has no (or no complete) location.
	Err string `json:"error,omitempty"`
}

// Lines formats f as indented text: inlined functions first, marked
// "[inline]", then the frame as the console printed it, with its location.
func (f Frame) Lines() []string {
	head := f.Text
	if f.Func != "" {
		head = f.Func + "+" + fmt.Sprintf("%#x/%#x", f.Offset, f.Size)
		if f.Unreliable {
			head = "? " + head
		}
		if f.Module != "" {
			head += " [" + f.Module + "]"
		}
	}
	if len(f.Locations) == 0 {
		if f.Err != "" {
			return []string{head + " (" + f.Err + ")"}
		}
		return []string{head}
	}
	var out []string
	for _, l := range f.Locations[:len(f.Locations)-1] {
		out = append(out, l.String())
	}
	last := f.Locations[len(f.Locations)-1]
	s := head
	if f.Func == "" {
		s = last.Function
	}
	if last.File != "" {
		s += " " + last.position()
	}
	if f.Err != "" {
		s += " (" + f.Err + ")"
	}
	return append(out, s)
}

// Resolve symbolizes one reference. Failures are recorded in the frame's
// Err, never returned: one unknown frame must not hide the rest of a stack.
// slide is added to the vmlinux's addresses to get the running kernel's
// (KASLR); it applies to raw addresses only.
func (s *Symbolizer) Resolve(ref Ref, slide int64) Frame {
	f := Frame{Ref: ref}
	var pc uint64
	switch {
	case ref.Module != "":
		f.Err = fmt.Sprintf("in module %s: symbolize with the module's .ko", ref.Module)
		return f
	case ref.Func != "":
		sym, ambiguous, ok := s.syms.lookup(ref.Func, ref.Offset, ref.Size)
		if !ok {
			f.Err = fmt.Sprintf("%s: %v", ref.Func, ErrUnknownSymbol)
			return f
		}
		f.Ambiguous = ambiguous
		pc = sym.addr + ref.Offset
	case ref.HasAddr:
		pc = uint64(int64(ref.Addr) - slide)
		if sym, ok := s.syms.at(pc); ok {
			f.Func, f.Offset, f.Size = sym.name, pc-sym.addr, max(sym.size, sym.gap)
		}
	default:
		f.Err = "no symbol or address"
		return f
	}
	f.PC = Addr(pc)
	if !s.inText(pc) {
		f.Err = ErrNotInText.Error()
		return f
	}
	// A return address points after the call; the call itself, its line
	// and the functions inlined around it, sit one byte earlier.
	lookup := pc
	if ref.Return && f.Offset > 0 {
		lookup--
	}
	locs, err := s.Locate(lookup)
	f.Locations = locs
	if err != nil {
		f.Err = err.Error()
	}
	if len(f.Locations) == 0 && f.Func != "" {
		f.Locations = []Location{{Function: f.Func}}
	}
	return f
}

// Locate returns the source locations of pc, innermost inlined function
// first. Without DWARF for pc it returns the symbol's name alone and an error
// saying why.
func (s *Symbolizer) Locate(pc uint64) ([]Location, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	symName := ""
	if sym, ok := s.syms.at(pc); ok {
		symName = sym.name
	}
	fallback := func(err error) ([]Location, error) {
		if symName == "" {
			return nil, err
		}
		return []Location{{Function: symName}}, err
	}
	if err := s.loadDWARF(); err != nil {
		return fallback(err)
	}
	off, ok := s.units.find(pc)
	if !ok {
		// Assembler without debug info, or code generated at link time.
		return fallback(errors.New("no debug info covers this address"))
	}
	u, err := s.loadUnit(off)
	if err != nil {
		return fallback(err)
	}
	chain := u.chain(pc)
	row, hasLine := u.line(pc)
	var locs []Location
	if len(chain) == 0 {
		// Units made from assembler have lines but no subprograms.
		l := Location{Function: symName}
		if hasLine {
			l.File, l.Line = s.relPath(row.file.Name, u.compDir), row.line
		}
		return []Location{l}, nil
	}
	// The innermost scope's position is the line table's; each outer one's
	// is where the scope inside it was inlined.
	file, line := "", 0
	if hasLine {
		file, line = row.file.Name, row.line
	}
	for i := len(chain) - 1; i >= 0; i-- {
		sc := chain[i]
		name := s.nameOf(sc.off)
		if name == "" && i == 0 {
			name = symName
		}
		locs = append(locs, Location{Function: name, File: s.relPath(file, u.compDir), Line: line, Inline: i > 0})
		file, line = u.fileName(sc.callFile), sc.callLine
	}
	return locs, nil
}

// Report symbolizes every frame reference in a report's text (a console
// log slice, timestamps and all). A KASLR slide is worked out from lines
// that give both an address and a symbol, and applied to bare addresses.
// It returns early with ctx's error when ctx is done.
func (s *Symbolizer) Report(ctx context.Context, text string) ([]Frame, error) {
	refs := Parse(text)
	slide := Slide(refs, s)
	out := make([]Frame, 0, len(refs))
	for _, r := range refs {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("symbolize against %s: %w", s.path, err)
		}
		f := s.Resolve(r, slide)
		// A bare register value outside the kernel is user space, not a
		// frame anyone asked about.
		if r.Register && r.Func == "" && f.Err == ErrNotInText.Error() {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// Slide returns the KASLR offset the refs imply: running address minus
// vmlinux address, taken from the first ref that has both an address and a
// symbol the vmlinux knows. It is 0 when no ref has both.
func Slide(refs []Ref, s *Symbolizer) int64 {
	for _, r := range refs {
		if !r.HasAddr || r.Func == "" || r.Module != "" {
			continue
		}
		sym, _, ok := s.syms.lookup(r.Func, r.Offset, r.Size)
		if !ok {
			continue
		}
		return int64(r.Addr) - int64(sym.addr+r.Offset)
	}
	return 0
}
