package kbuild

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ArchKconfig is a kernel tree's Kconfig as kconfig itself reads it for one
// architecture: from the top-level Kconfig, following source lines with
// $(SRCARCH) expanded. Symbols that only other architectures define are
// absent, conditions of enclosing if/menu/choice blocks are kept, and every
// select is recorded on both ends. That is what it takes to tell "this arch
// cannot have X" (nothing selects a HAVE_ symbol X needs, or the arch selects
// one X must not have) from "X was not asked for", before anything is built.
//
// Index (IndexTree) answers the other question, whether a symbol exists in the
// tree at all; it reads every Kconfig file, for every arch.
type ArchKconfig struct {
	// SrcArch is the arch/ directory read, e.g. "x86" for ARCH=x86_64.
	SrcArch string
	// Symbols holds every symbol defined in the files this arch reads.
	Symbols map[string]*ArchSymbol
}

// ArchSymbol is one symbol: its definitions and who selects it.
type ArchSymbol struct {
	Name string
	// Defs are the symbol's definitions in the order kconfig reads them.
	Defs []SymbolDef
	// SelectedBy lists every select of this symbol, from any symbol this arch
	// reads.
	SelectedBy []Select
}

// SymbolDef is one "config" or "menuconfig" entry.
type SymbolDef struct {
	// Where is file:line relative to the tree.
	Where string
	// Type is bool, tristate, int, hex or string.
	Type string
	// Prompt says a user can set the symbol when PromptIf and DependsOn hold.
	Prompt   bool
	PromptIf string
	// InChoice is true for the members of a choice block: kconfig sets exactly
	// one of them, whatever allnoconfig says.
	InChoice bool
	// DependsOn holds the enclosing blocks' conditions, outermost first, then
	// the entry's own "depends on" lines.
	DependsOn []Cond
	Defaults  []Default
	Selects   []Select
}

// Cond is one dependency expression and where it is written.
type Cond struct {
	Expr  string
	Where string
}

// Default is one "default" line (or the value of a def_bool).
type Default struct {
	Value string
	// If is the condition after "if"; "" means always.
	If    string
	Where string
}

// Select is one "select To if If" line in the definition of From.
type Select struct {
	From  string
	To    string
	If    string
	Where string
}

// SrcArch maps a kernel ARCH= value to its arch/ directory, as the kernel's
// top-level Makefile does.
func SrcArch(kernelArch string) string {
	switch kernelArch {
	case "x86_64", "i386":
		return "x86"
	case "sparc64":
		return "sparc"
	case "parisc64":
		return "parisc"
	}
	return kernelArch
}

// ReadArchKconfig reads the Kconfig files of src that kconfig reads for
// ARCH=kernelArch.
func ReadArchKconfig(src, kernelArch string) (*ArchKconfig, error) {
	r := &kconfigReader{
		src:  src,
		vars: map[string]string{"SRCARCH": SrcArch(kernelArch), "ARCH": kernelArch},
		kc:   &ArchKconfig{SrcArch: SrcArch(kernelArch), Symbols: map[string]*ArchSymbol{}},
		seen: map[string]bool{},
	}
	if _, err := os.Stat(filepath.Join(src, "arch", r.kc.SrcArch, "Kconfig")); err != nil {
		return nil, fmt.Errorf("read Kconfig for ARCH=%s under %s: %w: is it a kernel tree, and does it support %s?", kernelArch, src, err, kernelArch)
	}
	if err := r.file(filepath.Join(src, "Kconfig"), nil); err != nil {
		return nil, fmt.Errorf("read Kconfig for ARCH=%s under %s: %w", kernelArch, src, err)
	}
	for _, s := range r.kc.Symbols {
		for _, d := range s.Defs {
			for _, sel := range d.Selects {
				// A select of a symbol no file of this arch defines does
				// nothing; kconfig only warns.
				if t := r.kc.Symbols[sel.To]; t != nil {
					t.SelectedBy = append(t.SelectedBy, sel)
				}
			}
		}
	}
	return r.kc, nil
}

// kconfigReader walks the source graph from the top-level Kconfig.
type kconfigReader struct {
	src  string
	vars map[string]string
	kc   *ArchKconfig
	// seen guards against a file sourced twice (kconfig rejects recursion).
	seen map[string]bool
}

// block is an enclosing if, menu or choice, whose conditions every entry
// inside inherits.
type block struct {
	kind   string
	conds  []Cond
	choice bool
}

func (r *kconfigReader) file(path string, outer []Cond) error {
	if r.seen[path] {
		return nil
	}
	r.seen[path] = true
	lines, err := readLogicalLines(path)
	if err != nil {
		return err
	}
	rel, _ := filepath.Rel(r.src, path)
	stack := []*block{{kind: "file", conds: outer}}
	conds := func() []Cond {
		var all []Cond
		for _, b := range stack {
			all = append(all, b.conds...)
		}
		return all
	}
	inChoice := func() bool {
		for _, b := range stack {
			if b.choice {
				return true
			}
		}
		return false
	}
	var cur *SymbolDef // the config entry whose properties follow
	var curName string
	var curBlock *block // the menu or choice whose "depends on" lines follow
	for _, l := range lines {
		where := fmt.Sprintf("%s:%d", rel, l.n)
		word, rest := splitWord(l.text)
		switch word {
		case "config", "menuconfig":
			r.finish(curName, cur)
			curName = rest
			cur = &SymbolDef{Where: where, InChoice: inChoice(), DependsOn: conds()}
			curBlock = nil
			continue
		case "if":
			r.finish(curName, cur)
			cur, curName, curBlock = nil, "", nil
			stack = append(stack, &block{kind: "if", conds: []Cond{{Expr: rest, Where: where}}})
			continue
		case "menu", "choice":
			r.finish(curName, cur)
			cur, curName = nil, ""
			curBlock = &block{kind: word, choice: word == "choice"}
			stack = append(stack, curBlock)
			continue
		case "endif", "endmenu", "endchoice":
			r.finish(curName, cur)
			cur, curName, curBlock = nil, "", nil
			want := strings.TrimPrefix(word, "end")
			if len(stack) < 2 || stack[len(stack)-1].kind != want {
				return fmt.Errorf("%s: %s without a matching %s", where, word, want)
			}
			stack = stack[:len(stack)-1]
			continue
		case "source", "rsource", "osource", "orsource":
			r.finish(curName, cur)
			cur, curName, curBlock = nil, "", nil
			if err := r.source(word, rest, path, where, conds()); err != nil {
				return err
			}
			continue
		case "comment", "mainmenu":
			r.finish(curName, cur)
			cur, curName, curBlock = nil, "", nil
			continue
		}
		if cur == nil {
			if curBlock != nil && word == "depends" {
				if expr, ok := strings.CutPrefix(rest, "on "); ok {
					curBlock.conds = append(curBlock.conds, Cond{Expr: strings.TrimSpace(expr), Where: where})
				}
			}
			continue
		}
		switch word {
		case "bool", "tristate", "int", "hex", "string":
			cur.Type = word
			if rest != "" {
				cur.Prompt = true
				_, cur.PromptIf = cutIf(rest)
			}
		case "def_bool", "def_tristate":
			cur.Type = strings.TrimPrefix(word, "def_")
			v, cond := cutIf(rest)
			cur.Defaults = append(cur.Defaults, Default{Value: v, If: cond, Where: where})
		case "prompt":
			cur.Prompt = true
			_, cur.PromptIf = cutIf(rest)
		case "default":
			v, cond := cutIf(rest)
			cur.Defaults = append(cur.Defaults, Default{Value: v, If: cond, Where: where})
		case "depends":
			if expr, ok := strings.CutPrefix(rest, "on "); ok {
				cur.DependsOn = append(cur.DependsOn, Cond{Expr: strings.TrimSpace(expr), Where: where})
			}
		case "select":
			to, cond := cutIf(rest)
			cur.Selects = append(cur.Selects, Select{From: curName, To: to, If: cond, Where: where})
		}
	}
	r.finish(curName, cur)
	if len(stack) != 1 {
		return fmt.Errorf("%s: %s block not closed at end of file", rel, stack[len(stack)-1].kind)
	}
	return nil
}

func (r *kconfigReader) finish(name string, d *SymbolDef) {
	if d == nil || name == "" {
		return
	}
	s := r.kc.Symbols[name]
	if s == nil {
		s = &ArchSymbol{Name: name}
		r.kc.Symbols[name] = s
	}
	s.Defs = append(s.Defs, *d)
}

// source follows one source line. Paths may use $(SRCARCH) and wildcards;
// a path using any other variable is skipped, since this arch's build would
// need that variable set (only ARCH=um uses one).
func (r *kconfigReader) source(kind, arg, from, where string, conds []Cond) error {
	p := strings.Trim(strings.TrimSpace(arg), `"`)
	for k, v := range r.vars {
		p = strings.ReplaceAll(p, "$("+k+")", v)
	}
	if strings.Contains(p, "$(") {
		return nil
	}
	base := r.src
	if kind == "rsource" || kind == "orsource" {
		base = filepath.Dir(from)
	}
	matches, err := filepath.Glob(filepath.Join(base, p))
	if err != nil {
		return fmt.Errorf("%s: source %q: %w", where, p, err)
	}
	if len(matches) == 0 && !strings.HasPrefix(kind, "o") {
		return fmt.Errorf("%s: source %q: %w", where, p, os.ErrNotExist)
	}
	for _, m := range matches {
		if err := r.file(m, conds); err != nil {
			return err
		}
	}
	return nil
}

type logicalLine struct {
	n    int
	text string
}

// readLogicalLines returns a Kconfig file's lines with comments, help texts
// and blank lines removed and backslash continuations joined, numbered by
// their first physical line. Help text must go: it is prose, and prose
// starts lines with "select" or "depends on" too.
func readLogicalLines(path string) ([]logicalLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logicalLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		pending    strings.Builder
		pendingN   int
		inHelp     bool
		helpIndent = -1
	)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		if inHelp {
			if strings.TrimSpace(raw) == "" {
				continue
			}
			ind := indent(raw)
			if helpIndent < 0 {
				helpIndent = ind
				continue
			}
			if ind >= helpIndent {
				continue
			}
			inHelp = false
		}
		line := stripComment(raw)
		if pending.Len() == 0 {
			pendingN = n
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			pending.WriteString(cont)
			pending.WriteByte(' ')
			continue
		}
		pending.WriteString(line)
		text := strings.Join(strings.Fields(pending.String()), " ")
		pending.Reset()
		if text == "" {
			continue
		}
		if text == "help" || text == "---help---" {
			inHelp, helpIndent = true, -1
			continue
		}
		out = append(out, logicalLine{n: pendingN, text: text})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// indent measures leading white space with tabs at 8 columns, as kconfig's
// lexer does for help text.
func indent(s string) int {
	n := 0
	for _, c := range s {
		switch c {
		case ' ':
			n++
		case '\t':
			n = (n/8 + 1) * 8
		default:
			return n
		}
	}
	return n
}

// stripComment cuts a # comment that is not inside a quoted string.
func stripComment(s string) string {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == '\\':
			i++ // an escaped character cannot end the string
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return s[:i]
		}
	}
	return s
}

func splitWord(s string) (string, string) {
	w, rest, _ := strings.Cut(s, " ")
	return w, strings.TrimSpace(rest)
}

// cutIf splits "value if cond" at the last top-level "if" word, outside
// quotes, parentheses and $(...) macros.
func cutIf(s string) (value, cond string) {
	depth, quote, at := 0, byte(0), -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0 && c == 'i' && strings.HasPrefix(s[i:], "if") &&
			(i == 0 || s[i-1] == ' ') && (i+2 == len(s) || s[i+2] == ' '):
			at = i
		}
	}
	if at < 0 {
		return strings.TrimSpace(s), ""
	}
	return strings.TrimSpace(s[:at]), strings.TrimSpace(s[at+2:])
}
