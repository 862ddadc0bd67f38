package qemu

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/digitalocean/go-qemu/qmp"

	"github.com/ftrace-harness/fth/results/regs"
)

// stackWords is how many words of each vCPU's stack CPUState saves: enough
// for the return addresses of a few frames, which is what tells a hung
// loop or a runaway recursion apart when the console said nothing.
const stackWords = 64

// pageSize is the smallest page of every arch fth boots.
const pageSize = 4096

// stackPointers reads each vCPU's stack pointer from an `info registers -a`
// dump, by CPU index, in every arch's QEMU format (regs.QEMUSP): x86
// "RSP=…", arm64 " SP=…", riscv "x2/sp …", powerpc r1 of the "GPR00" row.
func stackPointers(dump string) map[int]uint64 {
	sps := map[int]uint64{}
	cpu := -1
	for _, line := range strings.Split(dump, "\n") {
		if name, ok := regs.DumpCPU(line); ok {
			if c, err := strconv.Atoi(strings.TrimPrefix(name, "CPU#")); err == nil {
				cpu = c
			}
			continue
		}
		if _, seen := sps[cpu]; cpu < 0 || seen {
			continue
		}
		val, _ := regs.QEMUSP(line)
		if val == "" {
			continue
		}
		if sp, err := strconv.ParseUint(val, 16, 64); err == nil && sp != 0 {
			sps[cpu] = sp
		}
	}
	return sps
}

// stacks saves stackWords words from each vCPU's stack pointer, read through
// that vCPU's own page tables (QMP memsave with cpu-index), and formats them
// as registers.txt's stack sections (regs.StackHeader, regs.StackWord),
// lowest address first.
// A stack it cannot read gets a line saying why: a wild stack pointer is
// itself a finding.
func (vm *VM) stacks(ctx context.Context, dump string) string {
	sps := stackPointers(dump)
	cpus := make([]int, 0, len(sps))
	for c := range sps {
		cpus = append(cpus, c)
	}
	slices.Sort(cpus)
	var b strings.Builder
	for _, c := range cpus {
		sp := sps[c]
		fmt.Fprintf(&b, "\n%s\n", regs.StackHeader(c, sp))
		words, err := vm.readStack(ctx, c, sp)
		if err != nil {
			fmt.Fprintf(&b, "  unreadable: %v\n", err)
			continue
		}
		for j, w := range words {
			fmt.Fprintln(&b, regs.StackWord(j*8, w))
		}
	}
	return b.String()
}

func (vm *VM) readStack(ctx context.Context, cpu int, sp uint64) ([]uint64, error) {
	path := filepath.Join(vm.cfg.SocketDir, fmt.Sprintf("stack%d.bin", cpu))
	defer os.Remove(path)
	memsave := func(size uint64) error {
		// QAPI's val is an int64: a kernel address above 2^63 must go as
		// its negative two's complement, which QEMU casts back.
		_, err := vm.run(ctx, qmp.Command{Execute: "memsave", Args: map[string]any{
			"val": int64(sp), "size": size, "filename": path, "cpu-index": cpu,
		}})
		return err
	}
	// memsave fails whole if any page of the range is unmapped: a stack
	// near its top has a guard page or nothing above it, so what is left
	// of sp's own page is read instead.
	err := memsave(stackWords * 8)
	if rest := pageSize - sp%pageSize; err != nil && rest < stackWords*8 {
		err = memsave(rest)
	}
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Every arch fth boots is little-endian (ppc64le included).
	words := make([]uint64, len(b)/8)
	for j := range words {
		words[j] = binary.LittleEndian.Uint64(b[j*8:])
	}
	return words, nil
}
