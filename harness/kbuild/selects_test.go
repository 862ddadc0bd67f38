package kbuild

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree writes files (path -> content) under a temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, text := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The syntax the reader must get right, in the shapes Linux uses it.
var syntaxTree = map[string]string{
	"Kconfig": `mainmenu "Linux/$(ARCH) $(KERNELVERSION) Kernel Configuration"
source "init/Kconfig"
source "arch/$(SRCARCH)/Kconfig"
osource "not/there/Kconfig"
source "arch/$(HEADER_ARCH)/um/Kconfig"
`,
	"init/Kconfig": `config EXPERT
	bool "Configure standard kernel features (expert users)"
	help
	  select NOT_A_SELECT
	  depends on NOT_A_DEPENDENCY

	  Still help text after a blank line.

menu "General setup"
	depends on MENU_DEP

config IN_MENU
	bool "in a menu" if EXPERT
	default y if FOO # a comment
	imply SOMETHING

endmenu

choice
	prompt "Preemption Model"
	depends on CHOICE_DEP
	default B

config A
	bool "A"

config B
	bool "B"

endchoice

config AFTER_CHOICE
	def_bool y if !A
	rsource "sub/Kconfig"
source "arch/Kconfig"
`,
	"init/sub/Kconfig": `config FROM_RSOURCE
	bool
`,
	"arch/riscv/Kconfig": `config RISCV
	def_bool y
	select HAVE_X \
		if (IN_MENU && \
		    !EXPERT)
	select HAVE_Y
	select UNDEFINED_ANYWHERE

if IN_MENU
config INSIDE_IF
	bool
	depends on RISCV
endif
`,
	"arch/x86/Kconfig": `config X86
	def_bool y
	select HAVE_X
`,
	"arch/Kconfig": `config HAVE_X
	bool
config HAVE_Y
	bool
config WITH_HASH
	string "with a # inside quotes"
	default "a # b" # but a comment after them
`,
}

func TestReadArchKconfig(t *testing.T) {
	dir := writeTree(t, syntaxTree)
	kc, err := ReadArchKconfig(dir, "riscv")
	if err != nil {
		t.Fatal(err)
	}
	if kc.SrcArch != "riscv" {
		t.Errorf("SrcArch = %q", kc.SrcArch)
	}
	if _, ok := kc.Symbols["X86"]; ok {
		t.Error("read arch/x86 for ARCH=riscv")
	}
	if _, ok := kc.Symbols["NOT_A_SELECT"]; ok {
		t.Error("help text parsed as Kconfig")
	}
	expert := kc.Symbols["EXPERT"].Defs[0]
	if len(expert.Selects) != 0 || len(expert.DependsOn) != 0 || !expert.Prompt {
		t.Errorf("EXPERT = %+v: help text leaked in", expert)
	}

	inMenu := kc.Symbols["IN_MENU"].Defs[0]
	if !inMenu.Prompt || inMenu.PromptIf != "EXPERT" || inMenu.Where != "init/Kconfig:12" {
		t.Errorf("IN_MENU prompt: %+v", inMenu)
	}
	if want := []Cond{{Expr: "MENU_DEP", Where: "init/Kconfig:10"}}; !slices.Equal(inMenu.DependsOn, want) {
		t.Errorf("IN_MENU depends on %v, want the menu's %v", inMenu.DependsOn, want)
	}
	if want := []Default{{Value: "y", If: "FOO", Where: "init/Kconfig:14"}}; !slices.Equal(inMenu.Defaults, want) {
		t.Errorf("IN_MENU defaults %v, want %v (comment stripped)", inMenu.Defaults, want)
	}

	a := kc.Symbols["A"].Defs[0]
	if !a.InChoice || len(a.DependsOn) != 1 || a.DependsOn[0].Expr != "CHOICE_DEP" {
		t.Errorf("choice member A = %+v", a)
	}
	after := kc.Symbols["AFTER_CHOICE"].Defs[0]
	if after.InChoice || len(after.DependsOn) != 0 || after.Type != "bool" || !slices.Equal(after.Defaults, []Default{{Value: "y", If: "!A", Where: "init/Kconfig:33"}}) {
		t.Errorf("AFTER_CHOICE = %+v", after)
	}
	if d := kc.Symbols["WITH_HASH"].Defs[0]; !d.Prompt || len(d.Defaults) != 1 || d.Defaults[0].Value != `"a # b"` {
		t.Errorf("WITH_HASH = %+v", d)
	}
	if kc.Symbols["FROM_RSOURCE"] == nil {
		t.Error("rsource not followed relative to its file")
	}

	inside := kc.Symbols["INSIDE_IF"].Defs[0]
	if want := []Cond{{Expr: "IN_MENU", Where: "arch/riscv/Kconfig:9"}, {Expr: "RISCV", Where: "arch/riscv/Kconfig:12"}}; !slices.Equal(inside.DependsOn, want) {
		t.Errorf("INSIDE_IF depends on %v, want %v", inside.DependsOn, want)
	}

	// A select continued over three lines, recorded on both ends.
	want := Select{From: "RISCV", To: "HAVE_X", If: "(IN_MENU && !EXPERT)", Where: "arch/riscv/Kconfig:3"}
	if got := kc.Symbols["RISCV"].Defs[0].Selects[0]; got != want {
		t.Errorf("select = %+v, want %+v", got, want)
	}
	if got := kc.Symbols["HAVE_X"].SelectedBy; !slices.Equal(got, []Select{want}) {
		t.Errorf("HAVE_X selected by %+v: x86's select must not count for riscv", got)
	}
	if got := kc.Symbols["HAVE_Y"].SelectedBy; len(got) != 1 || got[0].If != "" {
		t.Errorf("HAVE_Y selected by %+v", got)
	}

	x86, err := ReadArchKconfig(dir, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if x86.SrcArch != "x86" || x86.Symbols["X86"] == nil || x86.Symbols["RISCV"] != nil {
		t.Errorf("ARCH=x86_64 read %s", x86.SrcArch)
	}
}

func TestReadArchKconfigErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		arch  string
		want  string
	}{
		{"no such arch", map[string]string{"Kconfig": "", "arch/x86/Kconfig": ""}, "sparc64", "does it support sparc64"},
		{"missing source", map[string]string{"Kconfig": `source "arch/$(SRCARCH)/Kconfig"` + "\n", "arch/x86/Kconfig": `source "gone/Kconfig"` + "\n"}, "x86_64",
			`arch/x86/Kconfig:1: source "gone/Kconfig"`},
		{"unclosed if", map[string]string{"Kconfig": "if FOO\nconfig A\n\tbool\n", "arch/x86/Kconfig": ""}, "x86_64", "if block not closed"},
		{"stray endmenu", map[string]string{"Kconfig": "if FOO\nendmenu\n", "arch/x86/Kconfig": ""}, "x86_64", "Kconfig:2: endmenu without a matching menu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadArchKconfig(writeTree(t, tt.files), tt.arch)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
	_, err := ReadArchKconfig(writeTree(t, map[string]string{"Kconfig": `source "nope"` + "\n", "arch/x86/Kconfig": ""}), "x86_64")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing source: %v does not wrap os.ErrNotExist", err)
	}
}

func TestCutIf(t *testing.T) {
	tests := []struct{ in, v, c string }{
		{"y", "y", ""},
		{"y if FOO", "y", "FOO"},
		{`"if" if A`, `"if"`, "A"},
		{"$(success,test x = if) if B", "$(success,test x = if)", "B"},
		{"ELFIF_SYM", "ELFIF_SYM", ""},
		{"X if (A || B)", "X", "(A || B)"},
	}
	for _, tt := range tests {
		if v, c := cutIf(tt.in); v != tt.v || c != tt.c {
			t.Errorf("cutIf(%q) = %q, %q; want %q, %q", tt.in, v, c, tt.v, tt.c)
		}
	}
}

func TestSrcArch(t *testing.T) {
	for in, want := range map[string]string{"x86_64": "x86", "i386": "x86", "arm64": "arm64", "riscv": "riscv", "powerpc": "powerpc", "sparc64": "sparc"} {
		if got := SrcArch(in); got != want {
			t.Errorf("SrcArch(%q) = %q, want %q", in, got, want)
		}
	}
}

// On the real tree (when `make deps` has unpacked it): the selects the
// variant matrix decides on.
func TestReadArchKconfigRealTree(t *testing.T) {
	src := os.Getenv("KERNEL_SRC")
	if src == "" {
		src = "/var/cache/fth/src/linux-source-7.3"
	}
	if _, err := os.Stat(filepath.Join(src, "Kconfig")); err != nil {
		t.Skipf("no kernel tree at %s", src)
	}
	riscv, err := ReadArchKconfig(src, "riscv")
	if err != nil {
		t.Fatal(err)
	}
	sel := riscv.Symbols["HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"].SelectedBy
	if len(sel) != 1 || sel[0].From != "RISCV" || sel[0].If != "HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS" {
		t.Errorf("riscv: HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS selected by %+v", sel)
	}
	if riscv.Symbols["ARM64"] != nil || riscv.Symbols["X86_64"] != nil {
		t.Error("riscv read other arches")
	}
	arm64, err := ReadArchKconfig(src, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	sel = arm64.Symbols["HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS"].SelectedBy
	if len(sel) != 1 || sel[0].If != "(DYNAMIC_FTRACE_WITH_ARGS && !CFI && (CC_IS_CLANG || !CC_OPTIMIZE_FOR_SIZE))" {
		t.Errorf("arm64: HAVE_DYNAMIC_FTRACE_WITH_CALL_OPS selected by %+v", sel)
	}
	if n := len(arm64.Symbols); n < 10000 {
		t.Errorf("only %d symbols for arm64", n)
	}
}
