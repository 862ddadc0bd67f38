package main

import (
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// The window list names each decoded window's instructions, and the
// window kinds the arch has none of, each with its reason.
func TestPrintWindows(t *testing.T) {
	r := results.Result{Windows: []event.RaceWindow{
		{Target: "trampoline", Symbol: "bpf_trampoline_1", Addr: "0x1000", Arch: "ppc64le", Actions: []string{"replace"},
			Insns: []event.WindowInsn{{Off: 0, Len: 4, Asm: "mflr r0"}, {Off: 4, Len: 4, Asm: "blr"}}},
	}}
	var b strings.Builder
	printWindows(&b, r)
	for _, want := range []string{"trampoline (bpf_trampoline_1 at 0x1000, ppc64le", "2 instructions × 1 action(s)", "+0x4   blr", "replace is the direct-modify window",
		"not on ppc64le:", "opstramp: racetarget=opstramp needs x86's", "callsite: racetarget=callsite needs a two-instruction callsite", "out-of-line stub", "int3: racetarget=int3 needs x86's INT3"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	r.Windows[0].Arch = "amd64"
	printWindows(&b, r)
	if !strings.Contains(b.String(), "callsite: ") || strings.Contains(b.String(), "int3: ") || strings.Contains(b.String(), "opstramp: ") {
		t.Errorf("amd64 lacks only the callsite:\n%s", b.String())
	}
}
