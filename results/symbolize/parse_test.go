package symbolize

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []Ref
	}{
		{
			name: "x86 RIP is the executing instruction",
			line: "[  192.571608] RIP: 0010:up_read+0x1/0xc0",
			want: []Ref{{Text: "up_read+0x1/0xc0", Func: "up_read", Offset: 1, Size: 0xc0, Register: true}},
		},
		{
			name: "x86 call-trace frame is a return address",
			line: "[  192.575168]  __do_sys_newuname+0x9a/0x110",
			want: []Ref{{Text: "__do_sys_newuname+0x9a/0x110", Func: "__do_sys_newuname", Offset: 0x9a, Size: 0x110, Return: true}},
		},
		{
			name: "unreliable frame with caller id",
			line: "[   12.000001][    T1]  ? kthread+0x1e/0x30",
			want: []Ref{{Text: "? kthread+0x1e/0x30", Func: "kthread", Offset: 0x1e, Size: 0x30, Return: true, Unreliable: true}},
		},
		{
			name: "old x86 frame pairs address and symbol",
			line: " [<ffffffff8145b513>] default_idle+0x23/0x150",
			want: []Ref{{Text: "default_idle+0x23/0x150", Func: "default_idle", Offset: 0x23, Size: 0x150, Addr: 0xffffffff8145b513, HasAddr: true, Return: true}},
		},
		{
			name: "bare address frame",
			line: "[    1.0] [<ffffffff8145b513>]",
			want: []Ref{{Text: "[<ffffffff8145b513>]", Addr: 0xffffffff8145b513, HasAddr: true, Return: true}},
		},
		{
			name: "module frame",
			line: "  my_func+0x10/0x20 [fth_test]",
			want: []Ref{{Text: "my_func+0x10/0x20 [fth_test]", Func: "my_func", Offset: 0x10, Size: 0x20, Module: "fth_test", Return: true}},
		},
		{
			name: "powerpc: stack pointer first, then the address",
			line: "[c000000002b7fc30] [c000000000d15c68] dump_stack_lvl+0x48/0x60 (unreliable)",
			want: []Ref{{Text: "dump_stack_lvl+0x48/0x60", Func: "dump_stack_lvl", Offset: 0x48, Size: 0x60, Addr: 0xc000000000d15c68, HasAddr: true, Return: true, Unreliable: true}},
		},
		{
			name: "powerpc NIP register",
			line: "NIP [c0000000002a1b2c] ftrace_bug+0x2c/0x3a0",
			want: []Ref{{Text: "ftrace_bug+0x2c/0x3a0", Func: "ftrace_bug", Offset: 0x2c, Size: 0x3a0, Addr: 0xc0000000002a1b2c, HasAddr: true, Register: true}},
		},
		{
			name: "arm64 link register is a return address",
			line: "lr : ftrace_modify_code+0x64/0xa0",
			want: []Ref{{Text: "ftrace_modify_code+0x64/0xa0", Func: "ftrace_modify_code", Offset: 0x64, Size: 0xa0, Register: true, Return: true}},
		},
		{
			name: "arm 32-bit: the caller is the symbolizable ref",
			line: "[<80c1e5e8>] (dump_stack) from [<80c1eb20>] (panic+0x60/0xdc)",
			want: []Ref{{Text: "panic+0x60/0xdc", Func: "panic", Offset: 0x60, Size: 0xdc, Addr: 0x80c1eb20, HasAddr: true, Return: true}},
		},
		{
			name: "bare RIP of a kernel address",
			line: "RIP: 0010:0xffffffff81000061",
			want: []Ref{{Text: "RIP: 0010:0xffffffff81000061", Addr: 0xffffffff81000061, HasAddr: true, Register: true}},
		},
		{
			name: "WARNING header names the executing function",
			line: "WARNING: CPU: 0 PID: 1 at kernel/trace/ftrace.c:2156 ftrace_bug+0x1f/0x2a0",
			want: []Ref{{Text: "ftrace_bug+0x1f/0x2a0", Func: "ftrace_bug", Offset: 0x1f, Size: 0x2a0}},
		},
		{
			name: "QEMU register dump (registers.txt)",
			line: "RIP=ffffffff8145b513 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1",
			want: []Ref{{Text: "RIP=ffffffff8145b513", Addr: 0xffffffff8145b513, HasAddr: true, Register: true}},
		},
		{
			name: "QEMU register dump, arm64 (a real line of registers.txt)",
			line: " PC=0000000000020dc4 X00=0000267f96b8dea0 X01=0000267f9631e9b8",
			want: []Ref{{Text: "PC=0000000000020dc4", Addr: 0x20dc4, HasAddr: true, Register: true}},
		},
		{
			name: "QEMU register dump, riscv64",
			line: " pc       ffffffff8040d4d0",
			want: []Ref{{Text: "pc=ffffffff8040d4d0", Addr: 0xffffffff8040d4d0, HasAddr: true, Register: true}},
		},
		{
			name: "QEMU register dump, powerpc",
			line: "NIP c000000000012340   LR c000000000012300 CTR 0000000000000000 XER 0000000000000000 CPU#0",
			want: []Ref{{Text: "NIP=c000000000012340", Addr: 0xc000000000012340, HasAddr: true, Register: true}},
		},
		{name: "riscv64's QEMU registers other than pc", line: " mepc     ffffffff80011932"},
		{name: "code bytes", line: "Code: c0 74 0c 48 8b 78 08 <1f> 44 00 00"},
		{name: "register values", line: "RSI: ffffffff81ce5246 RDI: ffffffff8200b8e0"},
		{name: "bracketed hex in other messages", line: "[    0.3] ACPI: \\_SB_: platform _OSC: OS support mask [00022c8c]"},
		{name: "user-space RIP value is kept for Report to drop", line: "RIP: 0033:0x40d54e"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.line)
			for i := range got {
				got[i].LogLine = 0
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestFrameLines(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		want  []string
	}{
		{
			name: "inlined chain, innermost first",
			frame: Frame{
				Ref: Ref{Func: "do_syscall_64", Offset: 0x68, Size: 0x320},
				Locations: []Location{
					{Function: "do_syscall_x64", File: "arch/x86/entry/syscall_64.c", Line: 64, Inline: true},
					{Function: "do_syscall_64", File: "arch/x86/entry/syscall_64.c", Line: 87},
				},
			},
			want: []string{"do_syscall_x64 arch/x86/entry/syscall_64.c:64 [inline]", "do_syscall_64+0x68/0x320 arch/x86/entry/syscall_64.c:87"},
		},
		{
			name:  "line 0 is unknown",
			frame: Frame{Ref: Ref{Func: "emit", Offset: 4, Size: 8}, Locations: []Location{{Function: "rv_ci_insn", File: "arch/riscv/net/bpf_jit.h", Inline: true}, {Function: "emit", File: "arch/riscv/net/bpf_jit.h", Line: 964}}},
			want:  []string{"rv_ci_insn arch/riscv/net/bpf_jit.h:? [inline]", "emit+0x4/0x8 arch/riscv/net/bpf_jit.h:964"},
		},
		{
			name:  "unknown symbol keeps the reason",
			frame: Frame{Ref: Ref{Func: "nope", Offset: 1, Size: 2}, Err: "nope: symbol not in this vmlinux"},
			want:  []string{"nope+0x1/0x2 (nope: symbol not in this vmlinux)"},
		},
		{
			name:  "bare address names its function",
			frame: Frame{Ref: Ref{Text: "[<ffffffff81000061>]"}, Locations: []Location{{Function: "f", File: "a.c", Line: 3}}},
			want:  []string{"f a.c:3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.frame.Lines(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Lines() = %q, want %q", got, tt.want)
			}
		})
	}
}
