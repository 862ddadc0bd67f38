package inventory

import (
	"fmt"
	"slices"

	"github.com/cilium/ebpf/btf"
)

// Reason says why a traceable function is not a candidate. The values are
// stable keys for counting.
type Reason string

// Reasons a function is rejected, in the order they are checked.
const (
	NoBTF        Reason = "no_btf"        // no BTF FUNC of that name
	DupFtrace    Reason = "dup_ftrace"    // name listed more than once in available_filter_functions
	DupBTF       Reason = "dup_btf"       // several BTF FUNCs: the loader refuses ambiguous targets
	DupKallsyms  Reason = "dup_kallsyms"  // several kallsyms entries: the kernel may resolve another copy
	Deny         Reason = "deny"          // on the deny list
	NoProto      Reason = "no_proto"      // FUNC without a FUNC_PROTO
	Variadic     Reason = "variadic"      // the trampoline cannot know where arguments end
	TooManyArgs  Reason = "too_many_args" // more than Filter.MaxArgs parameters
	StructArg    Reason = "struct_arg"    // struct or union passed by value
	BadArg       Reason = "bad_arg"       // a parameter of a kind trampolines do not save (float, array, wide int)
	StructReturn Reason = "struct_return" // struct or union returned by value
	BadReturn    Reason = "bad_return"    // a return type of another unsupported kind
)

// Filter holds the rules that decide whether a function is a candidate.
type Filter struct {
	// MaxArgs is the largest parameter count accepted. The kernel's limit
	// is per architecture and version (6 registers on x86-64 before stack
	// arguments were supported); the caller chooses.
	MaxArgs int
	// Deny lists functions never to trace.
	Deny []DenyEntry
}

// CheckSignature returns "" if the verifier can build a trampoline for fn,
// else why not. It follows btf_distill_func_proto: each parameter and the
// return value must be void (return only), an integer or enum of at most
// 8 bytes, or a pointer. The kernel accepts small structs by value on some
// architectures; they are rejected here because their register layout is
// where architectures differ.
func (f Filter) CheckSignature(fn *btf.Func) (Reason, string) {
	proto, ok := fn.Type.(*btf.FuncProto)
	if !ok || proto == nil {
		return NoProto, fmt.Sprintf("type %T", fn.Type)
	}
	params := proto.Params
	if n := len(params); n > 0 && isVoid(params[n-1].Type) {
		return Variadic, ""
	}
	if len(params) > f.MaxArgs {
		return TooManyArgs, fmt.Sprintf("%d params > %d", len(params), f.MaxArgs)
	}
	for i, p := range params {
		switch t := btf.UnderlyingType(p.Type).(type) {
		case *btf.Pointer:
		case *btf.Int:
			if t.Size > 8 {
				return BadArg, fmt.Sprintf("arg%d: %d-byte int", i, t.Size)
			}
		case *btf.Enum:
			if t.Size > 8 {
				return BadArg, fmt.Sprintf("arg%d: %d-byte enum", i, t.Size)
			}
		case *btf.Struct, *btf.Union:
			return StructArg, fmt.Sprintf("arg%d", i)
		default:
			return BadArg, fmt.Sprintf("arg%d: %T", i, t)
		}
	}
	switch t := btf.UnderlyingType(proto.Return).(type) {
	case *btf.Void, nil, *btf.Pointer:
	case *btf.Int:
		if t.Size > 8 {
			return BadReturn, fmt.Sprintf("%d-byte int", t.Size)
		}
	case *btf.Enum:
		if t.Size > 8 {
			return BadReturn, fmt.Sprintf("%d-byte enum", t.Size)
		}
	case *btf.Struct, *btf.Union:
		return StructReturn, ""
	default:
		return BadReturn, fmt.Sprintf("%T", t)
	}
	return "", ""
}

// isVoid reports whether t is BTF type 0, which as the last parameter of a
// FUNC_PROTO marks a variadic function.
func isVoid(t btf.Type) bool {
	if t == nil {
		return true
	}
	_, ok := t.(*btf.Void)
	return ok
}

// FuncSource looks up BTF FUNCs by name.
type FuncSource interface {
	// Funcs returns every BTF FUNC called name; none is not an error.
	Funcs(name string) ([]*btf.Func, error)
}

// MapSource is a FuncSource over a map, for tests and precomputed sets.
type MapSource map[string][]*btf.Func

// Funcs implements FuncSource.
func (m MapSource) Funcs(name string) ([]*btf.Func, error) { return m[name], nil }

// Input is everything Compute needs.
type Input struct {
	Available Available
	BTF       FuncSource
	// Kallsyms counts built-in symbols by name; nil skips the check (e.g.
	// when /proc/kallsyms is unreadable).
	Kallsyms map[string]int
	Filter   Filter
	// Modules are the loaded modules whose functions may be candidates
	// too, each with its BTF. Other modules' functions never are.
	Modules map[string]FuncSource
}

// Result is the outcome of the inventory.
type Result struct {
	// Traceable is the number of available_filter_functions entries.
	Traceable int
	// WithBTF counts built-in traceable names that have a BTF FUNC.
	WithBTF int
	// Candidates are the names that passed every check, sorted so that a
	// seeded shuffle of them is reproducible.
	Candidates []string
	// Rejected counts the reasons names were not candidates.
	Rejected map[Reason]int
}

// Compute applies the checks to every built-in traceable function.
func Compute(in Input) (Result, error) {
	res := Result{Traceable: in.Available.Entries, Rejected: make(map[Reason]int)}
	names := make([]string, 0, len(in.Available.Vmlinux))
	for name := range in.Available.Vmlinux {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fns, err := in.BTF.Funcs(name)
		if err != nil {
			return res, fmt.Errorf("inventory.Compute: BTF lookup %s: %w", name, err)
		}
		if len(fns) > 0 {
			res.WithBTF++
		}
		if r := in.check(name, fns); r != "" {
			res.Rejected[r]++
			continue
		}
		res.Candidates = append(res.Candidates, name)
	}
	mods := make([]string, 0, len(in.Modules))
	for m := range in.Modules {
		mods = append(mods, m)
	}
	slices.Sort(mods)
	for _, m := range mods {
		if err := in.module(&res, m); err != nil {
			return res, err
		}
	}
	return res, nil
}

// module adds module m's candidates to res. A name vmlinux also has is not
// one: the attach resolves a name in vmlinux first.
func (in Input) module(res *Result, m string) error {
	counts := in.Available.Modules[m]
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fns, err := in.Modules[m].Funcs(name)
		if err != nil {
			return fmt.Errorf("inventory.Compute: BTF lookup %s [%s]: %w", name, m, err)
		}
		if len(fns) > 0 {
			res.WithBTF++
		}
		r := Reason("")
		switch {
		case len(fns) == 0:
			r = NoBTF
		case counts[name] > 1:
			r = DupFtrace
		case len(fns) > 1:
			r = DupBTF
		case in.Available.Vmlinux[name] > 0 || in.Kallsyms[name] > 0:
			r = DupKallsyms
		case Denied(in.Filter.Deny, name):
			r = Deny
		default:
			r, _ = in.Filter.CheckSignature(fns[0])
		}
		if r != "" {
			res.Rejected[r]++
			continue
		}
		res.Candidates = append(res.Candidates, name)
	}
	return nil
}

func (in Input) check(name string, fns []*btf.Func) Reason {
	switch {
	case len(fns) == 0:
		return NoBTF
	case in.Available.Vmlinux[name] > 1:
		return DupFtrace
	case len(fns) > 1:
		return DupBTF
	case in.Kallsyms != nil && in.Kallsyms[name] > 1:
		return DupKallsyms
	case Denied(in.Filter.Deny, name):
		return Deny
	}
	r, _ := in.Filter.CheckSignature(fns[0])
	return r
}
