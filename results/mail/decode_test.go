package mail

import (
	"slices"
	"testing"

	"github.com/ftrace-harness/fth/results/symbolize"
)

// TestDecodedLinesOnceEach: the faulting address, printed as the WARNING
// line's site, the NIP line and the trace's first entry, is decoded once;
// a frame of the same function at another offset stays.
func TestDecodedLinesOnceEach(t *testing.T) {
	frames := []symbolize.Frame{
		{Ref: symbolize.Ref{Func: "lock_acquire", Offset: 0x32c, Size: 0x350}},
		{Ref: symbolize.Ref{Func: "lock_acquire", Offset: 0x32c, Size: 0x350}},
		{Ref: symbolize.Ref{Func: "lock_acquire", Offset: 0x328, Size: 0x350}},
		{Ref: symbolize.Ref{Func: "lock_acquire", Offset: 0x328, Size: 0x350, Unreliable: true}},
		{Ref: symbolize.Ref{Func: "__bpf_prog_enter_recur", Offset: 0xac, Size: 0x1b0}},
		{Ref: symbolize.Ref{Text: "bpf_trampoline_6442500402+0x70/0x1f0"}},
		{Ref: symbolize.Ref{Text: "bpf_trampoline_6442500402+0x70/0x1f0"}},
	}
	want := []string{
		"lock_acquire+0x32c/0x350",
		"lock_acquire+0x328/0x350",
		"__bpf_prog_enter_recur+0xac/0x1b0",
		"bpf_trampoline_6442500402+0x70/0x1f0",
		"bpf_trampoline_6442500402+0x70/0x1f0",
	}
	if got := decodedLines(frames); !slices.Equal(got, want) {
		t.Errorf("decodedLines =\n%q\nwant\n%q", got, want)
	}
}
