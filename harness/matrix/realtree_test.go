package matrix

import (
	"os"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
)

// realTree opens the kernel tree `make deps` unpacks (or $KERNEL_SRC) with the
// repository's own fragments, or skips: it only reads Kconfig files, so it
// runs in -short mode too, wherever the tree exists.
func realTree(t *testing.T) *Tree {
	t.Helper()
	src := os.Getenv("KERNEL_SRC")
	if src == "" {
		src = "/var/cache/fth/src/linux-source-7.3"
	}
	if _, err := os.Stat(src + "/Kconfig"); err != nil {
		t.Skipf("no kernel tree at %s (make deps, or set KERNEL_SRC)", src)
	}
	tr, err := OpenTree(src, "../../kconfigs")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Version != "7.3.4" {
		t.Skipf("expectations are for Linux 7.3.4, the tree is %s", tr.Version)
	}
	return tr
}

// TestBuiltinsOnRealTree pins, for every arch and built-in variant, what
// Linux 7.3.4 allows, as measured with merge_config.sh on allnoconfig
// (testdata/merge_config-7.3.4.txt). The one thing merge_config refuses that Resolve
// cannot see is ppc64le's direct calls with Debian 12's gcc 12: that is a
// compiler probe ($(success,...)), not the tree, and fails at configure time.
func TestBuiltinsOnRealTree(t *testing.T) {
	tr := realTree(t)
	skips := map[string]string{
		"x86_64-call-ops-full":     "x86_64 has no DYNAMIC_FTRACE_WITH_CALL_OPS",
		"x86_64-no-call-ops-full":  "x86_64 has no DYNAMIC_FTRACE_WITH_CALL_OPS",
		"x86_64-none":              "PREEMPT_NONE is not selectable on x86_64 in Linux 7.3.4: it depends on ARCH_NO_PREEMPT",
		"x86_64-voluntary":         "X86 selects ARCH_HAS_PREEMPT_LAZY",
		"arm64-none":               "nothing selects ARCH_NO_PREEMPT for arm64",
		"arm64-voluntary":          "ARM64 selects ARCH_HAS_PREEMPT_LAZY",
		"riscv64-no-call-ops-full": "RISCV selects HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS only if HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS",
		"riscv64-none":             "nothing selects ARCH_NO_PREEMPT for riscv64",
		"riscv64-voluntary":        "RISCV selects ARCH_HAS_PREEMPT_LAZY",
		"ppc64le-no-call-ops-full": "PPC selects HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS only if HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS",
		"ppc64le-rt":               "nothing selects ARCH_SUPPORTS_RT for ppc64le",
		"ppc64le-none":             "nothing selects ARCH_NO_PREEMPT for ppc64le",
		"ppc64le-voluntary":        "PPC selects ARCH_HAS_PREEMPT_LAZY",
	}
	for _, a := range arch.All() {
		for _, v := range Builtins() {
			c, err := Resolve(a, v, tr)
			if err != nil {
				t.Errorf("%s-%s: %v", a.Name, v.Name, err)
				continue
			}
			want, skip := skips[c.Name]
			switch {
			case skip && !strings.Contains(c.Skip, want):
				t.Errorf("%s: skip reason %q lacks %q", c.Name, c.Skip, want)
			case !skip && c.Skip != "":
				t.Errorf("%s: skipped, but merge_config builds it: %s", c.Name, c.Skip)
			}
		}
	}
}

// TestNoFalseSkipsOnRealTree judges every setting of every fragment the way
// Resolve judges a variant's own: none that merge_config honours may come out
// impossible. This is what keeps the evaluator's "definitely no" honest.
func TestNoFalseSkipsOnRealTree(t *testing.T) {
	tr := realTree(t)
	// Settings merge_config refuses in 7.3.4 (the variants that ask for them
	// are skips above), and ppc64le's compiler-probe failure.
	refused := map[string]bool{
		"x86_64 DYNAMIC_FTRACE_WITH_CALL_OPS":  true,
		"riscv64 DYNAMIC_FTRACE_WITH_CALL_OPS": true, "riscv64 DYNAMIC_FTRACE_WITH_DIRECT_CALLS": true,
		"ppc64le DYNAMIC_FTRACE_WITH_DIRECT_CALLS": true, "ppc64le PREEMPT_RT": true,
	}
	for _, a := range arch.All() {
		kc, err := tr.Arch(a)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range Builtins() {
			loaded, err := kbuild.LoadFragments(tr.KconfigDir, append([]string{"base", a.Fragment()}, v.Fragments...))
			if err != nil {
				t.Fatal(err)
			}
			settings := kbuild.Merge(loaded)
			for _, s := range settings {
				if refused[string(a.Name)+" "+s.Symbol] || s.Symbol == "PREEMPT_NONE" || s.Symbol == "PREEMPT_VOLUNTARY" {
					continue
				}
				e := newEvaluator(kc, string(a.Name), append(toolchain(a, kbuild.CompilerHost), settings...), s.Symbol)
				switch s.Value {
				case "y", "m":
					if ok, why := e.possible(s.Symbol); !ok {
						t.Errorf("%s %s: %s=%s judged impossible: %s", a.Name, v.Name, s.Symbol, s.Value, why)
					}
				case "n":
					if on, why := e.forcedOn(s.Symbol); on {
						t.Errorf("%s %s: %s=n judged impossible: %s", a.Name, v.Name, s.Symbol, why)
					}
				}
			}
		}
	}
}
