// Package matrix expands architectures × variants into cells, decides from the
// kernel tree which cells an architecture can provide (and says why not for
// the others), and runs them.
//
// A variant is a set of kconfig fragments added on top of base and
// arch/<arch>, a preempt= boot model, and what it needs: ftrace features from
// the arch table and Kconfig symbols the arch must be able to select. A cell
// whose needs are not met is a skip with a reason, recorded like any other
// result: the harness never builds something other than what a cell names.
package matrix

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/harness/arch"
)

// Variant is one kernel configuration and boot model, applied to any arch.
type Variant struct {
	// Name identifies the variant in flags, matrix files and cell names.
	Name string `yaml:"name"`
	// Doc says what the variant tests, for `fth matrix -h` and reports.
	Doc string `yaml:"doc"`
	// Fragments are kconfigs/ names applied after base and arch/<arch>.
	Fragments []string `yaml:"fragments"`
	// Preempt is the preempt= boot parameter; "" boots the model the build has
	// (the only choice without PREEMPT_DYNAMIC).
	Preempt string `yaml:"preempt"`
	// Needs lists the ftrace features the variant is about. An arch whose row
	// lacks one skips the variant without reading the tree.
	Needs []arch.Feature `yaml:"needs"`
	// Selectable lists Kconfig symbols that must be possible on the arch, over
	// and above every y/n setting in Fragments (which is checked too).
	Selectable []string `yaml:"selectable"`
}

// ErrUnknownVariant is wrapped when a variant name is not known.
var ErrUnknownVariant = errors.New("unknown variant")

// Keywords accepted wherever variant names are.
const (
	// DefaultVariants expands, per arch, to that arch's default set.
	DefaultVariants = "default"
	// AllVariants expands to every built-in variant (and a file's own ones).
	AllVariants = "all"
)

// builtins is the built-in variant set, in the order "all" runs them.
var builtins = []Variant{
	{
		Name:       "direct-calls-full",
		Doc:        "BPF trampolines through ftrace direct calls (with CALL_OPS where the arch has it), full preemption switched at boot",
		Fragments:  []string{"ftrace/direct-calls", "preempt/full"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"DYNAMIC_FTRACE_WITH_DIRECT_CALLS"},
	},
	{
		Name:       "call-ops-full",
		Doc:        "DYNAMIC_FTRACE_WITH_CALL_OPS required: per-callsite ops pointers, full preemption",
		Fragments:  []string{"ftrace/call-ops", "preempt/full"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.CallOps, arch.DirectCalls},
		Selectable: []string{"DYNAMIC_FTRACE_WITH_CALL_OPS"},
	},
	{
		Name:       "no-call-ops-full",
		Doc:        "direct calls with CALL_OPS turned off on an arch that has it (the list-ops path), full preemption",
		Fragments:  []string{"ftrace/no-call-ops", "preempt/full"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.CallOps, arch.DirectCalls},
		Selectable: []string{"DYNAMIC_FTRACE_WITH_DIRECT_CALLS"},
	},
	{
		Name:       "lazy",
		Doc:        "PREEMPT_LAZY built in (no PREEMPT_DYNAMIC)",
		Fragments:  []string{"ftrace/direct-calls", "preempt/lazy"},
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PREEMPT_LAZY"},
	},
	{
		Name:       "dynamic-lazy",
		Doc:        "PREEMPT_DYNAMIC on the tree's default model, booted with preempt=lazy",
		Fragments:  []string{"ftrace/direct-calls", "preempt/dynamic"},
		Preempt:    "lazy",
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PREEMPT_DYNAMIC", "PREEMPT_LAZY"},
	},
	{
		Name:       "rt",
		Doc:        "PREEMPT_RT: sleeping spinlocks, threaded interrupts, preemptible softirqs",
		Fragments:  []string{"ftrace/direct-calls", "preempt/rt"},
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PREEMPT_RT"},
	},
	{
		Name:       "none",
		Doc:        "PREEMPT_NONE built in",
		Fragments:  []string{"ftrace/direct-calls", "preempt/none"},
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PREEMPT_NONE"},
	},
	{
		Name:       "voluntary",
		Doc:        "PREEMPT_VOLUNTARY built in",
		Fragments:  []string{"ftrace/direct-calls", "preempt/voluntary"},
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PREEMPT_VOLUNTARY"},
	},
	{
		Name:       "lockdep",
		Doc:        "PROVE_LOCKING and DEBUG_ATOMIC_SLEEP over direct-calls-full",
		Fragments:  []string{"ftrace/direct-calls", "preempt/full", "debug/lockdep"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"PROVE_LOCKING"},
	},
	{
		Name:       "kasan",
		Doc:        "generic KASAN (outline, with vmalloc) over direct-calls-full",
		Fragments:  []string{"ftrace/direct-calls", "preempt/full", "debug/kasan"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"KASAN_GENERIC"},
	},
	{
		Name:       "selftest",
		Doc:        "FTRACE_STARTUP_TEST (the kernel's tracer and direct-call self-checks at boot) over direct-calls-full",
		Fragments:  []string{"ftrace/direct-calls", "preempt/full", "debug/selftest"},
		Preempt:    "full",
		Needs:      []arch.Feature{arch.DirectCalls},
		Selectable: []string{"FTRACE_STARTUP_TEST"},
	},
}

// Builtins returns the built-in variants, in the order AllVariants runs them.
func Builtins() []Variant {
	out := make([]Variant, len(builtins))
	for i, v := range builtins {
		out[i] = v.clone()
	}
	return out
}

// Defaults returns the names of a's default variants: its row's, or, for a
// row that names none, call-ops-full if it has CALL_OPS and
// direct-calls-full otherwise, so a new arch row works without touching
// this package.
func Defaults(a arch.Arch) []string {
	if len(a.DefaultVariants) > 0 {
		return slices.Clone(a.DefaultVariants)
	}
	if a.Has(arch.CallOps) {
		return []string{"call-ops-full"}
	}
	return []string{"direct-calls-full"}
}

// Lookup finds a variant by name among custom (a matrix file's own) and the
// built-ins, custom first.
func Lookup(name string, custom []Variant) (Variant, error) {
	for _, v := range custom {
		if v.Name == name {
			return v.clone(), nil
		}
	}
	for _, v := range builtins {
		if v.Name == name {
			return v.clone(), nil
		}
	}
	return Variant{}, fmt.Errorf("%w %q: choose %s, %s, or one of %s", ErrUnknownVariant, name, DefaultVariants, AllVariants, strings.Join(variantNames(custom), ", "))
}

// variantNames lists the built-in names, then custom's, in the order
// AllVariants runs them.
func variantNames(custom []Variant) []string {
	var out []string
	for _, v := range builtins {
		out = append(out, v.Name)
	}
	for _, v := range custom {
		out = append(out, v.Name)
	}
	return out
}

func (v Variant) clone() Variant {
	v.Fragments = slices.Clone(v.Fragments)
	v.Needs = slices.Clone(v.Needs)
	v.Selectable = slices.Clone(v.Selectable)
	return v
}

// validate checks a variant defined outside this package (a matrix file's).
func (v Variant) validate() error {
	if v.Name == "" || v.Name == DefaultVariants || v.Name == AllVariants || strings.ContainsAny(v.Name, " /,") {
		return fmt.Errorf("variant name %q: use a non-empty name without spaces, slashes or commas, other than %q and %q", v.Name, DefaultVariants, AllVariants)
	}
	for _, b := range builtins {
		if b.Name == v.Name {
			return fmt.Errorf("variant %q is built in: give your own variant another name", v.Name)
		}
	}
	if len(v.Fragments) == 0 {
		return fmt.Errorf("variant %q has no fragments: list at least one kconfigs/ fragment (e.g. ftrace/direct-calls)", v.Name)
	}
	for _, f := range v.Needs {
		if _, ok := featureSymbol[f]; !ok {
			return fmt.Errorf("variant %q needs unknown feature %q: choose from %s, %s", v.Name, f, arch.CallOps, arch.DirectCalls)
		}
	}
	return nil
}

// featureSymbol names the Kconfig symbol behind each arch feature, for skip
// reasons.
var featureSymbol = map[arch.Feature]string{
	arch.CallOps:     "DYNAMIC_FTRACE_WITH_CALL_OPS",
	arch.DirectCalls: "DYNAMIC_FTRACE_WITH_DIRECT_CALLS",
}
