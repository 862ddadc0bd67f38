package printk

import "testing"

func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		line                string
		ok                  bool
		stamp, caller, text string
	}{
		{"[   12.345678] BUG: x", true, "12.345678", "", "BUG: x"},
		{"[   12.345678][  T123] BUG: x", true, "12.345678", "T123", "BUG: x"},
		{"[    0.000000][    C1] hi", true, "0.000000", "C1", "hi"},
		// Junk a serial line put first: still this line's prefix.
		{"B[  4.5] BUG: y", true, "4.5", "", "BUG: y"},
		// A stamp quoted in a message is not a prefix.
		{`{"log":"[ 1.0] x"}`, false, "", "", `{"log":"[ 1.0] x"}`},
		{"no stamp here", false, "", "", "no stamp here"},
		{"[12.5]x", true, "12.5", "", "x"},
	} {
		p, ok := Split(tt.line)
		if ok != tt.ok || p.Stamp != tt.stamp || p.Caller != tt.caller || Text(tt.line) != tt.text {
			t.Errorf("Split(%q) = %+v, %v; Text %q; want %v %q %q %q", tt.line, p, ok, Text(tt.line), tt.ok, tt.stamp, tt.caller, tt.text)
		}
	}
}
