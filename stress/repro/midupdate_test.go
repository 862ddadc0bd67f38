package repro

import "testing"

// A stack frame is in the window when its function is one of the calls
// bpf_trampoline_update() makes after the flags, whatever its offset.
func TestInMidUpdateWindow(t *testing.T) {
	for _, tt := range []struct {
		frame string
		want  bool
	}{
		{"arch_bpf_trampoline_size+0x72/0x90", true},
		{"update_ftrace_direct_mod+0x148/0x2e0", true},
		{"bpf_trampoline_update+0x1f0/0x4b0", false}, // the caller: anywhere in it, flags or not
		{"bpf_trampoline_get_progs+0x10/0x80", false},
		{"__mutex_lock.constprop.0+0x1a/0x300", false},
		{"update_ftrace_direct_mod_extra+0x1/0x2", false},
	} {
		if got := inMidUpdateWindow(tt.frame); got != tt.want {
			t.Errorf("inMidUpdateWindow(%q) = %v, want %v", tt.frame, got, tt.want)
		}
	}
}
