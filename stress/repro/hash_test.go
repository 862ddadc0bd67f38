package repro

import (
	"testing"
)

// The two record addresses of the x86_64 7.3.4 boot that reproduced
// docs/findings.md 9: the kernel's lookup of call_write's direct call
// visited fth_deliver_seq's entry, so both are in one bucket of four.
func TestHashBucket(t *testing.T) {
	for _, tc := range []struct {
		ip   uint64
		bits int
		want uint64
	}{
		{0xffffffffa00001b0, 2, 2}, // call_write [fth_target]
		{0xffffffffa0003ff0, 2, 2}, // fth_deliver_seq [fth_deliver]
		{0xffffffffa0003ff0, 0, 0}, // one bucket: size_bits 0
		{1, 64, goldenRatio64},
	} {
		if got := hashBucket(tc.ip, tc.bits); got != tc.want {
			t.Errorf("hashBucket(%#x, %d) = %d, want %d", tc.ip, tc.bits, got, tc.want)
		}
	}
}
