package results

import (
	"testing"

	"github.com/ftrace-harness/fth/results/console"
	"github.com/ftrace-harness/fth/wire/event"
)

// The report is the x86_64 mutant bpf-tramp-skip-rcu-tasks under the race
// scenario (fth mutate ... --agent-arg scenario=race), cut to its header.
const x86FreedTrampoline = `[    4.318957] Oops: int3: 0000 [#1] SMP
[    4.323597] CPU: 1 UID: 0 PID: 67 Comm: bb Tainted: G           O        7.3.4 #2 PREEMPT(full)
[    4.324003] RIP: 0010:0xffffffffa0800081
[    4.327995] Call Trace:
[    4.328756]  ? fth_target_counted+0x5/0x10 [fth_target]
`

// The same, the task held at the image's fourth byte, after its frame was
// built (CI, 2026-11-28): the return address is a reliable frame.
const x86FreedTrampolineFramed = `[    5.877378] Oops: int3: 0000 [#1] SMP
[    5.880988] CPU: 1 UID: 0 PID: 71 Comm: fth-racer Tainted: G           O        7.3.4 #2 PREEMPT(full)
[    5.882073] RIP: 0010:0xffffffffa0800085
[    5.885408] Call Trace:
[    5.885769]  <TASK>
[    5.886143]  fth_target_counted+0x5/0x10 [fth_target]
[    5.886570]  call_write+0x45/0x70 [fth_target]
`

// The riscv64 6.12 kernel with the function tracer allowed under
// preemption (tests/seeds), its task released at the JALR of a callsite
// whose AUIPC had not run: a jump through the stale t0.
const riscvHalfPatched = `[    6.002162] Unable to handle kernel access to user memory without uaccess routines at virtual address 00000000000004ee
[    6.004862] Oops [#1]
[    6.005639] CPU: 1 UID: 0 PID: 70 Comm: bb Tainted: G           O       6.12.117 #1
[    6.006295] epc : 0x4ee
[    6.006677]  ra : call_write+0x4c/0x64 [fth_target]
`

func TestAttributeInjection(t *testing.T) {
	released := event.Injection{Seq: 3, Symbol: "bpf_trampoline_10737479663+0x0", Addr: "0xffffffffa0800080", CPU: 1, Outcome: event.InjReleased}
	callsite := event.Injection{Seq: 1, Symbol: "fth_target_counted+0x4", Addr: "0xffffffff0115f032", CPU: 1, Outcome: event.InjReleased}
	for _, tc := range []struct {
		name      string
		inj       []event.Injection
		findings  []Finding
		wantTitle string
		wantOut   string
	}{
		{
			name:      "fault in the injected trampoline",
			inj:       []event.Injection{{Seq: 2, Outcome: event.InjSurvived}, released},
			findings:  []Finding{{Kind: "oops", Title: "Oops: int3", Report: x86FreedTrampoline}},
			wantTitle: "Oops: int3 in bpf_trampoline_10737479663",
			wantOut:   event.InjCrashed,
		},
		{
			name:      "seen changed under the held task, then the crash",
			inj:       []event.Injection{{Seq: 1, Symbol: released.Symbol, Addr: released.Addr, CPU: 1, Insn: "554889e54883ec28", InsnAfter: "cccccccccccccccc", Outcome: event.InjFreedUnderTask}},
			findings:  []Finding{{Kind: "oops", Title: "Oops: int3", Report: x86FreedTrampoline}},
			wantTitle: "Oops: int3 in bpf_trampoline_10737479663",
			wantOut:   event.InjCrashed,
		},
		{
			// Held past the frame set-up, the unwinder trusts the return
			// address: the report names the traced function.
			name:      "fault in the trampoline below a reliable frame",
			inj:       []event.Injection{released},
			findings:  []Finding{{Kind: "oops", Title: "Oops: int3 in fth_target_counted", Function: "fth_target_counted", Report: x86FreedTrampolineFramed}},
			wantTitle: "Oops: int3 in bpf_trampoline_10737479663",
			wantOut:   event.InjCrashed,
		},
		{
			name:      "jump through a stale register on the held CPU",
			inj:       []event.Injection{callsite},
			findings:  []Finding{{Kind: "oops", Title: "Unable to handle kernel access to user memory", Report: riscvHalfPatched}},
			wantTitle: "Unable to handle kernel access to user memory in fth_target_counted",
			wantOut:   event.InjCrashed,
		},
		{
			name:      "a functionless report from another CPU keeps its title",
			inj:       []event.Injection{{Seq: 1, Symbol: callsite.Symbol, Addr: callsite.Addr, CPU: 0, Outcome: event.InjReleased}},
			findings:  []Finding{{Kind: "oops", Title: "Unable to handle kernel access to user memory", Report: riscvHalfPatched}},
			wantTitle: "Unable to handle kernel access to user memory",
			wantOut:   event.InjCrashed,
		},
		{
			name:      "fault elsewhere keeps its title",
			inj:       []event.Injection{released},
			findings:  []Finding{{Kind: "oops", Title: "BUG: unable to handle page fault in do_nanosleep", Function: "do_nanosleep", Report: "RIP: 0010:do_nanosleep+0x10/0x20"}},
			wantTitle: "BUG: unable to handle page fault in do_nanosleep",
			wantOut:   event.InjCrashed,
		},
		{
			name:      "a judged injection is left alone",
			inj:       []event.Injection{{Seq: 1, Symbol: released.Symbol, Addr: released.Addr, Outcome: event.InjSurvived}},
			findings:  []Finding{{Kind: "oops", Title: "Oops: int3", Report: x86FreedTrampoline}},
			wantTitle: "Oops: int3",
			wantOut:   event.InjSurvived,
		},
		{
			name:      "a known finding is not the injection's",
			inj:       []event.Injection{released},
			findings:  []Finding{{Kind: "oops", Title: "Oops: int3", Report: x86FreedTrampoline, Known: "x86-mttcg-int3"}},
			wantTitle: "Oops: int3",
			wantOut:   event.InjReleased,
		},
		{
			name:      "a stall the harness caused is not the injection's",
			inj:       []event.Injection{released},
			findings:  []Finding{{Kind: console.KindHarnessInduced, Title: "hang: the harness starved the guest", Report: x86FreedTrampoline}},
			wantTitle: "hang: the harness starved the guest",
			wantOut:   event.InjReleased,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Injections: append([]event.Injection(nil), tc.inj...), Findings: tc.findings}
			AttributeInjection(r)
			if got := r.Findings[0].Title; got != tc.wantTitle {
				t.Errorf("title = %q, want %q", got, tc.wantTitle)
			}
			last := r.Injections[len(r.Injections)-1]
			if last.Outcome != tc.wantOut {
				t.Errorf("outcome = %q, want %q", last.Outcome, tc.wantOut)
			}
			if tc.wantOut == event.InjCrashed && last.Title != tc.wantTitle {
				t.Errorf("injection title = %q, want %q", last.Title, tc.wantTitle)
			}
		})
	}
}

func TestFaultPC(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"RIP: 0010:0xffffffffa0800081", 0xffffffffa0800081, true},
		{"[  5.1] epc : ffffffff01234568 ra : fth_target_counted+0x4/0x10", 0xffffffff01234568, true},
		{"[  5.1] pc : ffff800080a00004 lr : x", 0xffff800080a00004, true},
		{"RIP: 0010:do_nanosleep+0x10/0x20", 0, false},
	} {
		got, ok := faultPC(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("faultPC(%q) = %#x, %v; want %#x, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// The x86_64 mutant bpf-tramp-free-now under the campaign's churn
// (TestMutationX86): a task returned into a trampoline image freed at
// once, whose pages are int3 fill. Cut to its header and stack.
const x86FreedInChurn = `[   66.747112] Oops: int3: 0000 [#1] SMP
[   66.748186] CPU: 0 UID: 0 PID: 55 Comm: uinit Tainted: G           O        7.3.4 #2 PREEMPT(full)
[   66.749450] RIP: 0010:0xffffffffa007fb37
[   66.754167] Call Trace:
[   66.755082]  <TASK>
[   66.755488]  ? can_nice+0x40/0x40
[   66.755776]  __do_sys_sched_yield+0xa/0x10
[   66.756033]  do_syscall_64+0x68/0x320
[   66.756199]  entry_SYSCALL_64_after_hwframe+0x4b/0x53
`

func TestAttributeFreedImage(t *testing.T) {
	tramp := event.Image{Name: "bpf_trampoline_6442491234", Addr: 0xffffffffa007fb00, Len: 0x80}
	reused := event.Image{Name: "bpf_trampoline_6442499999", Addr: 0xffffffffa007fb00, Len: 0x30}
	reusedOver := event.Image{Name: "bpf_trampoline_6442499999", Addr: 0xffffffffa007fb20, Len: 0x80}
	elsewhere := event.Image{Name: "bpf_trampoline_1", Addr: 0xffffffffa0070000, Len: 0x80}
	parsed := console.Parse([]byte(x86FreedInChurn))
	if len(parsed) != 1 || parsed[0].Title != "Oops: int3 in sched_yield" {
		t.Fatalf("the parser titles the fixture %+v; the test assumes the stack's frame", parsed)
	}
	p := parsed[0]
	stackTitled := Finding{Kind: p.Kind, Title: p.Title, Function: p.Function, Report: p.Report}
	for _, tc := range []struct {
		name      string
		images    []event.Image
		finding   Finding
		wantTitle string
	}{
		{"the image that lay there", []event.Image{elsewhere, tramp}, stackTitled, "Oops: int3 in freed bpf_trampoline_6442491234"},
		// Pages are reused: the latest image over the address is the
		// one; a later one that ends before it is not.
		{"an earlier image, where a later one is too short", []event.Image{tramp, reused}, stackTitled, "Oops: int3 in freed bpf_trampoline_6442491234"},
		{"the latest image covering the address", []event.Image{tramp, reusedOver}, stackTitled, "Oops: int3 in freed bpf_trampoline_6442499999"},
		{"no function of its own (arm64's BRK)", []event.Image{tramp}, Finding{Kind: "oops", Title: "Oops: int3", Report: x86FreedInChurn}, "Oops: int3 in freed bpf_trampoline_6442491234"},
		{"no image there", []event.Image{elsewhere}, stackTitled, "Oops: int3 in sched_yield"},
		{"a symbolized fault", []event.Image{tramp}, Finding{Kind: "oops", Title: "Oops: int3 in up_read", Function: "up_read", Report: "RIP: 0010:up_read+0x1/0x40\n"}, "Oops: int3 in up_read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Findings: []Finding{tc.finding}, images: tc.images}
			changed := AttributeFreedImage(r)
			if got := r.Findings[0].Title; got != tc.wantTitle {
				t.Errorf("title %q, want %q", got, tc.wantTitle)
			}
			if changed != (tc.wantTitle != tc.finding.Title) {
				t.Errorf("changed = %v", changed)
			}
		})
	}
}

// The monitor names a freed image first, then the injection: a fault in
// an image the agent saw keeps the image's name, once (the campaign,
// whose image watch runs beside the race: "Oops: int3 in freed
// bpf_trampoline_A in bpf_trampoline_B" before this, 2026-11-28).
func TestAttributeFreedImageThenInjection(t *testing.T) {
	// x86FreedTrampolineFramed faults at 0xffffffffa0800085.
	image := event.Image{Name: "bpf_trampoline_10737479663", Addr: 0xffffffffa0800080, Len: 0xa8}
	held := event.Injection{Seq: 3, Symbol: "bpf_trampoline_10737479663+0x4", Addr: "0xffffffffa0800084", Offset: 4, CPU: 1, Outcome: event.InjReleased}
	r := &Result{
		Findings:   []Finding{{Kind: "oops", Title: "Oops: int3 in fth_target_counted", Function: "fth_target_counted", Report: x86FreedTrampolineFramed}},
		Injections: []event.Injection{held},
		images:     []event.Image{image},
	}
	AttributeFreedImage(r)
	AttributeInjection(r)
	const want = "Oops: int3 in freed bpf_trampoline_10737479663"
	if got := r.Findings[0].Title; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if in := r.Injections[0]; in.Outcome != event.InjCrashed || in.Title != want {
		t.Errorf("injection %s titled %q, want crashed with %q", in.Outcome, in.Title, want)
	}
}
