package regs

import (
	"errors"
	"testing"
)

// Each arch's lines, as real logs print them; the file each comes from is
// under results/console/testdata unless it says otherwise.
func TestKernelPC(t *testing.T) {
	tests := []struct {
		arch, line, want string
	}{
		{"x86", "RIP: 0010:bpf_tramp_ftrace_ops_func+0x12a/0x150", "bpf_tramp_ftrace_ops_func"},                       // x86_64/*
		{"x86", "RIP: 0010:[<ffffffff8123487f>]  [<ffffffff8123487f>] __lock_acquire+0x61f/0x4b50", "__lock_acquire"}, // syzkaller, pre-v4.10
		{"x86", "IP: __lock_acquire+0xd8/0x1430", "__lock_acquire"},                                                   // syzkaller/146, pre-v4.15
		{"x86", "IP: strlen+0x0/0x30", "strlen"},                                                                      // syzkaller/174
		{"arm64", "pc : lkdtm_BUG+0x8/0x18", "lkdtm_BUG"},
		{"riscv", "epc : lkdtm_BUG+0x10/0x20", "lkdtm_BUG"},
		{"powerpc", "NIP [c000000000293cdc] lockdep_hardirqs_on_prepare+0x26c/0x320", "lockdep_hardirqs_on_prepare"},
		{"arm", "PC is at io_serial_out+0x40/0x48", "io_serial_out"}, // arm/hung-task-backtrace
		// Not the PC: the link register, a user address, a value line.
		{"arm64", "lr : __kmem_cache_alloc_node+0x80/0x350", ""},
		{"riscv", " ra : lkdtm_do_action+0x2a/0x48", ""},
		{"powerpc", "LR [c000000000293cd8] lockdep_hardirqs_on_prepare+0x268/0x320", ""},
		{"arm", "LR is at io_serial_out+0x28/0x48", ""},
		{"x86", "RIP: 0033:0x40d66e", ""},
		{"powerpc", "NIP:  c000000000293cdc LR: c000000000293cd8 CTR: c000000000d2ae50", ""},
	}
	for _, tt := range tests {
		got := ""
		if m := KernelPC().FindStringSubmatch(tt.line); m != nil {
			got = m[1]
		}
		if got != tt.want {
			t.Errorf("%s: KernelPC(%q) = %q, want %q", tt.arch, tt.line, got, tt.want)
		}
	}
}

func TestRawPC(t *testing.T) {
	tests := []struct {
		arch, report, want string
	}{
		// results/injection_test.go's report, and its arm64 line.
		{"x86", "Oops: int3: 0000 [#1] SMP\nCPU: 1 UID: 0 PID: 67 Comm: bb Tainted: G           O        7.3.4 #2 PREEMPT(full)\nRIP: 0010:0xffffffffa0800081\nCode: cc cc", "ffffffffa0800081"},
		{"arm64", "pc : ffff800080a00004 lr : x", "ffff800080a00004"},
		{"x86", "IP: 0xffffffff81556fba:", "ffffffff81556fba"},                                              // syzkaller/442
		{"riscv", "epc : ffffffff806b2928 ra : ffffffff806b27fa sp : ffff8f80003d7c60", "ffffffff806b2928"}, // riscv64/lkdtm-bug-fth-7.3.4
		{"powerpc", "NIP:  c000000000293cdc LR: c000000000293cd8 CTR: c000000000d2ae50", "c000000000293cdc"},
		{"powerpc", "NIP [c000000000293cdc] lockdep_hardirqs_on_prepare+0x26c/0x320", "c000000000293cdc"},
		{"arm", "PC is at 0xffffffffdeadbeef", "ffffffffdeadbeef"}, // syzkaller
		// A symbol covers it: no raw address.
		{"x86", "RIP: 0010:debug_print_object+0xd9/0x100", ""},
		{"arm64", "pc : lkdtm_BUG+0x8/0x18", ""},
	}
	for _, tt := range tests {
		got := ""
		if m := RawPC().FindStringSubmatch(tt.report); m != nil {
			got = m[1]
		}
		if got != tt.want {
			t.Errorf("%s: RawPC(%q) = %q, want %q", tt.arch, tt.report, got, tt.want)
		}
	}
}

func TestCodeReg(t *testing.T) {
	tests := []struct {
		arch, line, name string
		link             bool
	}{
		{"x86", "RIP: 0010:bpf_tramp_ftrace_ops_func+0x12a/0x150", "RIP", false},
		{"arm64", "pc : lkdtm_BUG+0x8/0x18", "pc", false},
		{"arm64", "lr : __kmem_cache_alloc_node+0x80/0x350", "lr", true},
		{"riscv", "epc : lkdtm_BUG+0x10/0x20", "epc", false},
		{"riscv", " ra : lkdtm_do_action+0x2a/0x48", "ra", true},
		{"powerpc", "NIP [c000000000293cdc] lockdep_hardirqs_on_prepare+0x26c/0x320", "NIP", false},
		{"powerpc", "LR [c000000000293cd8] lockdep_hardirqs_on_prepare+0x268/0x320", "LR", true},
		{"arm", "PC is at io_serial_out+0x40/0x48", "PC", false},
		{"arm", "LR is at io_serial_out+0x28/0x48", "LR", true},
		// A call-trace frame and a general register are not code registers.
		{"x86", " lkdtm_do_action+0x2a/0x48", "", false},
		{"x86", "RSP: 0018:ff11000005c6bac8 EFLAGS: 00000202", "", false},
	}
	for _, tt := range tests {
		m := CodeReg().FindStringSubmatch(tt.line)
		name := ""
		if m != nil {
			name = m[1]
		}
		if name != tt.name || (m != nil && IsLink(name) != tt.link) {
			t.Errorf("%s: CodeReg(%q) = %q (link %v), want %q (link %v)", tt.arch, tt.line, name, IsLink(name), tt.name, tt.link)
		}
	}
}

func TestDumpLine(t *testing.T) {
	tests := []struct {
		arch, line string
		want       bool
	}{
		{"x86", "RSP: 0018:ff11000005c6bac8 EFLAGS: 00000202", true},
		{"x86", "Code: 8b 43 2c 89 c2 83 e0 22 83 ca 40 89 53 2c 83 f8 02 75 da", true},
		{"arm64", "x29: ffff80000fee38a0", true},
		{"arm", "pc : [<8078e144>]    lr : [<8078e144>]    psr: 20000093", true},
		{"powerpc", "NIP [c000000000293cdc] lockdep_hardirqs_on_prepare+0x26c/0x320", true},
		{"powerpc", "LR [c000000000293cd8] lockdep_hardirqs_on_prepare+0x268/0x320", true},
		{"powerpc", "GPR00: c000000000293cd8 c0000000028df850 c0000000013f8100 c000000002595400", true},
		{"arm", "PC is at io_serial_out+0x40/0x48", true},
		{"arm", "LR is at io_serial_out+0x28/0x48", true},
		{"x86", "Call Trace:", false},
		{"x86", "WARNING: CPU: 0 PID: 1 at kernel/trace/ftrace.c:2000 ftrace_bug+0x1/0x2", false},
	}
	for _, tt := range tests {
		if got := DumpLine().MatchString(tt.line); got != tt.want {
			t.Errorf("%s: DumpLine(%q) = %v, want %v", tt.arch, tt.line, got, tt.want)
		}
	}
}

func TestUserMode(t *testing.T) {
	tests := []struct {
		arch, line string
		want       bool
	}{
		{"x86", "RIP: 0033:0x40d66e", true}, // x86_64/*, results/hang/testdata
		// No log in the repo has arm64's or riscv's: the forms
		// results/hang matched before regs.
		{"arm64", "pc : 0000ffff8a1c2b5c", true},
		{"riscv", "epc : 00007fffa2c41e2a ra : 00007fffa2c3f0b4 sp : 00007fffd3e4e9c0", true},
		// After "---- interrupt: c00 at 0x1d594", MSR with PR set:
		// powerpc/lkdtm-bug-fth-7.3.4.
		{"powerpc", "NIP:  000000000001d594 LR: 00000000000e2e5c CTR: 0000000000000000", true},
		{"x86", "RIP: 0010:debug_print_object+0xd9/0x100", false},
		{"riscv", "epc : ffffffff806b2928 ra : ffffffff806b27fa sp : ffff8f80003d7c60", false},
		{"powerpc", "NIP:  c000000000293cdc LR: c000000000293cd8 CTR: c000000000d2ae50", false},
	}
	for _, tt := range tests {
		if got := UserMode().MatchString(tt.line); got != tt.want {
			t.Errorf("%s: UserMode(%q) = %v, want %v", tt.arch, tt.line, got, tt.want)
		}
	}
}

// QEMU's lines are from harness/machine/qemu/testdata/registers and its
// stack test (powerpc).
func TestQEMU(t *testing.T) {
	tests := []struct {
		arch, line, pcName, pc, sp string
	}{
		{"x86", "RIP=ffffffff81000b10 RFL=00000082 [--S----] CPL=0 II=0 A20=1 SMM=0 HLT=0", "RIP", "ffffffff81000b10", ""},
		{"x86", "RSI=0000000000000001 RDI=ff1100000268cb00 RBP=fffffe0000009008 RSP=fffffe000000afd0", "", "", "fffffe000000afd0"},
		{"arm64", " PC=ffff800080010c80 X00=0000ffff56c5a2c8 X01=0000000000000000", "PC", "ffff800080010c80", ""},
		{"arm64", "X29=0000267f9599fc68 X30=0000000000050b40  SP=ffff80008104c000", "", "", "ffff80008104c000"},
		{"riscv", " pc       ffffffff8040d4d0", "pc", "ffffffff8040d4d0", ""},
		{"riscv", " x0/zero  0000000000000000 x1/ra    ffffffff80401aec x2/sp    ffffffff80ffff30 x3/gp    ffffffff810ead60", "", "", "ffffffff80ffff30"},
		{"powerpc", "NIP c000000000012340   LR c000000000012300 CTR 0", "NIP", "c000000000012340", ""},
		{"powerpc", "GPR00 c000000000012300 c000000002c4be20 c000000001f6a100 0000000000000001", "", "", "c000000002c4be20"},
		// The kernel's own dumps are not QEMU's.
		{"arm64", "pc : ffff800080012340", "", "", ""},
		{"powerpc", "NIP:  c000000000293cdc LR: c000000000293cd8 CTR: c000000000d2ae50", "", "", ""},
	}
	for _, tt := range tests {
		name, pc, _ := QEMUPC(tt.line)
		sp, _ := QEMUSP(tt.line)
		if name != tt.pcName || pc != tt.pc || sp != tt.sp {
			t.Errorf("%s: %q: QEMUPC = %q %q, QEMUSP = %q; want %q %q, %q", tt.arch, tt.line, name, pc, sp, tt.pcName, tt.pc, tt.sp)
		}
	}
}

func TestLookup(t *testing.T) {
	for _, arch := range []string{"x86", "arm64", "riscv", "powerpc"} {
		f, err := Lookup(arch)
		if err != nil {
			t.Fatalf("Lookup(%q): %v", arch, err)
		}
		if err := f.Bootable(); err != nil {
			t.Errorf("fth boots %s: %v", arch, err)
		}
	}
	if _, err := Lookup("s390"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Lookup(s390) err = %v, want ErrUnknown", err)
	}
	arm, _ := Lookup("arm")
	if err := arm.Bootable(); err == nil {
		t.Error("arm has no QEMU data, yet Bootable says nothing is missing")
	}
}

// A bad Format is an error naming its arch, not a silently narrower
// pattern.
func TestBuildRejects(t *testing.T) {
	for name, f := range map[string]Format{
		"no forms":     {Arch: "bad", PC: []Reg{{Name: "pc"}}},
		"unknown form": {Arch: "bad", PC: []Reg{{"pc", []Form{IsAt + 1}}}},
		"PC skips":     {Arch: "bad", PC: []Reg{{"pc", []Form{Colon}}}, QEMUPC: QEMUReg{Label: "pc", Skip: 1}},
	} {
		if _, err := build([]Format{f}); err == nil {
			t.Errorf("%s: build accepted %+v", name, f)
		}
	}
	if _, err := build(Formats()); err != nil {
		t.Errorf("build(Formats()): %v", err)
	}
}

// registers.txt's stack sections read back as written.
func TestDumpLayout(t *testing.T) {
	cases := []struct {
		name, line string
		cpu        string
		header     bool
		off, word  string
	}{
		{"qemu's cpu line", "CPU#1", "CPU#1", false, "", ""},
		{"stack header", StackHeader(1, 0xffffc90000013e58), "CPU#1", true, "", ""},
		{"stack word", StackWord(8, 0xffffffff81234567), "", false, "+0x008", "ffffffff81234567"},
		{"a register line", "RIP=ffffffff81000000 RFL=00000246", "", false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if cpu, ok := DumpCPU(c.line); ok != (c.cpu != "" && !c.header) || (ok && cpu != c.cpu) {
				t.Errorf("DumpCPU(%q) = %q, %v", c.line, cpu, ok)
			}
			if cpu, ok := ParseStackHeader(c.line); ok != c.header || (ok && cpu != c.cpu) {
				t.Errorf("ParseStackHeader(%q) = %q, %v", c.line, cpu, ok)
			}
			if off, word, ok := ParseStackWord(c.line); ok != (c.off != "") || off != c.off || word != c.word {
				t.Errorf("ParseStackWord(%q) = %q, %q, %v", c.line, off, word, ok)
			}
		})
	}
}
