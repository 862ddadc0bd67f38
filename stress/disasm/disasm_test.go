package disasm

import (
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// readHex reads a testdata window: a comment line saying where it came
// from, then the bytes as the host read them through the gdbstub.
func readHex(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var h string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			h += strings.TrimSpace(l)
		}
	}
	code, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func TestWindow(t *testing.T) {
	for _, tc := range []struct {
		name, goarch string
		code         []byte
		// tail is appended, as the rest of the read after the window.
		tail      string
		insns     int
		last      string
		wantError bool
	}{
		// Real windows, x86_64 7.3.4 under QEMU 7.2 (a fentry program on
		// fth_target_counted; a function tracer instance filtered to it),
		// followed by what a read past them finds: the BPF pack's INT3
		// fill, or the ops pointer after an ops trampoline.
		{name: "x86_64 fentry trampoline", goarch: "amd64", code: readHex(t, "x86_64-bpf-trampoline-fentry-7.3.4.hex"), tail: "cccccccc", insns: 26, last: "retq"},
		{name: "x86_64 ftrace_ops trampoline", goarch: "amd64", code: readHex(t, "x86_64-ftrace-ops-trampoline-7.3.4.hex"), tail: "00a0bd0300888fff", insns: 33, last: "retq"},
		// arm64 7.3.4 under QEMU 7.2: returns into the function with ret x10.
		{name: "arm64 fentry trampoline", goarch: "arm64", code: readHex(t, "arm64-bpf-trampoline-fentry-7.3.4.hex"), tail: "00202000", insns: 37, last: "ret x10"},
		// riscv64 7.3.4: compressed and full instructions mixed, back
		// into the function with jr t0 (x5).
		{name: "riscv64 fentry trampoline", goarch: "riscv64", code: readHex(t, "riscv64-bpf-trampoline-fentry-7.3.4.hex"), tail: "00000000", insns: 51, last: "jr x5"},
		// ppc64le 7.3.4 built by gcc 14: back with blr.
		{name: "ppc64le fentry trampoline", goarch: "ppc64le", code: readHex(t, "ppc64le-bpf-trampoline-fentry-7.3.4.hex"), tail: "00000000", insns: 49, last: "blr"},
		// ppc64le: beqlr (conditional) and blrl (a call) go on; blr ends.
		{name: "ppc64le beqlr, blrl, blr", goarch: "ppc64le", code: mustHex("2000824d" + "2100804e" + "2000804e"), insns: 3, last: "blr"},
		// The return thunk: a jump out of the code ends the window, a jump
		// inside it does not.
		{name: "x86_64 jmp __x86_return_thunk", goarch: "amd64", code: mustHex("55" + "eb00" + "e9f0ffffff"), insns: 3, last: "jmp"},
		{name: "x86_64 endbr64 first", goarch: "amd64", code: mustHex("f30f1efa" + "c3"), insns: 2, last: "retq"},
		{name: "x86_64 no return", goarch: "amd64", code: mustHex("9090"), wantError: true},
		// arm64: stp x29, x30, [sp, #-16]!; mov x29, sp; ret x10.
		{name: "arm64 ret x10", goarch: "arm64", code: mustHex("fd7bbfa9" + "fd030091" + "40015fd6"), tail: "00202000", insns: 3, last: "ret x10"},
		// arm64 fexit: adr x30, .+8; ret x10 calls the function (the
		// task comes back to the next instruction); nop; ret ends.
		{name: "arm64 call by ret x10", goarch: "arm64", code: mustHex("5e000010" + "40015fd6" + "1f2003d5" + "c0035fd6"), tail: "00202000", insns: 4, last: "ret"},
		// adr x30 to elsewhere does not make the ret a call.
		{name: "arm64 adr elsewhere", goarch: "arm64", code: mustHex("9e000010" + "40015fd6"), tail: "00202000", insns: 2, last: "ret x10"},
		// riscv64: addi sp,sp,-16; c.addi sp,16 (compressed); jalr zero,0(t0).
		{name: "riscv64 jr t0", goarch: "riscv64", code: mustHex("130101ff" + "4101" + "67800200"), insns: 3},
		// riscv64: a jalr that links (a call through a register) goes on.
		{name: "riscv64 call then ret", goarch: "riscv64", code: mustHex("e7800200" + "67800000"), insns: 2},
		{name: "an arch with no decoder", goarch: "mips64", code: mustHex("00000000"), wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code := append(append([]byte{}, tc.code...), mustHex(tc.tail)...)
			got, err := Window(tc.goarch, 0xffffffffa0800100, code)
			if tc.wantError {
				if err == nil {
					t.Fatalf("Window = %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.insns {
				t.Fatalf("%d instructions, want %d: %v", len(got), tc.insns, got)
			}
			end := got[len(got)-1]
			if end.Off+end.Len != len(tc.code) {
				t.Errorf("the window ends at +%#x, want +%#x (the end of the code): %v", end.Off+end.Len, len(tc.code), got)
			}
			if tc.last != "" && !strings.HasPrefix(end.Text, tc.last) {
				t.Errorf("last instruction %q, want %q", end.Text, tc.last)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Off != got[i-1].Off+got[i-1].Len {
					t.Errorf("instruction %d at +%#x does not follow +%#x (%d bytes)", i, got[i].Off, got[i-1].Off, got[i-1].Len)
				}
			}
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestOne(t *testing.T) {
	// riscv64 7.3.4's disabled callsite: the nop after the AUIPC.
	in, err := One("riscv64", 0xffffffff01000004, mustHex("13000000"))
	if err != nil || in.Len != 4 || in.Text != "nop" {
		t.Errorf("One = %+v, %v; want a 4-byte nop", in, err)
	}
	if _, err := One("riscv64", 0, nil); err == nil {
		t.Error("One of no code: no error")
	}
}

// The INT3 window's places: the patcher's steps in x86_64 7.3.4's
// smp_text_poke_batch_finish (read from vmlinux, __fentry__ still a
// call), one after each call and each locked instruction.
func TestSteps(t *testing.T) {
	code := readHex(t, "x86_64-smp_text_poke_batch_finish-7.3.4.hex")
	steps, err := Steps("amd64", 0xffffffff81027fb0, code)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int
	for _, s := range steps {
		offs = append(offs, s.Off)
	}
	// After __fentry__, cond_resched, the step-1 text_poke, the first
	// sync, perf_event_text_poke, the step-2 text_poke, the step-3
	// text_poke, the step-3 and step-2 syncs (laid out in that order),
	// and the refs' lock decl.
	want := []int{0x5, 0x87, 0xcb, 0xef, 0x138, 0x1c4, 0x28e, 0x2fd, 0x32a, 0x366}
	if !slices.Equal(offs, want) {
		t.Errorf("steps at %#x, want %#x", offs, want)
	}
	if _, err := Steps("arm64", 0, code); err == nil {
		t.Error("arm64 has no INT3 steps")
	}
	if _, err := Steps("amd64", 0, mustHex("9090c3")); err == nil {
		t.Error("a function with no step is an error")
	}
}

// The CALL_OPS window of ftrace_caller, as vmlinux has it: from the load
// of the callsite's ops literal to the call of op->func.
func TestOpsCall(t *testing.T) {
	for _, tc := range []struct {
		goarch, file string
		addr         uint64
		first, last  string
		insns        int
	}{
		// bic x11, x30, #7 (the literal's place) is not in it.
		{"arm64", "arm64-ftrace_caller-7.3.4.hex", 0xffff8000800247f8, "ldur x11, [x11,#-16]", "blr x4", 25},
		// t1 = op (the direct-call check), then a2 = op, ra = op->func.
		{"riscv64", "riscv64-ftrace_caller-7.3.4.hex", 0xffffffff80010948, "ld x6,-16(x5)", "jalr x1", 30},
		// r12 = op (the direct-call check), then r5 = op, ctr = op->func.
		{"ppc64le", "ppc64le-ftrace_caller-7.3.4.hex", 0xc000000000060330, "ld r12,-16(r11)", "bctrl", 43},
	} {
		code := readHex(t, tc.file)
		insns, err := OpsCall(tc.goarch, tc.addr, code)
		if err != nil {
			t.Errorf("%s: %v", tc.goarch, err)
			continue
		}
		var texts []string
		for _, in := range insns {
			texts = append(texts, in.Text)
		}
		t.Logf("%s: %d instructions: %s", tc.goarch, len(insns), strings.Join(texts, "; "))
		if texts[0] != tc.first || texts[len(texts)-1] != tc.last || len(texts) != tc.insns {
			t.Errorf("%s: window %q .. %q, %d instructions, want %q .. %q, %d", tc.goarch, texts[0], texts[len(texts)-1], len(texts), tc.first, tc.last, tc.insns)
		}
	}
	if _, err := OpsCall("amd64", 0, []byte{0xc3}); err == nil {
		t.Error("amd64 has no CALL_OPS window")
	}
}

// The direct-call lookup's compare of an entry's ip (struct
// ftrace_func_entry's ip is at 0x10), with the entry in rax; and
// ftrace_lookup_ip's two (the bucket's head, then the loop).
func TestFieldCompares(t *testing.T) {
	for _, tc := range []struct {
		file string
		addr uint64
		want []string
	}{
		{"x86_64-ftrace_find_rec_direct-7.3.4.hex", 0xffffffff811179f0, []string{"+0x4f cmp 0x10(%rax),%rdi"}},
		{"x86_64-ftrace_lookup_ip-7.3.4.hex", 0xffffffff81115e30, []string{"+0x29 cmp 0x10(%rax),%rsi", "+0x37 cmp 0x10(%rax),%rsi"}},
	} {
		code := readHex(t, tc.file)
		cmps, err := FieldCompares("amd64", tc.addr, code, 0x10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cmps {
			if c.Reg != 0 {
				t.Errorf("%s: %s: base register %d, want 0 (rax)", tc.file, c.Text, c.Reg)
			}
			got = append(got, fmt.Sprintf("+%#x %s", c.Off, c.Text))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: FieldCompares = %q, want %q", tc.file, got, tc.want)
		}
	}
	// The hash's own fields (buckets at 0x8) are compared nowhere.
	if _, err := FieldCompares("amd64", 0xffffffff811179f0, readHex(t, "x86_64-ftrace_find_rec_direct-7.3.4.hex"), 0x8); err == nil {
		t.Error("FieldCompares found a compare at 0x8, which the code has none of")
	}
	if _, err := FieldCompares("arm64", 0, []byte{0, 0, 0, 0}, 0x10); err == nil {
		t.Error("arm64: want ErrUnknownArch")
	}
}

func TestCallTarget(t *testing.T) {
	const base = 0xffffffffa007f3c0
	fexit := readHex(t, "x86_64-bpf-trampoline-fexit-7.3.4.hex")
	insns, err := Window("amd64", base, fexit)
	if err != nil {
		t.Fatal(err)
	}
	at := func(off int) Insn {
		i := slices.IndexFunc(insns, func(in Insn) bool { return in.Off == off })
		if i < 0 {
			t.Fatalf("no instruction at +%#x", off)
		}
		return insns[i]
	}
	for _, tc := range []struct {
		name   string
		goarch string
		in     Insn
		to     uint64
		ok     bool
	}{
		// The image's call of fth_target_napping (0xffffffffa0400240),
		// past its 5-byte callsite: the end of the prologue.
		{"x86_64 fexit image's call of the function", "amd64", at(0x37), 0xffffffffa0400245, true},
		// __bpf_tramp_enter, called before it.
		{"x86_64 call of __bpf_tramp_enter", "amd64", at(0x2e), 0xffffffff811ce5c0, true},
		{"x86_64 not a call", "amd64", at(0x33), 0, false},
		{"another arch", "arm64", at(0x37), 0, false},
		{"past the code", "amd64", Insn{Off: len(fexit), Len: 5}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, ok := CallTarget(tc.goarch, base, fexit, tc.in)
			if to != tc.to || ok != tc.ok {
				t.Errorf("CallTarget(%s) = %#x, %v; want %#x, %v", tc.in.Text, to, ok, tc.to, tc.ok)
			}
		})
	}
}
