package matrix

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/wire/event"
)

// fixtureTree is the excerpt of Linux 7.3.4's Kconfig in testdata, with the
// test fragments beside it.
func fixtureTree(t *testing.T) *Tree {
	t.Helper()
	tr, err := OpenTree("testdata/linux-7.3.4", "testdata/kconfigs")
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustArch(t *testing.T, name string) arch.Arch {
	t.Helper()
	a, err := arch.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustVariant(t *testing.T, name string) Variant {
	t.Helper()
	v, err := Lookup(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		arch string
		want []string
	}{
		{"x86_64", []string{"direct-calls-full"}},
		{"arm64", []string{"call-ops-full", "no-call-ops-full"}},
		{"riscv64", []string{"call-ops-full"}},
		{"ppc64le", []string{"direct-calls-full"}},
	}
	for _, tt := range tests {
		if got := Defaults(mustArch(t, tt.arch)); !slices.Equal(got, tt.want) {
			t.Errorf("Defaults(%s) = %v, want %v", tt.arch, got, tt.want)
		}
	}
	// An arch without an entry falls back on its features.
	a := arch.Arch{Name: "s390x", Features: []arch.Feature{arch.CallOps, arch.DirectCalls}}
	if got := Defaults(a); !slices.Equal(got, []string{"call-ops-full"}) {
		t.Errorf("Defaults(new arch with CALL_OPS) = %v", got)
	}
	for _, a := range arch.All() {
		for _, n := range Defaults(a) {
			if _, err := Lookup(n, nil); err != nil {
				t.Errorf("%s default %q: %v", a.Name, n, err)
			}
		}
	}
}

func TestBuiltinsAreValid(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Builtins() {
		if seen[v.Name] {
			t.Errorf("variant %q twice", v.Name)
		}
		seen[v.Name] = true
		if v.Doc == "" || len(v.Fragments) == 0 {
			t.Errorf("variant %q lacks a doc or fragments", v.Name)
		}
		for _, f := range v.Fragments {
			if _, err := os.Stat(filepath.Join("..", "..", "kconfigs", f)); err != nil {
				t.Errorf("variant %q: fragment %s: %v", v.Name, f, err)
			}
		}
	}
}

// Every shipped fragment parses and opens with a comment saying why it exists.
func TestShippedFragmentsHaveHeaders(t *testing.T) {
	dir := filepath.Join("..", "..", "kconfigs")
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".md") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == kbuild.GatesFile {
			_, err := kbuild.LoadGates(dir)
			return err
		}
		if _, err := kbuild.LoadFragments(dir, []string{rel}); err != nil {
			t.Error(err)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(text), "# ") {
			t.Errorf("%s: no comment header saying why", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	tr := fixtureTree(t)
	tests := []struct {
		arch, variant string
		// skip holds substrings of the skip reason; nil means the cell runs.
		skip []string
	}{
		{"x86_64", "direct-calls-full", nil},
		{"x86_64", "call-ops-full", []string{"x86_64 has no DYNAMIC_FTRACE_WITH_CALL_OPS", "harness/arch lists only direct-calls"}},
		{"x86_64", "no-call-ops-full", []string{"x86_64 has no DYNAMIC_FTRACE_WITH_CALL_OPS"}},
		{"x86_64", "voluntary", []string{
			"PREEMPT_VOLUNTARY is not selectable on x86_64 in Linux 7.3.4",
			"depends on !ARCH_HAS_PREEMPT_LAZY (kernel/Kconfig.preempt:",
			"X86 selects ARCH_HAS_PREEMPT_LAZY (arch/x86/Kconfig:"}},
		{"x86_64", "lazy", nil},
		{"x86_64", "rt", nil},
		{"arm64", "call-ops-full", nil},
		{"arm64", "no-call-ops-full", nil},
		{"riscv64", "call-ops-full", nil},
		{"riscv64", "none", []string{
			"PREEMPT_NONE is not selectable on riscv64 in Linux 7.3.4: it depends on ARCH_NO_PREEMPT (kernel/Kconfig.preempt:25), and nothing selects ARCH_NO_PREEMPT for riscv64"}},
		{"riscv64", "voluntary", []string{"RISCV selects ARCH_HAS_PREEMPT_LAZY"}},
		{"riscv64", "no-call-ops-full", []string{
			"DYNAMIC_FTRACE_WITH_DIRECT_CALLS is not selectable on riscv64",
			"RISCV selects HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS only if HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS",
			"HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS must be off for DYNAMIC_FTRACE_WITH_CALL_OPS=n (ftrace/no-call-ops:4)"}},
		{"riscv64", "dynamic-lazy", nil},
		{"ppc64le", "rt", []string{"PREEMPT_RT is not selectable on ppc64le", "nothing selects ARCH_SUPPORTS_RT for ppc64le"}},
		{"ppc64le", "no-call-ops-full", []string{"PPC selects HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS only if HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS"}},
	}
	for _, tt := range tests {
		t.Run(tt.arch+"-"+tt.variant, func(t *testing.T) {
			a, v := mustArch(t, tt.arch), mustVariant(t, tt.variant)
			c, err := Resolve(a, v, tr)
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tt.arch+"-"+tt.variant || c.Run.Name != c.Name {
				t.Errorf("name %q / %q", c.Name, c.Run.Name)
			}
			if tt.skip == nil {
				if c.Skip != "" {
					t.Fatalf("skipped: %s", c.Skip)
				}
				want := append([]string{"base", "arch/" + tt.arch}, v.Fragments...)
				if !slices.Equal(c.Run.Fragments, want) || c.Run.Preempt != v.Preempt || c.Run.Arch.Name != a.Name {
					t.Errorf("run cell = %+v", c.Run)
				}
				return
			}
			for _, s := range tt.skip {
				if !strings.Contains(c.Skip, s) {
					t.Errorf("skip reason\n  %s\nlacks\n  %s", c.Skip, s)
				}
			}
		})
	}
}

// The arch feature check is only a shortcut: without it, the tree alone says
// x86 has no CALL_OPS.
func TestResolveKconfigAloneFindsNoCallOpsOnX86(t *testing.T) {
	v := Variant{Name: "mine", Fragments: []string{"ftrace/call-ops", "preempt/full"}, Preempt: "full"}
	c, err := Resolve(mustArch(t, "x86_64"), v, fixtureTree(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "DYNAMIC_FTRACE_WITH_CALL_OPS is not selectable on x86_64 in Linux 7.3.4: it depends on HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS"
	if !strings.Contains(c.Skip, want) || !strings.Contains(c.Skip, "nothing selects HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS for x86_64") {
		t.Errorf("skip = %q", c.Skip)
	}
}

func TestResolveCannotTurnOff(t *testing.T) {
	v := Variant{Name: "no-lazy-arch", Fragments: []string{"preempt/no-lazy-arch"}}
	c, err := Resolve(mustArch(t, "x86_64"), v, fixtureTree(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "ARCH_HAS_PREEMPT_LAZY cannot be turned off on x86_64 in Linux 7.3.4 (preempt/no-lazy-arch:2 asks): X86 selects ARCH_HAS_PREEMPT_LAZY (arch/x86/Kconfig:"
	if !strings.HasPrefix(c.Skip, want) {
		t.Errorf("skip = %q, want it to start %q", c.Skip, want)
	}
}

func TestResolveUnknownSymbolInVariantIsASkip(t *testing.T) {
	v := Variant{Name: "future", Fragments: []string{"ftrace/future"}}
	c, err := Resolve(mustArch(t, "x86_64"), v, fixtureTree(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := "Linux 7.3.4 has no CONFIG_NO_SUCH_SYMBOL_IN_7_3 (asked by ftrace/future:1)"; c.Skip != want {
		t.Errorf("skip = %q, want %q", c.Skip, want)
	}
}

func TestResolveHarnessMistakesAreErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("base", "CONFIG_NOT_IN_THIS_KERNEL=y\n")
	write("arch/x86_64", "CONFIG_64BIT=y\n")
	write("ok", "CONFIG_PREEMPT=y\n")
	write("typo", "CONFIG_PREEMPT=m\n")
	tr := fixtureTree(t)
	tr.KconfigDir = dir
	a := mustArch(t, "x86_64")
	tests := []struct {
		name string
		frag string
		want string
	}{
		{"missing fragment", "nope", `fragment "nope" not found`},
		{"base asks for an unknown symbol", "ok", "base:1 asks for CONFIG_NOT_IN_THIS_KERNEL, which Linux 7.3.4 does not define"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(a, Variant{Name: "v", Fragments: []string{tt.frag}}, tr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	write("base", "CONFIG_FTRACE=y\n")
	if _, err := Resolve(a, Variant{Name: "v", Fragments: []string{"typo"}}, tr); err == nil || !strings.Contains(err.Error(), "cannot be a module") {
		t.Errorf("a bool asked as m: err = %v", err)
	}
}

func TestExpandOrder(t *testing.T) {
	tr := fixtureTree(t)
	arches, err := ParseArches([]string{"riscv64", "x86_64", "riscv64"})
	if err != nil {
		t.Fatal(err)
	}
	custom := []Variant{{Name: "mine", Fragments: []string{"ftrace/direct-calls", "preempt/dynamic"}, Preempt: "lazy"}}
	spec := Spec{Arches: arches, Variants: []string{"none", DefaultVariants, "call-ops-full", "mine"}, Custom: custom, Params: DefaultParams()}
	spec.Params.Agent["n"] = "50"
	cells, err := Expand(spec, tr)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cells {
		got = append(got, c.Name)
		if o := c.Run.Agent.Options(); o.Scenario != event.ScenarioCampaign || c.Run.Agent.Given()["scenario"] != "campaign" || o.N != 50 || c.Run.CPUs != 2 || c.Run.Deadline == 0 {
			t.Errorf("%s: run parameters not filled in: %+v", c.Name, c.Run)
		}
	}
	want := []string{
		// riscv64's default QEMU is 11.1 (its arch row), and names say so.
		"riscv64-none-qemu-11.1", "riscv64-call-ops-full-qemu-11.1", "riscv64-mine-qemu-11.1",
		"x86_64-none", "x86_64-direct-calls-full", "x86_64-call-ops-full", "x86_64-mine",
	}
	if !slices.Equal(got, want) {
		t.Errorf("cells =\n  %v\nwant\n  %v", got, want)
	}
	// Every cell gets its own agent options: one cell's change must not leak.
	if cells[0].Run.Agent, err = cells[0].Run.Agent.With("n", "1"); err != nil {
		t.Fatal(err)
	}
	if cells[1].Run.Agent.Options().N != 50 || spec.Params.Agent["n"] != "50" {
		t.Error("cells share their agent options")
	}

	all := Spec{Variants: []string{"mine", AllVariants, DefaultVariants}, Custom: custom}.variantsFor(mustArch(t, "arm64"))
	wantAll := append([]string{"mine"}, variantNames(nil)...)
	if !slices.Equal(all, wantAll) {
		t.Errorf("mine,all,default on arm64 = %v, want %v", all, wantAll)
	}
}

func TestExpandScenarioReachesTheAgent(t *testing.T) {
	tr := fixtureTree(t)
	arches, err := ParseArches([]string{"x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		label     event.Scenario
		agentArg  string
		wantLabel event.Scenario
		wantAgent string
	}{
		{event.ScenarioChurn, "", event.ScenarioChurn, "churn"},      // the file says churn: the agent is told
		{event.ScenarioStorm, "bench", event.ScenarioBench, "bench"}, // --agent-arg scenario=bench: the label follows
		{event.ScenarioStorm, "", event.ScenarioStorm, ""},
	} {
		spec := Spec{Arches: arches, Variants: []string{DefaultVariants}, Params: DefaultParams()}
		spec.Params.Scenario = tt.label
		if tt.agentArg != "" {
			spec.Params.Agent["scenario"] = tt.agentArg
		}
		cells, err := Expand(spec, tr)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			if got := c.Run.Agent.Options().Scenario; got != tt.wantLabel || c.Run.Agent.Given()["scenario"] != tt.wantAgent {
				t.Errorf("%+v: runs %q, agent told %q, want %q %q", tt, got, c.Run.Agent.Given()["scenario"], tt.wantLabel, tt.wantAgent)
			}
		}
	}
}

// Toolchain and QEMU are axes: each arch × variant runs with every
// toolchain and each of those under every QEMU; a choice that is what host
// already is on the arch skips, naming the cell that runs it.
func TestExpandAxes(t *testing.T) {
	tr := fixtureTree(t)
	arches, err := ParseArches([]string{"x86_64", "riscv64"})
	if err != nil {
		t.Fatal(err)
	}
	tcs, err := ParseToolchains([]string{"host", "gcc-12", "clang-21", "gcc-12"})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := ParseQEMUs([]string{"host", " 11.1"})
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Arches: arches, Variants: []string{DefaultVariants}, Toolchains: tcs, QEMUs: qs, Params: DefaultParams()}
	cells, err := Expand(spec, tr)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name string
		tc   kbuild.Compiler
		q    qemu.Emulator
		skip string
	}
	want := []row{
		{"x86_64-direct-calls-full", "host", "host", ""},
		{"x86_64-direct-calls-full-qemu-11.1", "host", "11.1", ""},
		{"x86_64-direct-calls-full-gcc-12", "gcc-12", "host", "--toolchain gcc-12 is what host builds x86_64 with: the same kernel as cell x86_64-direct-calls-full"},
		{"x86_64-direct-calls-full-gcc-12-qemu-11.1", "gcc-12", "11.1", "the same kernel as cell x86_64-direct-calls-full-qemu-11.1"},
		{"x86_64-direct-calls-full-clang-21", "clang-21", "host", ""},
		{"x86_64-direct-calls-full-clang-21-qemu-11.1", "clang-21", "11.1", ""},
		// riscv64's host is clang 19: gcc-12 is a cell of its own, which
		// configuring decides (gcc 12 lacks -fmin-function-alignment).
		{"riscv64-call-ops-full", "host", "host", ""},
		{"riscv64-call-ops-full-qemu-11.1", "host", "11.1", ""},
		{"riscv64-call-ops-full-gcc-12", "gcc-12", "host", ""},
		{"riscv64-call-ops-full-gcc-12-qemu-11.1", "gcc-12", "11.1", ""},
		{"riscv64-call-ops-full-clang-21", "clang-21", "host", ""},
		{"riscv64-call-ops-full-clang-21-qemu-11.1", "clang-21", "11.1", ""},
	}
	if len(cells) != len(want) {
		var names []string
		for _, c := range cells {
			names = append(names, c.Name)
		}
		t.Fatalf("%d cells %v, want %d", len(cells), names, len(want))
	}
	for i, w := range want {
		c := cells[i]
		if c.Name != w.name || c.Run.Name != w.name || c.Run.Toolchain != w.tc || c.Run.QEMU != w.q || !strings.Contains(c.Skip, w.skip) || (w.skip == "") != (c.Skip == "") {
			t.Errorf("cell %d = %s (toolchain %q, qemu %q, skip %q), want %+v", i, c.Name, c.Run.Toolchain, c.Run.QEMU, c.Skip, w)
		}
		if c.Run.CPUs != 2 || c.Run.Agent.Options().N != 2000 || !c.Run.SkipUnconfigurable {
			t.Errorf("%s: run parameters not filled in: %+v", c.Name, c.Run)
		}
	}
	if !spec.NeedsRoot() {
		t.Error("NeedsRoot: false with gcc-14 and QEMU 11.1 on the axes")
	}
	x86 := DefaultSpec()
	x86.Arches = []arch.Arch{mustArch(t, "x86_64")}
	ppc := DefaultSpec()
	ppc.Arches = []arch.Arch{mustArch(t, "ppc64le")}
	if x86.NeedsRoot() || !ppc.NeedsRoot() {
		t.Errorf("NeedsRoot by default: x86_64 %v, ppc64le %v; want false, true (ppc64le's row asks for gcc-14)", x86.NeedsRoot(), ppc.NeedsRoot())
	}
	if _, err := ParseToolchains([]string{"gcc-13"}); !errors.Is(err, kbuild.ErrBadCompiler) {
		t.Errorf("gcc-13: %v", err)
	}
	if _, err := ParseQEMUs([]string{"9.0"}); !errors.Is(err, qemu.ErrBadEmulator) {
		t.Errorf("9.0: %v", err)
	}
}

// The compiler decides CC_IS_CLANG for the Kconfig reading: host follows
// the arch row, the others their own name.
func TestToolchainSettings(t *testing.T) {
	tests := []struct {
		arch  string
		tc    kbuild.Compiler
		clang string
	}{
		{"x86_64", kbuild.CompilerHost, "n"},
		{"x86_64", kbuild.Clang21, "y"},
		{"riscv64", kbuild.CompilerHost, "y"},
		{"riscv64", kbuild.GCC12, "n"},
		{"arm64", kbuild.GCC14, "n"},
	}
	for _, tt := range tests {
		s := toolchain(mustArch(t, tt.arch), tt.tc)
		if s[0].Symbol != "CC_IS_CLANG" || s[0].Value != tt.clang || s[1].Value == tt.clang {
			t.Errorf("%s %s: %+v, want CC_IS_CLANG=%s", tt.arch, tt.tc, s, tt.clang)
		}
	}
}

// default is each arch row's choice, resolved before the cell is named or
// recorded; named again explicitly (host on x86_64, gcc-14 on ppc64le) it
// is one cell, not two.
func TestExpandDefaultAxes(t *testing.T) {
	tr := fixtureTree(t)
	for _, tt := range []struct {
		arch string
		tcs  []string
		qs   []string
		want []string
	}{
		{"x86_64", []string{"default"}, []string{"default"}, []string{"x86_64-direct-calls-full"}},
		{"x86_64", []string{"default", "host"}, []string{"default", "host"}, []string{"x86_64-direct-calls-full"}},
		{"ppc64le", []string{"default"}, []string{"default"}, []string{"ppc64le-direct-calls-full-gcc-14"}},
		{"ppc64le", []string{"default", "gcc-14", "host"}, []string{"default", "11.1"}, []string{"ppc64le-direct-calls-full-gcc-14", "ppc64le-direct-calls-full-gcc-14-qemu-11.1", "ppc64le-direct-calls-full", "ppc64le-direct-calls-full-qemu-11.1"}},
	} {
		tcs, err := ParseToolchains(tt.tcs)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := ParseQEMUs(tt.qs)
		if err != nil {
			t.Fatal(err)
		}
		spec := Spec{Arches: []arch.Arch{mustArch(t, tt.arch)}, Variants: []string{DefaultVariants}, Toolchains: tcs, QEMUs: qs, Params: DefaultParams()}
		cells, err := Expand(spec, tr)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range cells {
			names = append(names, c.Name)
			if c.Run.Toolchain == kbuild.CompilerDefault || c.Run.QEMU == qemu.EmulatorDefault {
				t.Errorf("%s: toolchain %q, qemu %q: default not resolved", c.Name, c.Run.Toolchain, c.Run.QEMU)
			}
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("%s %v %v: cells %v, want %v", tt.arch, tt.tcs, tt.qs, names, tt.want)
		}
	}
}
