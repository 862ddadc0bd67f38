package qemu

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Real `info registers -a` dumps, taken by CPUState on hangs under QEMU 7.2
// (arm64's with the stack sections CPUState now appends, which must not be
// read as registers; its CPU#1 stack pointer is the top of an empty stack).
func TestStackPointers(t *testing.T) {
	tests := []struct {
		file string
		want map[int]uint64
	}{
		{"x86_64.txt", map[int]uint64{0: 0xff11000002657ed8, 1: 0xff1100000266feb0}},
		{"riscv64.txt", map[int]uint64{0: 0xffffffff80ffff30, 1: 0xffffaf80043ffec0}},
		{"arm64.txt", map[int]uint64{0: 0x0000267f96b3bf70, 1: 0xffff80008104c000}},
		// Both vCPUs in the double fault handler, on its stack in the CPU
		// entry area; only 6 words lie above that stack pointer in its page.
		{"x86_64-double-fault.txt", map[int]uint64{0: 0xfffffe000000afd0, 1: 0xfffffe0000045fd0}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "registers", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := stackPointers(string(b)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stackPointers = %x, want %x", got, tt.want)
			}
		})
	}
}

// powerpc's format, from QEMU's ppc_cpu_dump_state (no ppc64le dump was
// taken: its kernel was not rebuilt this session), and what must not be
// taken for a stack pointer.
func TestStackPointersFormats(t *testing.T) {
	tests := []struct {
		name, dump string
		want       map[int]uint64
	}{
		{"arm64", "CPU#0\nPC=ffff800080012340 X00=0000000000000000 X01=0000000000000001 X02=0\nX30=ffff8000800a0000  SP=ffff80008000bd90\nPSTATE=600003c5 -Z-- EL1h\n", map[int]uint64{0: 0xffff80008000bd90}},
		{"ppc64le", "CPU#1\nNIP c000000000012340   LR c000000000012300 CTR 0\nGPR00 c000000000012300 c000000002c4be20 c000000001f6a100 0000000000000001\nGPR04 0000000000000000 0 0 0\n", map[int]uint64{1: 0xc000000002c4be20}},
		{"no CPU header", "RSP=ffff888000000000\n", map[int]uint64{}},
		{"zero is no stack", "CPU#0\nRSP=0000000000000000\n", map[int]uint64{}},
		{"first value per CPU", "CPU#0\nRSP=0000000000001000\nRSP=0000000000002000\n", map[int]uint64{0: 0x1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stackPointers(tt.dump); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stackPointers = %x, want %x", got, tt.want)
			}
		})
	}
}
