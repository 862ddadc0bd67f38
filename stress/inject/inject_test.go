package inject

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/stress/disasm"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

func TestJudgeInjection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      event.Injection
		stopped bool
		want    string
	}{
		{"held the whole window", event.Injection{HeldMS: 2989, SpunMS: 2927}, true, event.InjSurvived},
		// Measured before the preemptor's threads were pinned: the racer's
		// call returned in 110 ms while the preemptor "spun" 1.2 s.
		{"ran on beside the preemptor", event.Injection{HeldMS: 110, SpunMS: 1200, FreedInWindow: true}, true, event.InjNotPreempted},
		{"freed while held", event.Injection{HeldMS: 1247, SpunMS: 1200, FreedInWindow: true}, true, event.InjFreedUnderTask},
		// riscv64 7.3 before the action ran beside the window: the check
		// ended after the preemptor's bound, so "freed" proves nothing.
		{"check after the bound", event.Injection{HeldMS: 10060, SpunMS: 10000, FreedInWindow: true}, false, event.InjNotPreempted},
		{"no preemption at all", event.Injection{HeldMS: 3, SpunMS: 700}, true, event.InjNotPreempted},
		{"held in the caller", event.Injection{HeldMS: 800, SpunMS: 700, Stack: []string{"__schedule+0x1/0x2", "call_write+0x4c/0x64 [fth_target]"}}, true, event.InjSurvived},
		// x86_64 7.3.4: the unwinder stops at the trampoline's address,
		// where the IPI was taken.
		{"held at the trampoline", event.Injection{Addr: "0xffffffffa0800080", HeldMS: 6886, SpunMS: 6819, Stack: []string{"irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20", "0xffffffffa0800080"}}, true, event.InjSurvived},
		// x86_64 7.3.4, inside the window: the image's own symbol, at
		// the held place.
		{"held inside the trampoline", event.Injection{Symbol: "bpf_trampoline_10737479715+0x1", Addr: "0xffffffffa0800101", HeldMS: 872, SpunMS: 700, Stack: []string{"irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20", "bpf_trampoline_10737479715+0x1/0xa8"}}, true, event.InjSurvived},
		{"held in another image", event.Injection{Symbol: "bpf_trampoline_10737479715+0x1", Addr: "0xffffffffa0800101", HeldMS: 872, SpunMS: 700, Stack: []string{"irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20", "bpf_trampoline_10737479715+0x10/0xa8"}}, true, event.InjNotPreempted},
		// x86_64 7.3.4: ORC stops at an ftrace_ops trampoline, before
		// its address: only the interrupt's frames are left.
		{"held at an ops trampoline", event.Injection{Target: "opstramp", Addr: "0xffffffffa0001000", HeldMS: 872, SpunMS: 700, Stack: []string{"irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20"}}, true, event.InjSurvived},
		{"preempted on the way to user space", event.Injection{Target: "opstramp", HeldMS: 872, SpunMS: 700, Stack: []string{"exit_to_user_mode_loop+0x1/0x2", "irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20"}}, true, event.InjNotPreempted},
		// Elsewhere an unwind that stops at the interrupt proves nothing.
		{"a trampoline's interrupt frames alone", event.Injection{Target: "trampoline", Addr: "0xffffffffa0800100", HeldMS: 872, SpunMS: 700, Stack: []string{"irqentry_exit+0xbe/0x6a0", "asm_sysvec_call_function_single+0x16/0x20"}}, true, event.InjNotPreempted},
		// riscv64 7.3.4, held at ftrace_caller+0x0: the interrupted pc is
		// printed as a return address, the end of the symbol before.
		{"held at the start of ftrace_caller", event.Injection{Target: "callops", Symbol: "ftrace_caller+0x0", Addr: "0xffffffff80010948", HeldMS: 737, SpunMS: 700, Stack: []string{"irqentry_exit+0x58/0x910", "do_irq+0x4e/0x60", "handle_exception+0x12e/0x160", "ftrace_graph_func+0x40/0x40", "full_proxy_write+0xa6/0x130"}}, true, event.InjSurvived},
		{"a symbol's end is no proof elsewhere", event.Injection{Target: "callops", Symbol: "ftrace_caller+0x4", Offset: 4, Addr: "0xffffffff8001094c", HeldMS: 737, SpunMS: 700, Stack: []string{"irqentry_exit+0x58/0x910", "ftrace_graph_func+0x40/0x40", "full_proxy_write+0xa6/0x130"}}, true, event.InjNotPreempted},
		// 6.12 as shipped: switched out at the return to user space, after
		// the callsite, so held as long as the preemptor spun.
		{"held after the return", event.Injection{HeldMS: 800, SpunMS: 700, Stack: []string{"__schedule+0x1/0x2", "exit_to_user_mode_loop+0x3/0x4"}}, true, event.InjNotPreempted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			judge(&in, tc.stopped, "call_write")
			if in.Outcome != tc.want {
				t.Errorf("outcome %q (%s), want %q", in.Outcome, in.Msg, tc.want)
			}
			if in.Outcome != event.InjFreedUnderTask && !tc.stopped && in.FreedInWindow {
				t.Error("a check after the hold kept freed_in_window")
			}
		})
	}
}

// raceKallsyms is the x86_64 7.3.4 kernel's kallsyms around its
// bpf_trampoline_* functions (System.map; KASLR is off in the guest, so
// the addresses are the guest's), and the one image of the CI run whose
// third attach the old scan could not tell among thirteen.
const raceKallsyms = "testdata/kallsyms-x86_64-race.txt"

const raceImage = 0xffffffffa0800100

func readRaceKallsyms(t *testing.T) map[uint64]string {
	t.Helper()
	f, err := os.Open(raceKallsyms)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := parseTrampolineSyms(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseTrampolineSyms(t *testing.T) {
	if got, want := readRaceKallsyms(t), map[uint64]string{raceImage: "bpf_trampoline_10737479715"}; !maps.Equal(got, want) {
		t.Errorf("%s: %v, want only the image %v", raceKallsyms, got, want)
	}
	for _, tc := range []struct {
		name, line string
		want       int
	}{
		{"an image", "ffffffffa0800100 t bpf_trampoline_6442491234\t[bpf]", 1},
		{"kptr_restrict hides the address", "0000000000000000 t bpf_trampoline_6442491234\t[bpf]", 0},
		{"a kernel function", "ffffffff811cacf0 T bpf_trampoline_put", 0},
		{"a module's function", "ffffffffc0201000 t bpf_trampoline_7\t[fth_target]", 0},
		{"not a key", "ffffffffa0800100 t bpf_trampoline_x\t[bpf]", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseTrampolineSyms(strings.NewReader(tc.line + "\n"))
			if err != nil || len(m) != tc.want {
				t.Errorf("%q: %v, %v; want %d image(s)", tc.line, m, err, tc.want)
			}
		})
	}
}

func TestParseOpsTrampolineSyms(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       int
	}{
		{"an ops trampoline", "ffffffffa0209000 t ftrace_trampoline\t[__builtin__ftrace]", 1},
		{"kptr_restrict hides the address", "0000000000000000 t ftrace_trampoline\t[__builtin__ftrace]", 0},
		{"the kernel's own", "ffffffff81e2b4d0 T ftrace_trampoline", 0},
		{"a BPF image", "ffffffffa0800100 t bpf_trampoline_6442491234\t[bpf]", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseOpsTrampolineSyms(strings.NewReader(tc.line + "\n"))
			if err != nil || len(m) != tc.want {
				t.Errorf("%q: %v, %v; want %d image(s)", tc.line, m, err, tc.want)
			}
		})
	}
}

func TestNewImage(t *testing.T) {
	const a, b, c = 0xa000, 0xb000, 0xc000
	race := readRaceKallsyms(t)
	listed := func(m map[uint64]string) map[uint64]bool {
		d := map[uint64]bool{}
		for a := range m {
			d[a] = true
		}
		return d
	}
	syms := func(addrs ...uint64) map[uint64]string {
		m := map[uint64]string{}
		for _, x := range addrs {
			m[x] = "bpf_trampoline_1"
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		before   map[uint64]string
		detached map[uint64]bool
		scans    []map[uint64]string
		want     uint64
		wantErr  bool
	}{
		{name: "a fresh place", before: syms(a), detached: map[uint64]bool{a: true}, scans: []map[uint64]string{syms(a, b)}, want: b},
		{name: "the place of the image detached last", before: syms(a), detached: map[uint64]bool{a: true}, scans: []map[uint64]string{syms(a)}, want: a},
		// arm64: the new image took the place of an earlier one while a
		// later one still waited to be freed; the next look decides.
		{name: "two detached places listed, then one", before: syms(a, b), detached: map[uint64]bool{a: true, b: true},
			scans: []map[uint64]string{syms(a, b), syms(a)}, want: a},
		// riscv64 with replace: the second image, never listed before,
		// must not pass for the new one once the agent has listed it.
		{name: "a listed second image is not fresh", before: syms(a, c), detached: map[uint64]bool{a: true, c: true},
			scans: []map[uint64]string{syms(a, c, b)}, want: b},
		{name: "nothing new", before: syms(), detached: map[uint64]bool{}, scans: []map[uint64]string{syms()}, wantErr: true},
		// CI, x86_64 with replace: the agent marks all it lists detached,
		// and the next attach put its image at the same place. Kernel
		// functions named bpf_trampoline_* once made that 13 candidates.
		{name: "the only image, in the same place", before: race, detached: listed(race),
			scans: []map[uint64]string{race}, want: raceImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			scan := func() (map[uint64]string, error) {
				m := tc.scans[min(i, len(tc.scans)-1)]
				i++
				return m, nil
			}
			got, _, _, err := newImage(scan, "bpf_trampoline_", tc.before, tc.detached)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("newImage = %#x, %v; want %#x (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// The injections walk a window's points in order, every action at an
// instruction before the next instruction; injections=all explores each
// point, trying an unexplored one (missed, not preempted) up to
// pointTries times.
func TestWindowPlaces(t *testing.T) {
	tests := []struct {
		name     string
		outcomes []string // by injection; survived after the list
		want     []string
	}{
		{"all explored", nil, []string{"+0 replace", "+0 detach", "+1 replace", "+1 detach", "+4 replace", "+4 detach"}},
		{"a not-preempted point is tried again", []string{event.InjSurvived, event.InjSurvived, event.InjNotPreempted},
			[]string{"+0 replace", "+0 detach", "+1 replace", "+1 replace", "+1 detach", "+4 replace", "+4 detach"}},
		{"a point that never holds the task is given up after pointTries", []string{event.InjMissed, event.InjNotPreempted, event.InjMissed},
			[]string{"+0 replace", "+0 replace", "+0 replace", "+0 detach", "+1 replace", "+1 detach", "+4 replace", "+4 detach"}},
		{"a crash or a free explores its point", []string{event.InjFreedUnderTask, event.InjCrashed},
			[]string{"+0 replace", "+0 detach", "+1 replace", "+1 detach", "+4 replace", "+4 detach"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &insnWindow{insns: []disasm.Insn{{Off: 0}, {Off: 1}, {Off: 4}}, actions: []string{"replace", "detach"}}
			var got []string
			for i := 0; w.wants(i, options.All); i++ {
				if i > 20 {
					t.Fatal("the walk does not end")
				}
				in, a := w.place()
				got = append(got, fmt.Sprintf("+%d %s", in.Off, a))
				o := event.InjSurvived
				if i < len(tc.outcomes) {
					o = tc.outcomes[i]
				}
				w.done(o)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("points %v, want %v", got, tc.want)
			}
		})
	}
	w := &insnWindow{insns: []disasm.Insn{{Off: 0}, {Off: 1}, {Off: 4}}, actions: []string{"replace", "detach"}}
	for range 7 {
		w.done(event.InjSurvived)
	}
	if in, a := w.place(); in.Off != 0 || a != "detach" {
		t.Errorf("point 7 = +%d %s: want the walk to wrap round", in.Off, a)
	}
	if !w.wants(9, 10) || w.wants(10, 10) {
		t.Error("a count of 10 is 10 injections")
	}
	back := &insnWindow{insns: []disasm.Insn{{Off: 0}, {Off: 1}, {Off: 4}}, actions: []string{"enable"}, backwards: true}
	var offs []int
	for i := 0; back.wants(i, options.All); i++ {
		in, _ := back.place()
		offs = append(offs, in.Off)
		back.done(event.InjSurvived)
	}
	if !slices.Equal(offs, []int{4, 1, 0}) {
		t.Errorf("a backwards walk went %v, want [4 1 0]", offs)
	}
	// injectfrom=random: the walk starts at a drawn instruction and
	// still visits every one, wrapping round.
	from := &insnWindow{insns: []disasm.Insn{{Off: 0}, {Off: 1}, {Off: 4}}, actions: []string{"enable"}, start: 2}
	offs = nil
	for i := 0; from.wants(i, options.All); i++ {
		in, _ := from.place()
		offs = append(offs, in.Off)
		from.done(event.InjSurvived)
	}
	if !slices.Equal(offs, []int{4, 0, 1}) {
		t.Errorf("a walk from instruction 2 went %v, want [4 0 1]", offs)
	}
	var none *insnWindow
	if !none.wants(0, options.All) || none.wants(1, options.All) {
		t.Error("before the window is decoded, all is one injection")
	}
	bad := &insnWindow{err: fmt.Errorf("not decoded"), actions: []string{"replace"}}
	bad.done(event.InjSurvived)
	if in, _ := bad.place(); in.Off != 0 || bad.wants(1, options.All) {
		t.Error("an undecoded window injects once, at the image's first instruction")
	}
}

// An INT3 window injection is judged by what the callsite holds after the
// patch and what the racer's calls came to; a missed one stays missed.
func TestJudgeInt3(t *testing.T) {
	for _, tc := range []struct {
		name, action, insn, after string
		trapped                   bool
		failed                    int
		outcome, msg              string
	}{
		{name: "trapped, patcher first, enabled", action: "enable-patcher-first", insn: "cc1f440000", after: "e85b1e0000", trapped: true,
			outcome: event.InjSurvived, msg: "held in smp_text_poke_int3_handler while the patcher ran on"},
		{name: "trapped, handler first, disabled", action: "disable-handler-first", insn: "cc5b1e0000", after: "0f1f440000", trapped: true,
			outcome: event.InjSurvived, msg: "ran smp_text_poke_int3_handler while the patcher was held"},
		{name: "no trap", action: "enable-handler-first", insn: "e85b1e0000", after: "e85b1e0000",
			outcome: event.InjSurvived, msg: "without trapping"},
		{name: "left disabled after an enable", action: "enable-patcher-first", insn: "cc1f440000", after: "0f1f440000", trapped: true,
			outcome: event.InjWrongState, msg: "ended as 0f1f440000, not e8"},
		{name: "left a call after a disable", action: "disable-patcher-first", insn: "cc5b1e0000", after: "e85b1e0000",
			outcome: event.InjWrongState, msg: "not 0f1f440000"},
		{name: "calls failed", action: "enable-patcher-first", insn: "0f1f440000", after: "e85b1e0000", failed: 2,
			outcome: event.InjWrongState, msg: "2 of its 10 calls failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &event.Injection{Action: tc.action, Insn: tc.insn, InsnAfter: tc.after, Outcome: event.InjReleased}
			want := "e8"
			if strings.HasPrefix(tc.action, raceDisable) {
				want = nop5
			}
			judgeInt3(in, tc.trapped, want, 10, tc.failed, 5, nil)
			if in.Outcome != tc.outcome || !strings.Contains(in.Msg, tc.msg) {
				t.Errorf("outcome %s (%s), want %s with %q", in.Outcome, in.Msg, tc.outcome, tc.msg)
			}
		})
	}
	missed := &event.Injection{Outcome: event.InjMissed, Msg: "the patcher did not stop"}
	judgeInt3(missed, false, "e8", 0, 0, 0, nil)
	if missed.Outcome != event.InjMissed || missed.Msg != "the patcher did not stop" {
		t.Errorf("a missed injection was judged: %+v", missed)
	}
}

// The INT3 window's symbols come from kallsyms, the patcher sized by the
// next symbol; a kernel without them (no KALLSYMS_ALL, not x86) is an
// error that says so.
func TestParseInt3Syms(t *testing.T) {
	const listing = `ffffffff81000000 T _stext
ffffffff81027fb0 T smp_text_poke_batch_finish
ffffffff81028380 T encode_dr7
ffffffff815917b0 T smp_text_poke_int3_handler
ffffffff8209baa0 b text_poke_array
ffffffffa00001a0 t fth_target_counted	[fth_target]
`
	s, err := parseInt3Syms(strings.NewReader(listing))
	if err != nil {
		t.Fatal(err)
	}
	if s.patcher != 0xffffffff81027fb0 || s.patcherLen != 0x3d0 || s.handler != 0xffffffff815917b0 || s.batch != 0xffffffff8209baa0 || s.stext != 0xffffffff81000000 {
		t.Errorf("syms %+v", s)
	}
	if _, err := parseInt3Syms(strings.NewReader("ffffffff81000000 T _stext\n")); err == nil || !strings.Contains(err.Error(), "KALLSYMS_ALL") {
		t.Errorf("a listing without the patcher: %v", err)
	}
}

func TestJudgeLiteral(t *testing.T) {
	const (
		nopOps  = 0xffffffff80a15c50
		listOps = 0xffffffff80a15b88
		opsA    = 0xff60000001234500
		nop     = 0x00000013 // riscv64's
		jalr    = 0x0000a0e7
	)
	// A look: the literal's 8 bytes, then a 4-byte auipc, then the
	// branch (riscv64's layout: the branch at +12).
	look := func(ops uint64, branch uint32) string {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, ops)
		binary.LittleEndian.PutUint32(b[8:], 0x00000297)
		binary.LittleEndian.PutUint32(b[12:], branch)
		return hex.EncodeToString(b)
	}
	for _, tc := range []struct {
		name    string
		looks   []string
		actErr  error
		want    string
		wantMsg string
	}{
		{"make_call: literal, then branch", []string{look(nopOps, nop), look(nopOps, nop), look(opsA, nop), look(opsA, jalr)}, nil, event.InjSurvived, "2 writes: [ftrace_nop_ops/nop ftrace_nop_ops/nop 0xff60000001234500/nop 0xff60000001234500/0000a0e7]"},
		{"make_call: branch, then literal", []string{look(nopOps, nop), look(nopOps, nop), look(nopOps, jalr), look(opsA, jalr)}, nil, event.InjWrongState, "write 1 of 2 left the branch live with ftrace_nop_ops"},
		{"make_nop: the nop ops on the way to a nop", []string{look(opsA, jalr), look(opsA, jalr), look(nopOps, jalr), look(nopOps, nop)}, nil, event.InjSurvived, ""},
		{"modify through the nop ops", []string{look(opsA, jalr), look(opsA, jalr), look(nopOps, jalr), look(listOps, jalr)}, nil, event.InjWrongState, "write 1 of 2"},
		{"left live over the nop ops", []string{look(opsA, jalr), look(opsA, jalr), look(nopOps, jalr)}, nil, event.InjWrongState, "write 1 of 1"},
		{"list to one ops, the branch rewritten the same", []string{look(listOps, jalr), look(listOps, jalr), look(opsA, jalr), look(opsA, jalr)}, nil, event.InjSurvived, "ftrace_list_ops/0000a0e7"},
		{"no write seen", []string{look(opsA, jalr), look(opsA, jalr)}, nil, event.InjMissed, "no write to the callsite was seen"},
		{"the action failed", []string{look(opsA, jalr), look(opsA, jalr), look(nopOps, jalr)}, errors.New("EBUSY"), event.InjMissed, "action: EBUSY"},
		{"an unreadable look", []string{look(opsA, jalr), "00"}, nil, event.InjMissed, "want 16 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &event.Injection{Function: "fth_target_counted", Action: "ops-on"}
			o := judgeLiteral(in, tc.looks, inlineSite(0x1000).parse, nopOps, listOps, nop, tc.actErr)
			if in.Outcome != tc.want || !strings.Contains(in.Msg, tc.wantMsg) {
				t.Fatalf("outcome %q, msg %q; want %q containing %q", in.Outcome, in.Msg, tc.want, tc.wantMsg)
			}
			if (o != nil) != (tc.want == event.InjWrongState) {
				t.Fatalf("oracle failure %+v for outcome %q", o, in.Outcome)
			}
			if o != nil && (o.Checks != 0 || o.Title != "callsite out of order: fth_target_counted's branch live with ftrace_nop_ops in its literal during ops-on") {
				t.Fatalf("oracle %+v: want a titled failure the host heads the cell with", o)
			}
		})
	}
}

// ppc64le's callsite is a branch to its out-of-line stub, which holds the
// literal (at its start - 8), mflr r0 and the bl: live only when both
// the branch and the bl are, and judged as the inline arches are.
func TestOOLSite(t *testing.T) {
	const (
		ip, stub = 0xc008000000a60010, 0xc008000000a61430
		nop      = 0x60000000
		b        = 0x48001420 // b stub, from ip
		bl       = 0x4bfffce5 // bl to the module's ftrace stub
		direct   = 0x480fe35d // bl to a BPF trampoline
		mflr     = 0x7c0802a6
		nopOps   = 0xc000000003660000
		opsA     = 0xc000000012345600
	)
	if got, ok := ppcBranchTarget(ip, b); !ok || got != stub {
		t.Fatalf("b %08x at %#x: %#x %v, want %#x", uint32(b), uint64(ip), got, ok, uint64(stub))
	}
	if _, ok := ppcBranchTarget(ip, bl); ok {
		t.Error("a bl taken for the branch to a stub")
	}
	if got, ok := ppcBranchTarget(ip, 0x4bfffff0); !ok || got != ip-16 {
		t.Errorf("a backward b: %#x %v", got, ok)
	}
	if ppcLocalEntry(0x1000, 0x3c4c0123) != 0x1008 || ppcLocalEntry(0x1000, 0x7c0802a6) != 0x1000 {
		t.Error("local entry: past addis r2,r12 only")
	}
	s := oolSite(ip, stub, nop)
	if s.lit != stub-8 || s.look2 != ip || s.condLo != ip || s.condHi != stub+8 {
		t.Fatalf("site %+v", s)
	}
	look := func(ops uint64, stubBL, site uint32) string {
		buf := make([]byte, 20)
		binary.LittleEndian.PutUint64(buf, ops)
		binary.LittleEndian.PutUint32(buf[8:], mflr)
		binary.LittleEndian.PutUint32(buf[12:], stubBL)
		binary.LittleEndian.PutUint32(buf[16:], site)
		return hex.EncodeToString(buf)
	}
	for _, tc := range []struct {
		name  string
		looks []string
		want  string
	}{
		// ftrace_replace_code's order: the literal, the stub's bl, the
		// callsite's branch.
		{"make_call in the kernel's order", []string{look(nopOps, nop, nop), look(nopOps, nop, nop), look(opsA, nop, nop), look(opsA, bl, nop), look(opsA, bl, b)}, event.InjSurvived},
		{"the bl first is still not live", []string{look(nopOps, nop, nop), look(nopOps, nop, nop), look(nopOps, bl, nop), look(opsA, bl, nop), look(opsA, bl, b)}, event.InjSurvived},
		{"make_call with the literal last", []string{look(nopOps, nop, nop), look(nopOps, nop, nop), look(nopOps, bl, nop), look(nopOps, bl, b), look(opsA, bl, b)}, event.InjWrongState},
		{"make_nop: the bl, the literal, the branch", []string{look(opsA, bl, b), look(opsA, bl, b), look(opsA, nop, b), look(nopOps, nop, b), look(nopOps, nop, nop)}, event.InjSurvived},
		// 7.3.4 taking a direct call off (fentry-off): the literal, the
		// stub's bl back to ftrace_caller (its idle state), then the
		// callsite's branch: live over the nop ops for two writes, on
		// its way to a nop.
		{"direct call off in two steps to a nop", []string{look(opsA, direct, b), look(opsA, direct, b), look(nopOps, direct, b), look(nopOps, bl, b), look(nopOps, bl, nop)}, event.InjSurvived},
		{"live over the nop ops, then another ops", []string{look(nopOps, bl, nop), look(nopOps, bl, nop), look(nopOps, bl, b), look(nopOps, direct, b), look(opsA, direct, b)}, event.InjWrongState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &event.Injection{Function: "fth_target_counted", Action: "ops-on"}
			judgeLiteral(in, tc.looks, s.parse, nopOps, 0, nop, nil)
			if in.Outcome != tc.want {
				t.Fatalf("outcome %q (%s), want %q", in.Outcome, in.Msg, tc.want)
			}
		})
	}
}

// TestBudgetOrder: in the campaign on x86_64 the two trampoline targets,
// walked whole, run first, outside the shares; elsewhere, and in a race
// scenario, the order asked for.
func TestBudgetOrder(t *testing.T) {
	in := []string{options.RaceOpsTrampoline, options.RaceTrampoline, options.RaceInt3, options.RaceFexitTrampoline}
	for _, tc := range []struct {
		name   string
		goarch string
		budget bool
		want   []string
		shared int
	}{
		{"x86_64 campaign", "amd64", true, []string{options.RaceTrampoline, options.RaceFexitTrampoline, options.RaceOpsTrampoline, options.RaceInt3}, 2},
		{"riscv64 campaign", "riscv64", true, in, 4},
		{"no budget", "amd64", false, in, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, shared := budgetOrder(in, tc.goarch, tc.budget)
			if !slices.Equal(got, tc.want) || shared != tc.shared {
				t.Errorf("%v, %d shares; want %v, %d", got, shared, tc.want, tc.shared)
			}
			if in[0] != options.RaceOpsTrampoline || in[1] != options.RaceTrampoline {
				t.Error("budgetOrder reordered its argument")
			}
		})
	}
}
