package qemu

import (
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/harness/arch"
)

func TestAccelCaveat(t *testing.T) {
	x, err := arch.Lookup("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	r, err := arch.Lookup("riscv64")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		a      arch.Arch
		accel  Accel
		v      int
		unsafe bool
	}{
		{"x86_64 tcg-multi on 7.2", x, AccelTCGMulti, 702, true},
		{"x86_64 tcg-multi on 7.0", x, AccelTCGMulti, 700, true},
		{"x86_64 tcg-multi on 11.1", x, AccelTCGMulti, 1101, false},
		{"x86_64 tcg-multi on 8.0", x, AccelTCGMulti, 800, false},
		{"x86_64 tcg-single on 7.2", x, AccelTCGSingle, 702, false},
		{"riscv64 tcg-multi on 7.2 (not measured unsafe)", r, AccelTCGMulti, 702, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AccelCaveat(tc.a, tc.accel, tc.v)
			if (got != "") != tc.unsafe {
				t.Errorf("AccelCaveat = %q, want unsafe %v", got, tc.unsafe)
			}
			if tc.unsafe && !strings.Contains(got, "int3") {
				t.Errorf("AccelCaveat = %q: does not say what was measured", got)
			}
		})
	}
}

// auto's TCG mode follows the QEMU version: multi from 11.1, single before.
func TestTCGFor(t *testing.T) {
	for _, tt := range []struct {
		v    int
		want Accel
	}{{702, AccelTCGSingle}, {1100, AccelTCGSingle}, {1101, AccelTCGMulti}, {1200, AccelTCGMulti}} {
		if got, why := TCGFor(tt.v); got != tt.want || (got == AccelTCGMulti) != (why != "") {
			t.Errorf("TCGFor(%d) = %s, %q; want %s", tt.v, got, why, tt.want)
		}
	}
}
