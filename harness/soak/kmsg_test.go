package soak

import "testing"

func TestParseKmsg(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		line string
		seq  uint64
	}{
		{"6,1234,5678901,-;Linux version 7.3.4 (fth@fth)", true, "[    5.678901] Linux version 7.3.4 (fth@fth)", 1234},
		{"0,77,120000001,c,caller=T1;Kernel panic - not syncing: sysrq triggered crash", true, "[  120.000001] Kernel panic - not syncing: sysrq triggered crash", 77},
		{`4,9,1,-;RIP: 0010:\x09up_read+0x1/0x40`, true, "[    0.000001] RIP: 0010:\tup_read+0x1/0x40", 9},
		{" SUBSYSTEM=pci", false, "", 0},
		{"garbage", false, "", 0},
		{"6,x,1,-;text", false, "", 0},
		{`6,1,1,-;ends with \x`, true, `[    0.000001] ends with \x`, 1},
	}
	for _, tt := range tests {
		r, ok := parseKmsg(tt.in)
		if ok != tt.ok {
			t.Errorf("parseKmsg(%q) ok = %v", tt.in, ok)
			continue
		}
		if ok && (r.Line() != tt.line || r.Seq != tt.seq) {
			t.Errorf("parseKmsg(%q) = %q seq %d, want %q seq %d", tt.in, r.Line(), r.Seq, tt.line, tt.seq)
		}
	}
}
