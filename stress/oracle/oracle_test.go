package oracle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/tally"
)

// wantChecked is the func-ip program with the comparison, as asm formats
// it: the sequence the verifier sees.
const wantChecked = `	 0: Call FnGetFuncIp
	 1: MovReg dst: r6 src: r0
	 2: StMemW dst: rfp src: r0 off: -4 imm: 3
	 3: MovReg dst: r2 src: rfp
	 4: AddImm dst: r2 imm: -4
	 5: LoadMapPtr dst: r1 fd: 7
	 7: Call FnMapLookupElem
	 8: JEqImm dst: r0 off: -1 imm: 0 <out>
	 9: MovImm dst: r1 imm: 1
	10: StXAtomicAddDW dst: r0 src: r1 off: 0
	11: StXMemDW dst: r0 src: r6 off: 24 imm: 0
	12: LdImmDW dst: r2 imm: -2128394912
	14: JEqReg dst: r6 off: -1 src: r2 <out>
	15: StXAtomicAddDW dst: r0 src: r1 off: 8
	16: StXMemDW dst: r0 src: r6 off: 16 imm: 0
out:
	17: MovImm dst: r0 imm: 0
	18: Exit
`

func TestFuncIPInstructions(t *testing.T) {
	p := FuncIP{MapFD: 7, Slot: 3, Expected: 0xffffffff81234560, Check: true}
	insns := p.Instructions()
	if got := fmt.Sprintf("%v", insns); got != wantChecked {
		t.Errorf("instructions =\n%s\nwant\n%s", got, wantChecked)
	}
	// The constant is the full 64-bit address, not a truncated one.
	var imm *asm.Instruction
	for i := range insns {
		if insns[i].OpCode == asm.LoadImmOp(asm.DWord) && insns[i].Src == asm.R0 {
			imm = &insns[i]
		}
	}
	if imm == nil || uint64(imm.Constant) != 0xffffffff81234560 {
		t.Errorf("expected-address immediate = %+v", imm)
	}
	// Unchecked: counts and records the address, never compares.
	u := fmt.Sprintf("%v", FuncIP{MapFD: 7, Slot: 3}.Instructions())
	if strings.Contains(u, "LdImmDW") || strings.Contains(u, "off: 8") || !strings.Contains(u, "off: 24") {
		t.Errorf("unchecked program =\n%s", u)
	}
	// Both must assemble: jumps resolved, no invalid opcodes. (The byte
	// order only picks how registers pack; the agent's arches are all
	// little-endian.)
	for _, in := range []asm.Instructions{insns, FuncIP{MapFD: 7}.Instructions()} {
		var b strings.Builder
		if err := in.Marshal(&b, binary.LittleEndian); err != nil {
			t.Errorf("Marshal: %v", err)
		}
	}
}

func TestSpecAndKinds(t *testing.T) {
	s := FuncIP{MapFD: 3}.Spec("vfs_read", FExit)
	if s.Type != ebpf.Tracing || s.AttachType != ebpf.AttachTraceFExit || s.AttachTo != "vfs_read" || s.License != "GPL" || s.Name != ProgName {
		t.Errorf("spec = %+v", s)
	}
	if FEntry.String() != "fentry" || FExit.String() != "fexit" {
		t.Error("kind names")
	}
	if FEntry.LinkType() != unix.BPF_TRACE_FENTRY || FExit.LinkType() != unix.BPF_TRACE_FEXIT || FEntry.AttachType() != ebpf.AttachTraceFEntry {
		t.Error("kind attach types")
	}
	if Key(FExit, "vfs_read") != "fexit:vfs_read" {
		t.Error("Key")
	}
	if len(ProgName) > 15 {
		t.Errorf("program name %q longer than BPF_OBJ_NAME_LEN-1", ProgName)
	}
}

func TestDelta(t *testing.T) {
	for _, tt := range []struct {
		addr, got uint64
		want      int64
		ok        bool
	}{
		{0xffffffff81000000, 0xffffffff81000000, 0, true},
		{0xffffffff81000000, 0xffffffff81000004, 4, true},
		{0xffffffff81000000, 0xffffffff81000010, 16, true},
		{0xffffffff81000000, 0xffffffff81000005, 5, false},
		{0xffffffff81000000, 0xffffffff81000014, 20, false},
		{0xffffffff81000000, 0xffffffff80fffffc, -4, false},
		{0xffffffff81000000, 0, 0, false},
	} {
		d, err := Delta(tt.addr, tt.got)
		if (err == nil) != tt.ok || (tt.ok && d != tt.want) {
			t.Errorf("Delta(%#x, %#x) = %d, %v", tt.addr, tt.got, d, err)
		}
	}
}

func TestCheckFuncIP(t *testing.T) {
	prev := Counters{Hits: 10, Bad: 1, LastBad: 0xdead, LastIP: 0x1000}
	ok := CheckFuncIP("vfs_read", FEntry, 0x1000, prev, Counters{Hits: 50, Bad: 1, LastBad: 0xdead, LastIP: 0x1000})
	if !ok.OK || ok.Name != NameFuncIP || ok.Function != "vfs_read" || ok.Got != 0 {
		t.Errorf("no new mismatch = %+v", ok)
	}
	bad := CheckFuncIP("vfs_read", FExit, 0x1000, prev, Counters{Hits: 50, Bad: 3, LastBad: 0x1004, LastIP: 0x1004})
	if bad.OK || bad.Got != 0x1004 || bad.Expected != 0x1000 || !strings.Contains(bad.Msg, "fexit: 2 of 40 hits") {
		t.Errorf("new mismatches = %+v", bad)
	}
}

func TestCheckExact(t *testing.T) {
	s := Sample{Before: Counters{Hits: 100}, After: Counters{Hits: 1100}}
	if o := CheckExact("__x64_sys_getppid", 1000, s); !o.OK || o.Expected != 1000 || o.Got != 1000 {
		t.Errorf("exact = %+v", o)
	}
	lost := CheckExact("f", 1000, Sample{Before: Counters{Hits: 100}, After: Counters{Hits: 1099}, RecursionMisses: 1})
	if lost.OK || lost.Got != 999 || !strings.Contains(lost.Msg, "(-1)") || !strings.Contains(lost.Msg, "recursion misses 1") {
		t.Errorf("lost = %+v", lost)
	}
	doubled := CheckExact("f", 10, Sample{After: Counters{Hits: 11}})
	if doubled.OK || !strings.Contains(doubled.Msg, "(+1)") {
		t.Errorf("doubled = %+v", doubled)
	}
}

func TestCountersSub(t *testing.T) {
	d := Counters{Hits: 5, Bad: 2, LastBad: 9, LastIP: 8}.Sub(Counters{Hits: 1, Bad: 1, LastBad: 7, LastIP: 6})
	if d != (Counters{Hits: 4, Bad: 1, LastBad: 9, LastIP: 8}) {
		t.Errorf("Sub = %+v", d)
	}
}

func TestCalibrateWithoutAddresses(t *testing.T) {
	l := &Loader{}
	o, err := l.Calibrate(context.Background(), "f", func() {}, nil)
	if err == nil || o.Skipped == "" || l.Checking() {
		t.Errorf("Calibrate without kallsyms = %+v, %v", o, err)
	}
	l.Addrs = ksyms.Table{"g": 0x1000}
	if o, err := l.Calibrate(context.Background(), "f", func() {}, nil); err == nil || !strings.Contains(o.Skipped, "no unique kallsyms address") {
		t.Errorf("Calibrate on a function kallsyms lacks = %+v, %v", o, err)
	}
	if exp, ok := l.Expected("g"); !ok || exp != 0x1000 {
		t.Errorf("Expected = %#x, %v", exp, ok)
	}
}

func TestCallOnOneThread(t *testing.T) {
	tids := map[int]bool{}
	n := 0
	callOnOneThread(100, func() { n++; tids[unix.Gettid()] = true; runtime.Gosched() })
	if n != 100 || len(tids) != 1 {
		t.Errorf("%d calls on %d threads", n, len(tids))
	}
}

// TestInVM loads, calibrates and runs exact-count windows on getppid in
// the test VM. On a host it would attach to the running kernel.
func TestInVM(t *testing.T) {
	if os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_IN_VM=1 inside the test VM to attach real programs")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Log(err)
	}
	fn := map[string]string{"amd64": "__x64_sys_getppid", "arm64": "__arm64_sys_getppid", "riscv64": "__riscv_sys_getppid"}[runtime.GOARCH]
	if fn == "" {
		t.Skip("no getppid wrapper name for", runtime.GOARCH)
	}
	tab, err := ksyms.Read(ksyms.DefaultPath, []string{fn})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLoader(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Addrs = tab
	rec := tally.New(nil, -1)
	call := func() { _ = unix.Getppid() }
	o, err := l.Calibrate(context.Background(), fn, call, rec)
	if err != nil || !o.OK {
		t.Fatalf("Calibrate = %+v, %v", o, err)
	}
	t.Logf("calibration: %+v", o)
	w := Window{Loader: l, Func: fn, Call: call, Key: "exact:" + fn, Name: "exact", Rec: rec}
	for range 3 {
		ex, s, err := w.Exact(context.Background(), 1000)
		if err != nil || !ex.OK {
			t.Errorf("Exact = %+v, %v", ex, err)
		}
		exp, _ := l.Expected(fn)
		if fip := CheckFuncIP(fn, FEntry, exp, s.Before, s.After); !fip.OK {
			t.Errorf("func-ip in the exact window = %+v", fip)
		}
	}
	t.Logf("transitions: %+v", rec.Summaries())
}

// TestVerifierAcceptsPrograms loads (and never attaches) checked and
// unchecked func-ip programs of both kinds, so that the running kernel's
// verifier judges them. Loading patches nothing, so this is safe on a
// host; it needs root and vmlinux BTF: set FTH_LOAD_BPF=1.
func TestVerifierAcceptsPrograms(t *testing.T) {
	if os.Getenv("FTH_LOAD_BPF") != "1" && os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_LOAD_BPF=1 (root, vmlinux BTF) to have the kernel verify the programs")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Log(err)
	}
	m, err := NewMap(4)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l := &Loader{Map: m, Cache: btf.NewCache(), Addrs: ksyms.Table{"vfs_read": 0xffffffff81234560}}
	if ld, err := l.load("vfs_read", FEntry, "probe", false); errors.Is(err, unix.EPERM) {
		// Some hosts (lockdown, sandboxes) refuse tracing programs
		// outright; TestVerifierAcceptsInstructions still runs there.
		t.Skipf("this kernel refuses tracing programs: %v", err)
	} else if err == nil {
		ld.Prog.Close()
	}
	for _, check := range []bool{false, true} {
		for _, kind := range []Kind{FEntry, FExit} {
			ld, err := l.load("vfs_read", kind, Key(kind, "vfs_read"), check)
			if err != nil {
				t.Errorf("load %s check=%v: %v", kind, check, err)
				continue
			}
			ld.Prog.Close()
		}
	}
	c, err := m.Read(0)
	if err != nil || c != (Counters{}) {
		t.Errorf("fresh slot = %+v, %v", c, err)
	}
	if _, err := l.load("fth_no_such_function", FEntry, "x", false); err == nil {
		t.Error("loading for a missing function succeeded")
	}
	l.checking = true
	if _, err := l.Load("vfs_write", FEntry, "y"); !errors.Is(err, ErrNoAddress) {
		t.Errorf("checked load without an address = %v, want ErrNoAddress", err)
	}
}

// TestVerifierAcceptsInstructions loads the func-ip instruction sequence as
// a kprobe program, which has bpf_get_func_ip too, so that the verifier
// checks the map access, the atomics and the 64-bit immediate even on a
// host that refuses tracing programs. Nothing is attached. Set
// FTH_LOAD_BPF=1 (root).
func TestVerifierAcceptsInstructions(t *testing.T) {
	if os.Getenv("FTH_LOAD_BPF") != "1" && os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_LOAD_BPF=1 (root) to have the kernel verify the instructions")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Log(err)
	}
	m, err := NewMap(4)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, check := range []bool{false, true} {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.Kprobe, License: "GPL",
			Instructions: FuncIP{MapFD: m.FD(), Slot: 3, Expected: 0xffffffff81234560, Check: check}.Instructions(),
		})
		if err != nil {
			t.Errorf("check=%v: %v", check, err)
			continue
		}
		p.Close()
	}
	if _, err := m.Slot("a"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"b", "c", "d"} {
		if _, err := m.Slot(k); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := m.Slot("a"); s != 0 {
		t.Errorf("Slot(a) again = %d", s)
	}
	if _, err := m.Slot("e"); err == nil {
		t.Error("a fifth slot in a 4-slot map")
	}
}
