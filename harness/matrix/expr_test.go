package matrix

import (
	"testing"

	"github.com/ftrace-harness/fth/harness/kbuild"
)

func TestParseExpr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"A", "A"},
		{"!A && (B || C)", "!A && (B || C)"},
		{"(DYNAMIC_FTRACE_WITH_ARGS && !CFI && (CC_IS_CLANG || !CC_OPTIMIZE_FOR_SIZE))", "DYNAMIC_FTRACE_WITH_ARGS && !CFI && (CC_IS_CLANG || !CC_OPTIMIZE_FOR_SIZE)"},
		{"SERIAL_AMBA_PL011=y", "SERIAL_AMBA_PL011 = y"},
		{`"$(ARCH)" != "i386"`, `"$(ARCH)" != "i386"`},
		{"$(cc-option,-fpatchable-function-entry=2)", "$(cc-option,-fpatchable-function-entry=2)"},
		{"AS_IS_LLVM && AS_VERSION < 180000", "AS_IS_LLVM && AS_VERSION < 180000"},
		{"!(A || B)", "!(A || B)"},
		// Not Kconfig: kept whole as an opaque (maybe) expression.
		{"A &", "A &"},
		{"(A", "(A"},
	}
	for _, tt := range tests {
		if got := parseExpr(tt.in).String(); got != tt.want {
			t.Errorf("parseExpr(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestEval(t *testing.T) {
	kc := &kbuild.ArchKconfig{SrcArch: "x", Symbols: map[string]*kbuild.ArchSymbol{
		"ON":  {Name: "ON"},
		"OFF": {Name: "OFF"},
		// A prompt nobody set: a fragment could, so it is maybe.
		"USER": {Name: "USER", Defs: []kbuild.SymbolDef{{Type: "bool", Prompt: true}}},
		// Promptless default y on ON: yes.
		"DEF": {Name: "DEF", Defs: []kbuild.SymbolDef{{Type: "bool", DependsOn: []kbuild.Cond{{Expr: "ON"}}, Defaults: []kbuild.Default{{Value: "y"}}}}},
		// Selected by ON, unless OFF.
		"SEL": {Name: "SEL", Defs: []kbuild.SymbolDef{{Type: "bool"}}, SelectedBy: []kbuild.Select{{From: "ON", To: "SEL", If: "!OFF"}}},
		// A compiler probe.
		"CC": {Name: "CC", Defs: []kbuild.SymbolDef{{Type: "bool", Defaults: []kbuild.Default{{Value: "$(success,true)"}}}}},
	}}
	e := newEvaluator(kc, "x", []kbuild.Setting{{Symbol: "ON", Value: "y"}, {Symbol: "OFF", Value: "n"}}, "")
	tests := []struct {
		expr string
		want tri
	}{
		{"ON", yes}, {"OFF", no}, {"UNDEFINED", no}, {"USER", maybe}, {"DEF", yes}, {"SEL", yes}, {"CC", maybe},
		{"!OFF && ON", yes}, {"OFF || USER", maybe}, {"OFF && USER", no}, {"ON || USER", yes},
		{"ON=y", yes}, {"ON!=y", no}, {"OFF=n", yes}, {`ON = "y"`, yes}, {"ON=m", maybe},
		{"GCC_VERSION >= 110100", maybe}, {"$(cc-option,-x)", maybe}, {"y", yes}, {"n", no},
	}
	for _, tt := range tests {
		if got := e.expr(tt.expr); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// A symbol that selects itself back (through another) must not recurse
// forever, and must not come out "no".
func TestEvalCycle(t *testing.T) {
	kc := &kbuild.ArchKconfig{Symbols: map[string]*kbuild.ArchSymbol{
		"A": {Name: "A", Defs: []kbuild.SymbolDef{{Type: "bool"}}, SelectedBy: []kbuild.Select{{From: "B", To: "A"}}},
		"B": {Name: "B", Defs: []kbuild.SymbolDef{{Type: "bool", DependsOn: []kbuild.Cond{{Expr: "A"}}, Defaults: []kbuild.Default{{Value: "y"}}}}},
	}}
	if got := newEvaluator(kc, "x", nil, "").val("A"); got == no {
		t.Errorf("cyclic A = %v", got)
	}
}
