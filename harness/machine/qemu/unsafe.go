package qemu

import (
	"fmt"

	"github.com/ftrace-harness/fth/harness/arch"
)

// unsafeAccel is one measured combination of QEMU version range, guest arch
// and accelerator whose verdicts cannot be trusted: the emulator, not the
// kernel, made the guest fail.
type unsafeAccel struct {
	// From and Before bound the QEMU versions (major*100+minor, Before
	// excluded) the measurement condemns.
	From, Before int
	Arch         arch.Name
	Accel        Accel
	// Why says what was measured, and where it is written up.
	Why string
}

// unsafeAccels is the table of combinations known to fail correct kernels.
var unsafeAccels = []unsafeAccel{
	{
		From: 700, Before: 800, Arch: arch.X86_64, Accel: AccelTCGMulti,
		Why: "QEMU 7.x's multi-threaded TCG gives a correct x86_64 kernel spurious `Oops: int3` during text patching " +
			"(4 of 5 attach storms with QEMU 7.2, 0 of 5 with 11.1, same kernel and seed: docs/tcg.md); use tcg-single, or --qemu 11.1",
	},
}

// AccelCaveat says why accel on QEMU version v (ProbeVersion's number) is
// unsafe for an a guest's verdicts, or "" when nothing is known against it.
func AccelCaveat(a arch.Arch, accel Accel, v int) string {
	for _, u := range unsafeAccels {
		if u.Arch == a.Name && u.Accel == accel && v >= u.From && v < u.Before {
			return fmt.Sprintf("unsafe: %s", u.Why)
		}
	}
	return ""
}
