package matrix

import (
	"fmt"
	"strings"

	"github.com/ftrace-harness/fth/harness/kbuild"
)

// assumption is a value the build will have because a fragment asks for it
// (merge_config and Verify make sure it does, or the build stops).
type assumption struct {
	v tri
	// why reads as a clause: "ftrace/no-call-ops:14 sets DYNAMIC_FTRACE_WITH_CALL_OPS=n".
	why string
}

// evaluator answers "can this symbol be on (or off) for this arch, given what
// the fragments ask for?" from an arch's Kconfig alone, without configuring.
// It errs towards maybe: it skips a cell only on a definite no, which comes
// from the tree's own select and depends-on lines (a HAVE_ or ARCH_HAS_
// symbol the arch does or does not select), never from a compiler probe.
type evaluator struct {
	kc     *kbuild.ArchKconfig
	arch   string
	assume map[string]assumption
	memo   map[string]tri
	busy   map[string]bool
	parsed map[string]*node
}

// newEvaluator assumes every setting except the one for exclude (the symbol
// being judged must not vouch for itself).
func newEvaluator(kc *kbuild.ArchKconfig, archName string, settings []kbuild.Setting, exclude string) *evaluator {
	e := &evaluator{kc: kc, arch: archName, assume: map[string]assumption{}, parsed: map[string]*node{}}
	for _, s := range settings {
		if s.Symbol == exclude {
			continue
		}
		switch s.Value {
		case "y", "m":
			e.assume[s.Symbol] = assumption{yes, fmt.Sprintf("%s sets %s=%s", s.Origin, s.Symbol, s.Value)}
		case "n":
			e.assume[s.Symbol] = assumption{no, fmt.Sprintf("%s sets %s=n", s.Origin, s.Symbol)}
		}
	}
	e.reset()
	e.inferOff(settings, exclude)
	return e
}

func (e *evaluator) reset() {
	e.memo, e.busy = map[string]tri{}, map[string]bool{}
}

// inferOff propagates "off" through promptless def_bool y symbols: such a
// symbol is y exactly when its dependencies hold, so asking for it off means
// one of them is off, and when only one is in doubt, that one. This is how
// "# CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS is not set" turns into
// HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS=n, which riscv's and powerpc's direct
// calls hang on.
func (e *evaluator) inferOff(settings []kbuild.Setting, exclude string) {
	for _, st := range settings {
		if st.Value != "n" || st.Symbol == exclude {
			continue
		}
		s := e.kc.Symbols[st.Symbol]
		if s == nil || len(s.Defs) != 1 {
			continue
		}
		d := s.Defs[0]
		if d.Prompt || len(d.Defaults) == 0 || d.Defaults[0].If != "" || d.Defaults[0].Value != "y" {
			continue
		}
		var doubt []string
		for _, c := range d.DependsOn {
			if e.expr(c.Expr) != yes {
				doubt = append(doubt, c.Expr)
			}
		}
		if len(doubt) != 1 || parseExpr(doubt[0]).op != "sym" {
			continue
		}
		if _, set := e.assume[doubt[0]]; set {
			continue
		}
		e.assume[doubt[0]] = assumption{no, fmt.Sprintf("%s must be off for %s=n (%s)", doubt[0], st.Symbol, st.Origin)}
		e.reset()
	}
}

func (e *evaluator) parse(s string) *node {
	n := e.parsed[s]
	if n == nil {
		n = parseExpr(s)
		e.parsed[s] = n
	}
	return n
}

// expr evaluates an expression; "" (no condition) is yes.
func (e *evaluator) expr(s string) tri {
	if s == "" {
		return yes
	}
	return e.eval(e.parse(s))
}

func (e *evaluator) eval(n *node) tri {
	switch n.op {
	case "sym":
		return e.val(n.text)
	case "const":
		if n.text == "n" {
			return no
		}
		return yes
	case "!":
		return not3(e.eval(n.kids[0]))
	case "&&":
		v := yes
		for _, k := range n.kids {
			v = and3(v, e.eval(k))
		}
		return v
	case "||":
		v := no
		for _, k := range n.kids {
			v = or3(v, e.eval(k))
		}
		return v
	case "=", "!=":
		return e.compare(n)
	}
	return maybe
}

// compare handles SYM=y, SYM!=n and the like; other comparisons (versions,
// strings, numbers) are maybe.
func (e *evaluator) compare(n *node) tri {
	sym, c := n.kids[0], n.kids[1]
	if sym.op != "sym" {
		sym, c = c, sym
	}
	if sym.op != "sym" || (c.op != "const" && c.op != "str") {
		return maybe
	}
	want := strings.Trim(c.text, `"'`)
	v := e.val(sym.text)
	var r tri
	switch want {
	case "y":
		r = v
	case "n":
		r = not3(v)
	default:
		return maybe
	}
	if n.op == "!=" {
		r = not3(r)
	}
	return r
}

// val is the symbol's value in a build from allnoconfig plus the assumed
// settings: y when assumed or forced by a select or a promptless default;
// maybe when a prompt or a compiler probe decides; n when nothing can turn
// it on. An undefined symbol is n, as in kconfig.
func (e *evaluator) val(name string) tri {
	if a, ok := e.assume[name]; ok {
		return a.v
	}
	if v, ok := e.memo[name]; ok {
		return v
	}
	s := e.kc.Symbols[name]
	if s == nil {
		return no
	}
	if e.busy[name] {
		return maybe
	}
	e.busy[name] = true
	v := e.selected(s)
	for _, d := range s.Defs {
		if v == yes {
			break
		}
		v = or3(v, e.defValue(d))
	}
	delete(e.busy, name)
	e.memo[name] = v
	return v
}

// selected is whether a select forces s on (select ignores depends on).
func (e *evaluator) selected(s *kbuild.ArchSymbol) tri {
	v := no
	for _, sel := range s.SelectedBy {
		v = or3(v, and3(e.val(sel.From), e.expr(sel.If)))
		if v == yes {
			break
		}
	}
	return v
}

// defValue is what one definition contributes, ignoring selects.
func (e *evaluator) defValue(d kbuild.SymbolDef) tri {
	if d.Type != "bool" && d.Type != "tristate" && d.Type != "" {
		return maybe
	}
	deps := e.deps(d)
	if deps == no {
		return no
	}
	if d.InChoice {
		return maybe
	}
	if d.Prompt && e.expr(d.PromptIf) != no {
		// Settable by a fragment (or left n by allnoconfig): either way.
		return maybe
	}
	return and3(deps, e.defaultVal(d))
}

func (e *evaluator) deps(d kbuild.SymbolDef) tri {
	v := yes
	for _, c := range d.DependsOn {
		v = and3(v, e.expr(c.Expr))
		if v == no {
			break
		}
	}
	return v
}

func (e *evaluator) defaultVal(d kbuild.SymbolDef) tri {
	for _, df := range d.Defaults {
		c := e.expr(df.If)
		if c == no {
			continue
		}
		if c == maybe {
			return maybe
		}
		return e.expr(df.Value)
	}
	return no
}

// possible says whether name can be y for this arch with these fragments,
// and if not, why.
func (e *evaluator) possible(name string) (bool, string) {
	s := e.kc.Symbols[name]
	if s == nil {
		return false, fmt.Sprintf("no Kconfig file ARCH=%s reads defines it", e.kc.SrcArch)
	}
	if e.selected(s) != no {
		return true, ""
	}
	for _, d := range s.Defs {
		deps := e.deps(d)
		if deps == no {
			continue
		}
		if d.InChoice || (d.Prompt && e.expr(d.PromptIf) != no) {
			return true, ""
		}
		if and3(deps, e.defaultVal(d)) != no {
			return true, ""
		}
	}
	return false, e.whyOff(s, "it", 0)
}

// forcedOn says whether name is y for this arch whatever the fragments say
// (so asking for n cannot work), and why.
func (e *evaluator) forcedOn(name string) (bool, string) {
	if e.val(name) != yes {
		return false, ""
	}
	return true, e.whyYes(name, 0)
}

// maxDepth bounds explanations: a reason names the culprit and the link that
// makes it one, not the whole Kconfig graph.
const maxDepth = 3

// whyOff explains why a defined symbol cannot be on; subject is how the
// sentence names it ("it" when the caller already has).
func (e *evaluator) whyOff(s *kbuild.ArchSymbol, subject string, depth int) string {
	var parts []string
	for _, d := range s.Defs {
		if c, ok := e.failingDep(d); ok {
			parts = append(parts, fmt.Sprintf("%s depends on %s (%s), and %s", subject, c.Expr, c.Where, e.whyExprNo(e.parse(c.Expr), depth+1)))
			continue
		}
		if d.Prompt && e.expr(d.PromptIf) == no {
			parts = append(parts, fmt.Sprintf("the prompt of %s needs %s (%s), and %s", s.Name, d.PromptIf, d.Where, e.whyExprNo(e.parse(d.PromptIf), depth+1)))
			continue
		}
		if !d.Prompt && len(d.Defaults) > 0 {
			parts = append(parts, fmt.Sprintf("%s has no prompt and its default is off (%s)", subject, d.Defaults[0].Where))
		}
	}
	// A select would override all of the above, so say why none applies;
	// but "nothing selects it" only adds noise to a reason already given.
	if len(parts) == 0 || len(s.SelectedBy) > 0 {
		parts = append(parts, e.whyNotSelected(s, depth))
	}
	return strings.Join(parts, "; ")
}

func (e *evaluator) failingDep(d kbuild.SymbolDef) (kbuild.Cond, bool) {
	for _, c := range d.DependsOn {
		if e.expr(c.Expr) == no {
			return c, true
		}
	}
	return kbuild.Cond{}, false
}

func (e *evaluator) whyNotSelected(s *kbuild.ArchSymbol, depth int) string {
	if len(s.SelectedBy) == 0 {
		return fmt.Sprintf("nothing selects %s for %s", s.Name, e.arch)
	}
	var parts []string
	for _, sel := range s.SelectedBy {
		if len(parts) == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(s.SelectedBy)-3))
			break
		}
		switch {
		case e.val(sel.From) == no:
			parts = append(parts, fmt.Sprintf("%s selects %s (%s), and %s", sel.From, s.Name, sel.Where, e.whyNo(sel.From, depth+1)))
		default:
			parts = append(parts, fmt.Sprintf("%s selects %s only if %s (%s), and %s", sel.From, s.Name, sel.If, sel.Where, e.whyExprNo(e.parse(sel.If), depth+1)))
		}
	}
	return strings.Join(parts, "; ")
}

// whyNo explains why a symbol is off.
func (e *evaluator) whyNo(name string, depth int) string {
	if a, ok := e.assume[name]; ok {
		return a.why
	}
	s := e.kc.Symbols[name]
	if s == nil {
		return fmt.Sprintf("%s is not defined for %s", name, e.arch)
	}
	if depth >= maxDepth {
		return name + " is off"
	}
	return e.whyOff(s, name, depth)
}

// whyYes explains why a symbol is on.
func (e *evaluator) whyYes(name string, depth int) string {
	if a, ok := e.assume[name]; ok {
		return a.why
	}
	s := e.kc.Symbols[name]
	if s == nil {
		return name + " is on"
	}
	for _, sel := range s.SelectedBy {
		if and3(e.val(sel.From), e.expr(sel.If)) == yes {
			return fmt.Sprintf("%s selects %s (%s)", sel.From, name, sel.Where)
		}
	}
	for _, d := range s.Defs {
		if e.defValue(d) != yes || len(d.Defaults) == 0 {
			continue
		}
		why := fmt.Sprintf("%s defaults to y (%s)", name, d.Defaults[0].Where)
		if depth >= maxDepth {
			return why
		}
		// The default is not the news; what keeps its dependencies on is.
		var deps []string
		for _, c := range d.DependsOn {
			if n := e.parse(c.Expr); n.op == "sym" {
				if _, assumed := e.assume[n.text]; !assumed {
					deps = append(deps, e.whyYes(n.text, depth+1))
				}
			}
		}
		if len(deps) > 0 {
			why += " and nothing it depends on can be off: " + strings.Join(deps, "; ")
		}
		return why
	}
	return name + " is on"
}

// whyExprNo explains why an expression is false, by its first false part.
func (e *evaluator) whyExprNo(n *node, depth int) string {
	switch n.op {
	case "sym":
		return e.whyNo(n.text, depth)
	case "!":
		if k := n.kids[0]; k.op == "sym" {
			return e.whyYes(k.text, depth)
		}
	case "&&":
		for _, k := range n.kids {
			if e.eval(k) == no {
				return e.whyExprNo(k, depth)
			}
		}
	case "||":
		var parts []string
		for _, k := range n.kids {
			parts = append(parts, e.whyExprNo(k, depth))
		}
		return "none holds: " + strings.Join(parts, "; ")
	}
	return n.String() + " is false"
}
