package gdbstub

import "testing"

func TestEscapeRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", "a#b$c}d*e", "}}}", ""} {
		if got := unescape([]byte(escape(s))); got != s {
			t.Errorf("unescape(escape(%q)) = %q", s, got)
		}
	}
	// Run-length encoding: "0* " is '0' repeated 3 more times (' ' is 32,
	// 32-29 = 3).
	if got := unescape([]byte("a0* ")); got != "a0000" {
		t.Errorf("RLE: got %q, want a0000", got)
	}
}
