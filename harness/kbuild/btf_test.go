package kbuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// The first row is what riscv64 with clang 21 and pahole 1.30 gave Linux
// 7.3.4 (.data..percpu, read from that vmlinux): kprobe_ctlblk merged onto
// current_kprobe. The kernel printed "BPF: Invalid offset" and loaded no
// fentry program.
func TestCheckBTF(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	blk := &btf.Struct{Name: "kprobe_ctlblk", Size: 32}
	type v struct {
		name      string
		typ       btf.Type
		off, size uint32
	}
	tests := []struct {
		name    string
		size    uint32
		vars    []v
		wantErr string
	}{
		{"merged per-CPU variables", 85400, []v{
			{"irq_stack_ptr", u64, 112, 8}, {"current_kprobe", u64, 120, 8},
			{"kprobe_ctlblk", blk, 120, 32}, {"misaligned_access_speed", u64, 160, 8},
		}, "kprobe_ctlblk at offset 120 overlaps current_kprobe, which ends at 128"},
		{"sound section", 85400, []v{
			{"irq_stack_ptr", u64, 112, 8}, {"current_kprobe", u64, 120, 8},
			{"kprobe_ctlblk", blk, 128, 32}, {"misaligned_access_speed", u64, 160, 8},
		}, ""},
		{"past the end", 64, []v{{"current_kprobe", u64, 64, 8}}, "past the section's 64 bytes"},
		{"runs over the end", 64, []v{{"kprobe_ctlblk", blk, 40, 32}}, "ends past the section's 64 bytes"},
		{"empty variable", 64, []v{{"current_kprobe", u64, 0, 0}}, "has size 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &btf.Datasec{Name: ".data..percpu", Size: tt.size}
			for _, x := range tt.vars {
				ds.Vars = append(ds.Vars, btf.VarSecinfo{
					Type: &btf.Var{Name: x.name, Type: x.typ, Linkage: btf.GlobalVar}, Offset: x.off, Size: x.size,
				})
			}
			// Through the real reader: raw BTF, as pahole's section holds it.
			b, err := btf.NewBuilder([]btf.Type{ds}, nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := b.Marshal(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "vmlinux.btf")
			if err := os.WriteFile(path, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			err = CheckBTF(path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckBTF: %v, want nil", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrUnusableBTF) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckBTF: %v, want ErrUnusableBTF saying %q", err, tt.wantErr)
			}
		})
	}
}

// A kernel built without BTF has nothing to check.
func TestCheckBTFWithoutBTF(t *testing.T) {
	if err := CheckBTF("/proc/self/exe"); err != nil {
		t.Fatalf("CheckBTF on an ELF without .BTF: %v", err)
	}
}
