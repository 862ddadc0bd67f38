package matrix

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/runner"
)

// Tree is what Resolve reads: a kernel tree's Kconfig, whole and per arch,
// and the fragment directory.
type Tree struct {
	// Dir is the kernel source tree and Version its VERSION.PATCHLEVEL.SUBLEVEL.
	Dir     string
	Version string
	// KconfigDir is the kconfigs/ fragment directory.
	KconfigDir string
	// Index covers every Kconfig file, for every arch: it tells a symbol this
	// kernel lacks from one only other arches have.
	Index kbuild.Index

	mu     sync.Mutex
	arches map[string]*kbuild.ArchKconfig
}

// OpenTree indexes the kernel tree at src for resolving variants whose
// fragments live in kconfigDir.
func OpenTree(src, kconfigDir string) (*Tree, error) {
	s, err := kbuild.ReadSource(src)
	if err != nil {
		return nil, err
	}
	idx, err := kbuild.IndexTree(s.Dir)
	if err != nil {
		return nil, err
	}
	return &Tree{Dir: s.Dir, Version: s.Version, KconfigDir: kconfigDir, Index: idx}, nil
}

// Arch returns the Kconfig as read for a, reading it once.
func (t *Tree) Arch(a arch.Arch) (*kbuild.ArchKconfig, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kc := t.arches[a.KernelArch]; kc != nil {
		return kc, nil
	}
	kc, err := kbuild.ReadArchKconfig(t.Dir, a.KernelArch)
	if err != nil {
		return nil, err
	}
	if t.arches == nil {
		t.arches = map[string]*kbuild.ArchKconfig{}
	}
	t.arches[a.KernelArch] = kc
	return kc, nil
}

// Cell is one arch × variant: either runnable, or a skip with its reason.
type Cell struct {
	// Name is "<arch>-<variant>", also the cell's result directory.
	Name    string
	Arch    arch.Arch
	Variant Variant
	// Skip, when set, says why this arch or kernel cannot provide the variant.
	Skip string
	// NotAsked lists the fragments' settings this kernel version is not
	// asked for (kbuild.ForVersion), each with its reason.
	NotAsked []string
	// Run is what runner.Env.Run takes. Expand fills in the run parameters
	// (scenario, agent, accelerator, limits).
	Run runner.Cell
}

// CellName names the cell of variant v on arch a.
func CellName(a arch.Arch, v Variant) string { return string(a.Name) + "-" + v.Name }

// Resolve decides whether arch a can provide variant v in tree t, and returns
// the cell either way: runnable, or with Skip saying why not. The error is for
// the harness's own mistakes (a missing or malformed fragment, a base or arch
// fragment this kernel cannot take), which no cell should hide as a skip.
//
// Skips come from, in order: the arch row's features; symbols the variant's
// fragments ask for that this kernel lacks; and symbols (the variant's
// Selectable, then every setting in its fragments) that the arch's own
// Kconfig makes impossible: a dependency nothing selects on this arch, or a
// negated one the arch always selects.
func Resolve(a arch.Arch, v Variant, t *Tree) (Cell, error) {
	return ResolveWith(a, v, t, kbuild.CompilerHost)
}

// ResolveWith is Resolve for a kernel built by the toolchain tc: whether
// the compiler is clang or gcc decides some of Kconfig's answers (arm64
// selects CALL_OPS under -Os only with clang). The cell's name and run
// carry tc.
func ResolveWith(a arch.Arch, v Variant, t *Tree, tc kbuild.Compiler) (Cell, error) {
	frags := append([]string{"base", a.Fragment()}, v.Fragments...)
	name := CellName(a, v) + runner.AxesSuffix(tc, "")
	c := Cell{
		Name: name, Arch: a, Variant: v,
		// The Kconfig reading above cannot see compiler probes (ppc64le's
		// -fpatchable-function-entry check, riscv64's
		// -fmin-function-alignment, which gcc 12 lacks, say): what configure
		// then refuses is a skip with the verifier's reason too.
		Run: runner.Cell{Name: name, Arch: a, Fragments: frags, Preempt: v.Preempt, SkipUnconfigurable: true, Toolchain: tc},
	}
	for _, f := range v.Needs {
		if !a.Has(f) {
			c.Skip = fmt.Sprintf("%s has no %s (%s): harness/arch lists only %s for it", a.Name, featureSymbol[f], f, featureList(a))
			return c, nil
		}
	}
	loaded, left, err := kbuild.LoadForVersion(t.KconfigDir, frags, t.Version)
	if err != nil {
		return Cell{}, fmt.Errorf("variant %s on %s: %w", v.Name, a.Name, err)
	}
	for _, g := range left {
		c.NotAsked = append(c.NotAsked, g.String())
	}
	settings := kbuild.Merge(loaded)
	own := func(s kbuild.Setting) bool {
		for _, f := range v.Fragments {
			if strings.HasPrefix(s.Origin, f+":") {
				return true
			}
		}
		return false
	}
	for _, s := range settings {
		if _, ok := t.Index[s.Symbol]; ok {
			continue
		}
		if !own(s) {
			return Cell{}, fmt.Errorf("variant %s on %s: %s asks for CONFIG_%s, which Linux %s does not define: fix the fragment for this kernel, or use a kernel that has it", v.Name, a.Name, s.Origin, s.Symbol, t.Version)
		}
		c.Skip = fmt.Sprintf("Linux %s has no CONFIG_%s (asked by %s)", t.Version, s.Symbol, s.Origin)
		return c, nil
	}
	if err := kbuild.Precheck(settings, t.Index); err != nil {
		return Cell{}, fmt.Errorf("variant %s on %s: %w", v.Name, a.Name, err)
	}
	kc, err := t.Arch(a)
	if err != nil {
		return Cell{}, err
	}
	for _, want := range requirements(v, settings, own) {
		if reason := t.impossible(a, tc, kc, settings, want); reason != "" {
			c.Skip = reason
			return c, nil
		}
	}
	return c, nil
}

// requirements lists what Resolve checks: Selectable (as y), then the
// variant's own bool settings, each symbol once.
func requirements(v Variant, settings []kbuild.Setting, own func(kbuild.Setting) bool) []kbuild.Setting {
	var out []kbuild.Setting
	seen := map[string]bool{}
	for _, s := range v.Selectable {
		if !seen[s] {
			seen[s] = true
			out = append(out, kbuild.Setting{Symbol: s, Value: "y", Origin: "variant " + v.Name})
		}
	}
	for _, s := range settings {
		if !own(s) || seen[s.Symbol] || (s.Value != "y" && s.Value != "m" && s.Value != "n") {
			continue
		}
		seen[s.Symbol] = true
		out = append(out, s)
	}
	return out
}

// impossible returns why want cannot hold on a in this tree, or "".
func (t *Tree) impossible(a arch.Arch, tc kbuild.Compiler, kc *kbuild.ArchKconfig, settings []kbuild.Setting, want kbuild.Setting) string {
	if _, ok := kc.Symbols[want.Symbol]; !ok {
		if sym, ok := t.Index[want.Symbol]; ok {
			return fmt.Sprintf("%s does not exist for %s in Linux %s: only other architectures' Kconfig files define it (e.g. %s)", want.Symbol, a.Name, t.Version, sym.Where)
		}
		return fmt.Sprintf("Linux %s has no %s", t.Version, want.Symbol)
	}
	e := newEvaluator(kc, string(a.Name), append(toolchain(a, tc), settings...), want.Symbol)
	if want.Value == "n" {
		if on, why := e.forcedOn(want.Symbol); on {
			return fmt.Sprintf("%s cannot be turned off on %s in Linux %s (%s asks): %s", want.Symbol, a.Name, t.Version, want.Origin, why)
		}
		return ""
	}
	if ok, why := e.possible(want.Symbol); !ok {
		return fmt.Sprintf("%s is not selectable on %s in Linux %s: %s", want.Symbol, a.Name, t.Version, why)
	}
	return ""
}

// toolchain states the compiler tc builds a with (the arch row's for
// host), which kconfig would otherwise learn from a compiler probe
// (CC_IS_CLANG is a $(success,...) macro): arm64 selects CALL_OPS under
// -Os only with clang.
func toolchain(a arch.Arch, tc kbuild.Compiler) []kbuild.Setting {
	clang, gcc := "n", "y"
	origin := "harness/arch (gcc build)"
	if !tc.IsHost() {
		origin = "--toolchain " + string(tc)
	}
	if tc.Clang(a) {
		clang, gcc = "y", "n"
		if tc.IsHost() {
			origin = "harness/arch (LLVM=" + a.LLVM + ")"
		}
	}
	return []kbuild.Setting{
		{Symbol: "CC_IS_CLANG", Value: clang, Origin: origin},
		{Symbol: "CC_IS_GCC", Value: gcc, Origin: origin},
	}
}

func featureList(a arch.Arch) string {
	if len(a.Features) == 0 {
		return "no ftrace features"
	}
	s := make([]string, len(a.Features))
	for i, f := range a.Features {
		s[i] = string(f)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}
