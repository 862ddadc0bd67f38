package kbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrConfigMismatch is wrapped when the final .config lacks a requested value.
var ErrConfigMismatch = errors.New("requested kconfig values did not survive")

// Mismatch is one requested setting that the final .config does not have.
type Mismatch struct {
	Setting Setting
	// Got is the final value; "n" when the symbol is absent or unset.
	Got    string
	Reason string
}

func (m Mismatch) String() string {
	return fmt.Sprintf("CONFIG_%s: asked %s (%s), got %s: %s", m.Setting.Symbol, m.Setting.Value, m.Setting.Origin, m.Got, m.Reason)
}

// MismatchError lists every setting that cannot be, or was not, honoured.
type MismatchError struct {
	// Precheck is true when the tree was only inspected, not configured.
	Precheck   bool
	Mismatches []Mismatch
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	if e.Precheck {
		fmt.Fprintf(&b, "%d requested kconfig value(s) cannot be had from this tree:", len(e.Mismatches))
	} else {
		fmt.Fprintf(&b, "%d requested kconfig value(s) are not in the final .config:", len(e.Mismatches))
	}
	for _, m := range e.Mismatches {
		b.WriteString("\n  ")
		b.WriteString(m.String())
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrConfigMismatch.
func (e *MismatchError) Unwrap() error { return ErrConfigMismatch }

// ParseConfig reads a .config into symbol → value ("n" for "is not set").
func ParseConfig(text []byte) map[string]string {
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := unsetRe.FindStringSubmatch(line); m != nil {
			cfg[m[1]] = "n"
		} else if m := setRe.FindStringSubmatch(line); m != nil {
			cfg[m[1]] = m[2]
		}
	}
	return cfg
}

// Precheck finds requests that cannot succeed on this tree, before anything
// is configured or built: unknown symbols and type errors.
func Precheck(req []Setting, idx Index) error {
	var bad []Mismatch
	for _, s := range req {
		sym, ok := idx[s.Symbol]
		if !ok {
			bad = append(bad, Mismatch{Setting: s, Got: "n", Reason: "not available on this kernel version: no Kconfig file in the tree defines it"})
			continue
		}
		if r := typeProblem(sym, s.Value); r != "" {
			bad = append(bad, Mismatch{Setting: s, Got: "n", Reason: r})
		}
	}
	if len(bad) > 0 {
		return &MismatchError{Precheck: true, Mismatches: bad}
	}
	return nil
}

func typeProblem(sym *Symbol, v string) string {
	isTristate := v == "y" || v == "m" || v == "n"
	switch sym.Type {
	case "bool":
		if v == "m" {
			return fmt.Sprintf("%s is a bool (%s): it cannot be a module", sym.Name, sym.Where)
		}
		if !isTristate {
			return fmt.Sprintf("%s is a bool (%s): use y or n", sym.Name, sym.Where)
		}
	case "tristate":
		if !isTristate {
			return fmt.Sprintf("%s is a tristate (%s): use y, m or n", sym.Name, sym.Where)
		}
	case "int", "hex":
		if isTristate {
			return fmt.Sprintf("%s is an %s in this kernel (%s), not a bool: give a number", sym.Name, sym.Type, sym.Where)
		}
	case "string":
		if !strings.HasPrefix(v, `"`) {
			return fmt.Sprintf("%s is a string (%s): quote the value", sym.Name, sym.Where)
		}
	}
	return ""
}

// Verify checks that every requested value is in the final .config, and
// explains each one that is not.
func Verify(req []Setting, final map[string]string, idx Index) error {
	var bad []Mismatch
	for _, s := range req {
		got, ok := final[s.Symbol]
		if !ok {
			got = "n"
		}
		if got == s.Value {
			continue
		}
		bad = append(bad, Mismatch{Setting: s, Got: got, Reason: explain(s, idx, final)})
	}
	if len(bad) > 0 {
		return &MismatchError{Mismatches: bad}
	}
	return nil
}

func explain(s Setting, idx Index, final map[string]string) string {
	sym, ok := idx[s.Symbol]
	if !ok {
		return "not available on this kernel version: no Kconfig file in the tree defines it"
	}
	var unmet []string
	for _, dep := range sym.DependsOn {
		if !depMet(dep, final) {
			unmet = append(unmet, dep)
		}
	}
	if len(unmet) > 0 {
		return fmt.Sprintf("a missing dependency: %s (%s) depends on %s", sym.Name, sym.Where, strings.Join(unmet, " && "))
	}
	if !sym.Prompt && s.Value != "n" {
		return fmt.Sprintf("%s (%s) has no prompt: only a select or default from another option turns it on, and none did", sym.Name, sym.Where)
	}
	if s.Value == "n" {
		return fmt.Sprintf("%s (%s) is forced on by a select from another option", sym.Name, sym.Where)
	}
	return fmt.Sprintf("%s (%s) was overridden by a choice or a select elsewhere, or the file defining it is sourced inside an `if` or `menu` block whose condition is off (e.g. MISC_FILESYSTEMS for PSTORE)", sym.Name, sym.Where)
}

// depMet evaluates the simple dependency forms well enough to name a culprit:
// a conjunction of (possibly negated) symbols. Anything more complex counts as
// unmet only if a plain symbol in it is off, which errs on the side of naming it.
func depMet(expr string, final map[string]string) bool {
	for _, term := range strings.Split(expr, "&&") {
		term = strings.TrimSpace(term)
		neg := strings.HasPrefix(term, "!")
		term = strings.TrimPrefix(term, "!")
		if strings.ContainsAny(term, "|()=<> ") || term == "" {
			continue
		}
		on := final[term] == "y" || final[term] == "m"
		if on == neg {
			return false
		}
	}
	return true
}

// observedRe picks the symbols worth recording whatever was requested.
var observedRe = regexp.MustCompile(`FTRACE|PREEMPT|CALL_OPS|DIRECT_CALL|^BPF_JIT|^CC_IS_|^LD_IS_|^RISCV_ISA_C$|^KASAN$|^PROVE_LOCKING$|^KPROBES$|^FPROBE$`)

// Observe returns the final values of the symbols that tell variants apart,
// with the CONFIG_ prefix.
func Observe(final map[string]string) map[string]string {
	out := map[string]string{}
	for sym, v := range final {
		if observedRe.MatchString(sym) {
			out["CONFIG_"+sym] = v
		}
	}
	return out
}

// verified maps every requested symbol, with the CONFIG_ prefix, to its final
// value. A symbol absent from .config (its dependencies unmet, so kconfig does
// not even write "is not set") is "n", as Verify judges it.
func verified(want []Setting, final map[string]string) map[string]string {
	out := make(map[string]string, len(want))
	for _, s := range want {
		v, ok := final[s.Symbol]
		if !ok {
			v = "n"
		}
		out["CONFIG_"+s.Symbol] = v
	}
	return out
}
