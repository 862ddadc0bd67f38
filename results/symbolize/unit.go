package symbolize

import (
	"debug/dwarf"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// unitRange is one address range of a compilation unit.
type unitRange struct {
	lo, hi uint64
	off    dwarf.Offset
}

// unitIndex maps addresses to compilation units.
type unitIndex struct {
	ranges []unitRange // sorted by lo
	// maxHi[i] is the highest hi among ranges[:i+1], which bounds the
	// backward scan when ranges overlap.
	maxHi []uint64
	// sourceRoot is the kernel source tree, found from the unit compiled
	// from init/main.c; "" when there is none (not a kernel).
	sourceRoot string
}

// indexUnits reads the top-level entry of every unit, skipping its children,
// which costs a few hundred milliseconds for a kernel's thousand units.
func indexUnits(d *dwarf.Data) (*unitIndex, error) {
	idx := &unitIndex{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit, dwarf.TagPartialUnit, dwarf.TagSkeletonUnit:
			ranges, err := d.Ranges(e)
			if err != nil {
				return nil, fmt.Errorf("unit at %#x: %w", e.Offset, err)
			}
			for _, rg := range ranges {
				if rg[1] > rg[0] {
					idx.ranges = append(idx.ranges, unitRange{lo: rg[0], hi: rg[1], off: e.Offset})
				}
			}
			if name, _ := e.Val(dwarf.AttrName).(string); idx.sourceRoot == "" && strings.HasSuffix(name, "/init/main.c") {
				idx.sourceRoot = strings.TrimSuffix(name, "init/main.c")
			}
		}
		r.SkipChildren()
	}
	sort.Slice(idx.ranges, func(i, j int) bool { return idx.ranges[i].lo < idx.ranges[j].lo })
	idx.maxHi = make([]uint64, len(idx.ranges))
	var hi uint64
	for i, rg := range idx.ranges {
		hi = max(hi, rg.hi)
		idx.maxHi[i] = hi
	}
	return idx, nil
}

// find returns the unit whose ranges hold pc.
func (x *unitIndex) find(pc uint64) (dwarf.Offset, bool) {
	i := sort.Search(len(x.ranges), func(i int) bool { return x.ranges[i].lo > pc }) - 1
	for ; i >= 0 && x.maxHi[i] > pc; i-- {
		if rg := x.ranges[i]; rg.lo <= pc && pc < rg.hi {
			return rg.off, true
		}
	}
	return 0, false
}

// lineRow is one row of a unit's line table.
type lineRow struct {
	addr uint64
	file *dwarf.LineFile
	line int
	// end marks the first address after a sequence: no line there.
	end bool
}

// scope is a subprogram, inlined subroutine or lexical block with code.
type scope struct {
	tag      dwarf.Tag
	off      dwarf.Offset
	ranges   [][2]uint64
	children []int
	// callFile and callLine say where an inlined subroutine was inlined.
	callFile, callLine int
}

func (sc *scope) contains(pc uint64) bool {
	for _, r := range sc.ranges {
		if r[0] <= pc && pc < r[1] {
			return true
		}
	}
	return false
}

// unit is one compilation unit's line table and scope tree, built on demand.
type unit struct {
	compDir string
	files   []*dwarf.LineFile
	rows    []lineRow
	scopes  []scope
	top     []int
}

// loadUnit builds the unit at off, once. It must be called with s.mu held.
func (s *Symbolizer) loadUnit(off dwarf.Offset) (*unit, error) {
	if u, ok := s.loaded[off]; ok {
		return u, nil
	}
	r := s.dw.Reader()
	r.Seek(off)
	cu, err := r.Next()
	if err != nil {
		return nil, fmt.Errorf("unit at %#x: %w", off, err)
	}
	if cu == nil {
		return nil, fmt.Errorf("unit at %#x: no entry", off)
	}
	u := &unit{}
	u.compDir, _ = cu.Val(dwarf.AttrCompDir).(string)
	if err := u.readLines(s.dw, cu); err != nil {
		return nil, fmt.Errorf("unit at %#x: line table: %w", off, err)
	}
	if cu.Children {
		b := scopeBuilder{d: s.dw, r: r, u: u}
		if u.top, err = b.children(); err != nil {
			return nil, fmt.Errorf("unit at %#x: scopes: %w", off, err)
		}
	}
	s.loaded[off] = u
	return u, nil
}

func (u *unit) readLines(d *dwarf.Data, cu *dwarf.Entry) error {
	lr, err := d.LineReader(cu)
	if err != nil || lr == nil {
		return err
	}
	var e dwarf.LineEntry
	for {
		if err := lr.Next(&e); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		u.rows = append(u.rows, lineRow{addr: e.Address, file: e.File, line: e.Line, end: e.EndSequence})
	}
	// Files is complete only after the whole program ran (DWARF < 5 can
	// define files as it goes).
	u.files = lr.Files()
	// Sequences need not come in address order. At one address an end of
	// sequence sorts first, so the sequence starting there wins.
	sort.SliceStable(u.rows, func(i, j int) bool {
		if u.rows[i].addr != u.rows[j].addr {
			return u.rows[i].addr < u.rows[j].addr
		}
		return u.rows[i].end && !u.rows[j].end
	})
	return nil
}

// line returns the row that covers pc: the last one at or below it, unless
// that ends a sequence.
func (u *unit) line(pc uint64) (lineRow, bool) {
	i := sort.Search(len(u.rows), func(i int) bool { return u.rows[i].addr > pc }) - 1
	if i < 0 || u.rows[i].end || u.rows[i].file == nil {
		return lineRow{}, false
	}
	return u.rows[i], true
}

// chain returns the scopes holding pc, outermost (the subprogram) first.
// Lexical blocks are walked through but left out.
func (u *unit) chain(pc uint64) []*scope {
	var out []*scope
	level := u.top
	for {
		next := -1
		for _, i := range level {
			if u.scopes[i].contains(pc) {
				next = i
				break
			}
		}
		if next < 0 {
			return out
		}
		sc := &u.scopes[next]
		if sc.tag != dwarf.TagLexDwarfBlock {
			out = append(out, sc)
		}
		level = sc.children
	}
}

func (u *unit) fileName(i int) string {
	if i < 0 || i >= len(u.files) || u.files[i] == nil {
		return ""
	}
	return u.files[i].Name
}

// scopeBuilder walks a unit's entries once, keeping only what holds code.
type scopeBuilder struct {
	d *dwarf.Data
	r *dwarf.Reader
	u *unit
}

// children reads entries up to the end of the current sibling list and
// returns the indexes of the scopes among them.
func (b *scopeBuilder) children() ([]int, error) {
	var out []int
	for {
		e, err := b.r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil || e.Tag == 0 {
			return out, nil
		}
		switch e.Tag {
		case dwarf.TagSubprogram, dwarf.TagInlinedSubroutine, dwarf.TagLexDwarfBlock:
			ranges, err := b.d.Ranges(e)
			if err != nil {
				return nil, fmt.Errorf("entry at %#x: %w", e.Offset, err)
			}
			if len(ranges) == 0 {
				// Declarations and abstract instances hold no code, and
				// neither can anything nested in them.
				b.r.SkipChildren()
				continue
			}
			sc := scope{tag: e.Tag, off: e.Offset, ranges: ranges}
			if f, ok := e.Val(dwarf.AttrCallFile).(int64); ok {
				sc.callFile = int(f)
			}
			if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok {
				sc.callLine = int(l)
			}
			i := len(b.u.scopes)
			b.u.scopes = append(b.u.scopes, sc)
			out = append(out, i)
			if e.Children {
				kids, err := b.children()
				if err != nil {
					return nil, err
				}
				b.u.scopes[i].children = kids
			}
		case dwarf.TagNamespace, dwarf.TagModule:
			// Rust and C++ nest functions in namespaces.
			if e.Children {
				kids, err := b.children()
				if err != nil {
					return nil, err
				}
				out = append(out, kids...)
			}
		default:
			if e.Children {
				b.r.SkipChildren()
			}
		}
	}
}

// nameOf returns the name of the function an entry is an instance of,
// following abstract origins and specifications. It must be called with
// s.mu held.
func (s *Symbolizer) nameOf(off dwarf.Offset) string {
	if n, ok := s.names[off]; ok {
		return n
	}
	name := ""
	r := s.dw.Reader()
	cur := off
	// A chain longer than a few links is a malformed file, not a kernel.
	for range 8 {
		r.Seek(cur)
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if n, ok := e.Val(dwarf.AttrName).(string); ok {
			name = n
			break
		}
		next, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			next, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			break
		}
		cur = next
	}
	s.names[off] = name
	return name
}
