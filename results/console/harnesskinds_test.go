package console

import "testing"

// TestKernelCausedCrash: only a Read whose count exceeds its buffer, in
// a goroutine that slices it, is the kernel's; any other runtime panic
// of the agent stays the harness's bug.
func TestKernelCausedCrash(t *testing.T) {
	for _, tc := range []struct {
		name, report string
		kernel       bool
	}{
		{"io.Copy of a pipe", "panic: runtime error: slice bounds out of range [:9167502761678455363] with capacity 32768\n\ngoroutine 19 [running]:\nio.copyBuffer({0xaaad20, 0xab84d7b6240}, {0xaaa840, 0xab84d7a8220}, {0x0, 0x0, 0x0})\n\tio/io.go:431 +0x288", true},
		{"bufio fill", "panic: runtime error: slice bounds out of range [:70000] with capacity 4096\n\ngoroutine 7 [running]:\nbufio.(*Reader).fill(0xc000123)\n\tbufio/bufio.go:113 +0x1", true},
		{"in bounds", "panic: runtime error: slice bounds out of range [:10] with capacity 32768\n\ngoroutine 19 [running]:\nio.copyBuffer({0xaaad20})", false},
		{"the agent's own slicing", "panic: runtime error: slice bounds out of range [:70000] with capacity 4096\n\ngoroutine 1 [running]:\nmain.(*raceAgent).inject(0xc0001)\n\tstress/agent/race.go:400 +0x1", false},
		{"another panic", "fatal error: concurrent map writes\n\ngoroutine 5 [running]:\nio.copyBuffer({0x1})", false},
	} {
		if _, got := kernelCausedCrash(tc.report); got != tc.kernel {
			t.Errorf("%s: kernel's = %v, want %v", tc.name, got, tc.kernel)
		}
	}
	if KindBadSyscallReturn.HarnessCaused() || !KindAgentCrash.HarnessCaused() {
		t.Error("a bad syscall return is the kernel's finding; an agent crash the harness's")
	}
}
