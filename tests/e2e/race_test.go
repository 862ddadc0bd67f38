package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// raceInjections is how many preemptions the correct-kernel tests inject.
const raceInjections = 10

// preemptorWakeSlackMS bounds how long after the vCPU's release the
// preemptor may start spinning: its wakeup's IPI waits on the released
// vCPU, and a loaded TCG host takes milliseconds to deliver it.
const preemptorWakeSlackMS = 50

// racePasses checks a race cell on a correct kernel: a pass, every
// injection held at its target (the task preempted there for the whole
// window, not run on) and survived, and no image freed under the task.
func racePasses(t *testing.T, r fthRun, points int) {
	t.Helper()
	r.mustCell(t)
	if r.exit != 0 || r.result.Verdict != results.Pass {
		t.Fatalf("exit %d, verdict %s (%s): a correct kernel must survive every injection", r.exit, r.result.Verdict, r.result.Reason)
	}
	type point struct {
		target string
		off    int
		action string
	}
	explored, tried := map[point]bool{}, map[point]string{}
	for _, in := range r.result.Injections {
		p := point{in.Target, in.Offset, in.Action}
		switch in.Outcome {
		case event.InjSurvived:
			explored[p] = true
		case event.InjNotPreempted, event.InjMissed:
			// Held nowhere or not long enough (a loaded machine's
			// preemptor gives up at its bound): the agent tries the
			// point again, and another injection must explore it.
			tried[p] = fmt.Sprintf("injection %d at %s: %s (%s)", in.Seq, in.Symbol, in.Outcome, in.Msg)
			t.Log(tried[p])
			continue
		default:
			t.Errorf("injection %d at %s: %s (%s)", in.Seq, in.Symbol, in.Outcome, in.Msg)
			continue
		}
		// Held: preempted at least once, and off the CPU while the
		// preemptor spun there for the window. The window counts from
		// the vCPU's release and the spin from the preemptor's wakeup,
		// which comes after it (CI: a spin 4 ms short of a 700 ms window).
		if in.Preemptions < 1 || in.HeldMS < in.SpunMS || in.SpunMS < in.WindowMS-preemptorWakeSlackMS {
			t.Errorf("injection %d at %s was not held: %d preemptions, call %.0f ms, preemptor %.0f ms, window %.0f ms", in.Seq, in.Symbol, in.Preemptions, in.HeldMS, in.SpunMS, in.WindowMS)
		}
		if in.Insn == "" {
			t.Errorf("injection %d: no instruction bytes at %s", in.Seq, in.Symbol)
		}
	}
	for p, why := range tried {
		if !explored[p] {
			t.Errorf("never explored, the last try: %s", why)
		}
	}
	if len(explored) != points {
		t.Errorf("%d points explored, want %d", len(explored), points)
	}
	t.Logf("seed %s; %d injections at %d points, e.g. %+v", r.result.Seed, len(r.result.Injections), points, r.result.Injections[0])
}

// survivedOnly is the injections that explored their point.
func survivedOnly(in []event.Injection) []event.Injection {
	return slices.DeleteFunc(slices.Clone(in), func(in event.Injection) bool { return in.Outcome != event.InjSurvived })
}

// On the correct 7.3.4 x86_64 kernel a task is stopped through the
// gdbstub at every instruction of two windows in turn and preempted there:
// a BPF trampoline's, which is regenerated (a second program attached)
// while the task stays off the CPU, and a function tracer instance's
// ftrace_ops trampoline, whose tracer is switched off meanwhile. RCU-tasks
// must keep each image until the task has left it, every time.
func TestX86RaceTrampolinesSurvive(t *testing.T) {
	r := runFth(t, 20*time.Minute, "--agent-arg", "scenario=race", "--agent-arg", "racetarget=trampoline,opstramp")
	want := map[string]struct {
		symbol  string
		actions []string
	}{
		"trampoline": {"bpf_trampoline_", []string{"replace"}},
		"opstramp":   {"ftrace_trampoline", []string{"tracer-off"}},
	}
	if len(r.result.Windows) != 2 {
		t.Fatalf("windows %+v: want the trampoline's and the ops trampoline's, decoded (x86_64 7.3.4: 26 and 33 instructions)", r.result.Windows)
	}
	total := 0
	offsets := map[string][]int{}
	for _, w := range r.result.Windows {
		if w.Unreachable != "" || len(w.Insns) < 10 {
			t.Fatalf("window %s: %d instructions (%s): want it decoded", w.Target, len(w.Insns), w.Unreachable)
		}
		n, a := len(w.Insns), len(want[w.Target].actions)
		total += n * a
		for _, in := range w.Insns {
			for range a {
				offsets[w.Target] = append(offsets[w.Target], in.Off)
			}
		}
		// Every point explored once, and the run says so.
		unit := "actions"
		if a == 1 {
			unit = "action"
		}
		line := fmt.Sprintf("%s: %d of %d instruction×action points explored (%d instructions × %d %s), %d survived", w.Target, n*a, n*a, n, a, unit, n*a)
		if !strings.Contains(r.stdout, line) {
			t.Errorf("stdout lacks the coverage line %q", line)
		}
	}
	racePasses(t, r, total)
	seen := map[string]int{}
	for _, in := range survivedOnly(r.result.Injections) {
		w, ok := want[in.Target]
		if !ok || !strings.HasPrefix(in.Symbol, w.symbol) || !slices.Contains(w.actions, in.Action) {
			t.Errorf("injection %d: target %s at %s, action %s", in.Seq, in.Target, in.Symbol, in.Action)
			continue
		}
		// Each target's injections walk its window in order.
		if i := seen[in.Target]; i < len(offsets[in.Target]) && (in.Offset != offsets[in.Target][i] || in.Asm == "") {
			t.Errorf("injection %d at %s (%q): want the window's instruction %d at +%#x", in.Seq, in.Symbol, in.Asm, i, offsets[in.Target][i])
		}
		seen[in.Target]++
		// A detach patches the held image in place (x86: a nop5 turned
		// into a jump to the epilogue); only a free is a failure.
		if in.FreedInWindow || (in.InsnAfter != in.Insn && !strings.Contains(in.Msg, "patched, not freed")) {
			t.Errorf("injection %d (%s): the bytes under the held task went from %s to %q on a correct kernel: %s", in.Seq, in.Action, in.Insn, in.InsnAfter, in.Msg)
		}
	}

	// fth repro replays the same injections: same target, same place.
	// Not the same bytes: an instruction that loads the program's address
	// or calls out of the image differs from boot to boot.
	out := filepath.Join(filepath.Dir(filepath.Dir(r.cell)), "repro")
	rr := runCell(t, 20*time.Minute, out, fthBin, "repro", "--out", out, "--run-id", "r", r.cell)
	// Compared by the points they explored: a point tried again on
	// one run need not be on the other.
	again, first := survivedOnly(rr.result.Injections), survivedOnly(r.result.Injections)
	if rr.exit != 0 || len(again) != total || len(first) != total {
		t.Fatalf("repro: exit %d, %d of %d injections explored their point; the run explored %d", rr.exit, len(again), len(rr.result.Injections), len(first))
	}
	for i, in := range again {
		was := first[i]
		if in.Symbol != was.Symbol || in.Target != was.Target || in.Offset != was.Offset {
			t.Errorf("repro injection %d: %s at %s, %s; the run had %s at %s", in.Seq, in.Target, in.Symbol, in.Outcome, was.Target, was.Symbol)
		}
	}
}

// The same injections on a kernel that frees trampoline images after
// RCU-tasks-trace only (mutants/bpf-tramp-skip-rcu-tasks.patch: the class
// "trampoline freed early" that random stress never caught in two
// minutes) crash it at the first injection, within a minute of boot, with
// a title that names the trampoline; the unmutated kernel passes the same
// scenario in the same run.
func TestX86RaceCatchesTrampolineFreedEarly(t *testing.T) {
	raceCatchesFreedEarly(t, "x86_64", "bpf-tramp-skip-rcu-tasks", "trampoline", "bpf_trampoline_")
}

// A function tracer instance's ftrace_ops trampoline freed without the
// RCU-tasks wait (mutants/ftrace-ops-tramp-free-early.patch) escaped the
// churn and the BPF trampoline races: the task held in the ops trampoline
// while the instance's tracer goes off crashes it at the first injection.
func TestX86RaceCatchesOpsTrampolineFreedEarly(t *testing.T) {
	raceCatchesFreedEarly(t, "x86_64", "ftrace-ops-tramp-free-early", "opstramp", "ftrace_trampoline")
}

// The direct-modify window: a second fentry on the traced function makes
// the kernel build a new image and move the callsite's direct call to it
// (update_ftrace_direct_mod on x86_64 7.3, modify_ftrace_direct
// elsewhere) while a task is held in the old one. Without the temporary
// ops that reroutes the callsite meanwhile
// (mutants/direct-modify-no-tmp-ops.patch) the callsite keeps calling the
// old image, which is freed once the held task has left it. Measured:
// the kernel notices first, when a change that rewrites the callsite finds
// its bytes not what it wrote ("WARNING in ftrace_replace_code"), so the
// test wants the mutant caught at once, not necessarily by a crash: at
// injection 1 (3.3 s after boot) while each injection ended with both
// programs detached; with the first program's link kept, the next change
// is the second program's detach, another direct modify, and the callsite
// is rewritten only when the cell lets go of the link after injection 2,
// which waits in vain for the racer at the new image (the callsite still
// calls the first): 12.1 s after boot.
func TestX86RaceCatchesDirectModifyWithoutTmpOps(t *testing.T) {
	raceCatches(t, "x86_64", "direct-modify-no-tmp-ops", "trampoline", "", false, "raceaction=replace")
}

// The same on arm64 and riscv64 (CALL_OPS), where a detach alone would
// have hidden the bug (ftrace_shutdown waits for RCU-tasks itself): two
// more patched kernels and arm64 boots, so make test-all.
func TestRaceCatchesTrampolineFreedEarlyCallOps(t *testing.T) {
	requireAll(t)
	raceCatchesFreedEarly(t, "arm64,riscv64", "bpf-tramp-skip-rcu-tasks", "trampoline", "bpf_trampoline_")
}

// The same on ppc64le (gcc 14 trampolines, make test-all): the bytes under
// the held task turn into the freed image's trap fill, then the kernel
// oopses in the caller, whose name the title carries (measured:
// "Oops: Exception in kernel mode in full_proxy_write", 3.7 s after boot).
func TestPPC64LERaceCatchesTrampolineFreedEarly(t *testing.T) {
	requireAll(t)
	raceCatchesFreedEarly(t, "ppc64le", "bpf-tramp-skip-rcu-tasks", "trampoline", "")
}

// raceCatchesFreedEarly runs mutant against the race at target on arches
// (with agentArgs besides):
// the unmutated kernel survives every injection, the mutant crashes at the
// first whose action ends while the task is held, within a minute of
// boot, with a title naming place (if given).
func raceCatchesFreedEarly(t *testing.T, arches, mutant, target, place string, agentArgs ...string) {
	raceCatches(t, arches, mutant, target, place, true, agentArgs...)
}

// raceCatches is raceCatchesFreedEarly; without crash, the mutant may be
// caught otherwise than by a crash of the held task (a warning of the
// kernel's own), but by the second injection.
func raceCatches(t *testing.T, arches, mutant, target, place string, crash bool, agentArgs ...string) {
	out := e2eOut(t)
	args := []string{"mutate", "--arches", arches, "--mutants", mutant, "--agent-arg", "scenario=race", "--agent-arg", "racetarget=" + target,
		"--agent-arg", fmt.Sprintf("injections=%d", raceInjections), "--require-detected", "--out", out, "--run-id", "m"}
	for _, a := range agentArgs {
		args = append(args, "--agent-arg", a)
	}
	r := runCell(t, 40*time.Minute, out, fthBin, args...)
	table := mutationTable(t, filepath.Join(out, "m"))
	for _, row := range table.Rows {
		res, err := results.ReadResult(filepath.Join(out, "m", row.Cell, results.ResultFile))
		if err != nil {
			t.Fatalf("%s: %v", row.Cell, err)
		}
		if row.Mutant == "" {
			if row.Verdict != results.Pass || len(res.Injections) != raceInjections {
				t.Errorf("the unmutated kernel: verdict %s (%s), %d injections: it must pass all %d", row.Verdict, row.Reason, len(res.Injections), raceInjections)
			}
			continue
		}
		if !row.Detected {
			t.Fatalf("mutant %s not detected: verdict %s (%s)", row.Mutant, row.Verdict, row.Reason)
		}
		if row.Seconds >= 60 {
			t.Errorf("mutant %s crashed %.1f s after boot, want under 60", row.Mutant, row.Seconds)
		}
		// The first injection that sees the image freed while the task
		// is held crashes the kernel. One before it may have seen no
		// free in the window: its action outran the window (a cold
		// detach under TCG took 853 ms against x86's 400 ms window in
		// CI), or the detach returned in it but the free it queued
		// (after an RCU-tasks-trace grace period, then a work item)
		// came after the task ran on (CI, injection 1 of a run).
		inj := res.Injections
		if !crash {
			if len(inj) > 2 {
				t.Errorf("mutant %s: %d injections, want it caught by the second: %+v", row.Mutant, len(inj), inj)
			}
			t.Logf("mutant %s caught at injection %d, %.1f s after boot: %s", row.Mutant, len(inj), row.Seconds, row.Title)
			continue
		}
		if len(inj) == 0 || inj[len(inj)-1].Outcome != event.InjCrashed {
			t.Errorf("mutant %s: injections %+v; want the last one crashed", row.Mutant, inj)
		}
		for _, in := range inj[:max(len(inj)-1, 0)] {
			// An image seen freed in the window is never judged
			// survived (freed-under-task).
			if in.Outcome != event.InjSurvived {
				t.Errorf("mutant %s: injection %d before the crash: outcome %s (action done in the window %v, late %v): only a free after the window may spare the task", row.Mutant, in.Seq, in.Outcome, in.ActionDone, in.ActionLate)
			}
		}
		if place != "" && !strings.Contains(row.Title, place) {
			t.Errorf("mutant %s: title %q does not name the %s", row.Mutant, row.Title, place)
		}
		t.Logf("mutant %s crashed at injection %d, %.1f s after boot: %s", row.Mutant, len(inj), row.Seconds, row.Title)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
}

// riscv64 7.3 patches only the JALR of a callsite whose AUIPC stays: a
// task preempted between the two while tracing is switched on runs on
// safely, every time.
func TestRISCV64RaceCallsiteSurvives(t *testing.T) {
	requireAll(t)
	r := runFthArch(t, "riscv64", 40*time.Minute, "--agent-arg", "scenario=race", "--agent-arg", "racetarget=callsite",
		"--agent-arg", fmt.Sprintf("injections=%d", raceInjections))
	// One place, injected at raceInjections times.
	racePasses(t, r, 1)
	if len(r.result.Injections) != raceInjections {
		t.Errorf("%d injections, want %d", len(r.result.Injections), raceInjections)
	}
}

// The seed's own race, on the kernel that had it. Linux 6.12's riscv
// Kconfig keeps the function tracer off under preemption because a task
// preempted between AUIPC and JALR while stop_machine() rewrites both
// jumps through a stale t0. With that guard removed
// (tests/seeds/riscv64-6.12-ftrace-under-preemption.patch) the first
// injection between the two crashes the kernel, on the held CPU; 6.12 as
// shipped (no preemption) takes the same injections without being
// preempted and survives. Two cold riscv64 6.12 builds: make test-all.
func TestRISCV64Seed612HalfPatchedCallsite(t *testing.T) {
	requireAll(t)
	race := []string{"--kernel", "6.12", "--agent-arg", "scenario=race", "--agent-arg", "racetarget=callsite", "--agent-arg", "injections=5"}

	t.Run("preemptible", func(t *testing.T) {
		r := runFthArch(t, "riscv64", 60*time.Minute, append(race, "--patch", "tests/seeds/riscv64-6.12-ftrace-under-preemption.patch",
			"--fragments", "base,arch/riscv64,preempt/full")...)
		r.mustCell(t)
		if r.result.Verdict != results.Fail {
			t.Fatalf("verdict %s (%s): the half-patched callsite must crash the kernel", r.result.Verdict, r.result.Reason)
		}
		inj := r.result.Injections
		if len(inj) != 1 || inj[0].Outcome != event.InjCrashed || !strings.Contains(inj[0].Title, "fth_target_counted") {
			t.Fatalf("injections %+v: want the first one crashed, titled after the callsite", inj)
		}
		t.Logf("crashed at injection 1 (%s): %s", inj[0].Symbol, inj[0].Title)
	})
	t.Run("as-shipped", func(t *testing.T) {
		r := runFthArch(t, "riscv64", 60*time.Minute, append(race, "--fragments", "base,arch/riscv64,preempt/none")...)
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			t.Fatalf("exit %d, verdict %s (%s): 6.12 as shipped must survive", r.exit, r.result.Verdict, r.result.Reason)
		}
		if len(r.result.Injections) != 5 {
			t.Fatalf("%d injections, want 5", len(r.result.Injections))
		}
		for _, in := range r.result.Injections {
			if in.Outcome != event.InjNotPreempted || in.Insn == "" {
				t.Errorf("injection %d: %s (%s); without preemption the held task runs on", in.Seq, in.Outcome, in.Msg)
			}
		}
	})
}

// fth race --list-windows boots the kernel and lists every window the
// race walks, decoded from the running kernel, injecting nothing.
func TestX86RaceListWindows(t *testing.T) {
	out := e2eOut(t)
	r := runCell(t, 15*time.Minute, out, fthBin, "race", "--list-windows", "--out", out, "--run-id", "r")
	if r.exit != 0 {
		t.Fatalf("exit %d", r.exit)
	}
	for _, want := range []string{"trampoline (bpf_trampoline_", "fexittramp (bpf_trampoline_", "opstramp (ftrace_trampoline", "int3 (smp_text_poke_batch_finish", "+0x0   push %rbp", "retq"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the list lacks %q", want)
		}
	}
	if len(r.result.Windows) != 4 || len(r.result.Injections) != 0 {
		t.Errorf("%d windows, %d injections: want four windows (fentry and fexit trampolines, ops trampoline, INT3) and nothing injected", len(r.result.Windows), len(r.result.Injections))
	}
}

// The INT3 window on x86_64: the patcher is held at each step of
// smp_text_poke_batch_finish while it patches fth_target_counted's
// callsite, in both orders and both directions. The correct kernel
// survives every point; a batch that ends without the final sync
// (x86-int3-no-final-sync) dies when a racer held in the handler runs
// after the patcher has finished (patcher first), and a batch published
// to the handler after its INT3 is written (x86-int3-refs-after-int3)
// dies when the racer traps between the two: at the handler-first step
// there, or earlier when the racer, which calls back to back through
// every patch, happens to trap in that gap (measured: injection 14,
// disable-patcher-first); a sync that does not wait for its IPIs
// (x86-int3-sync-no-wait) dies as the first does. Each within the
// window's first pass.
func TestX86RaceInt3(t *testing.T) {
	out := e2eOut(t)
	args := []string{"mutate", "--arches", "x86_64", "--mutants", "x86-int3-no-final-sync,x86-int3-refs-after-int3,x86-int3-sync-no-wait",
		"--agent-arg", "scenario=race", "--agent-arg", "racetarget=int3", "--require-detected", "--out", out, "--run-id", "m"}
	r := runCell(t, 40*time.Minute, out, fthBin, args...)
	table := mutationTable(t, filepath.Join(out, "m"))
	if len(table.Rows) != 4 {
		t.Fatalf("rows %+v: want the unmutated kernel and 3 mutants", table.Rows)
	}
	for _, row := range table.Rows {
		res, err := results.ReadResult(filepath.Join(out, "m", row.Cell, results.ResultFile))
		if err != nil {
			t.Fatalf("%s: %v", row.Cell, err)
		}
		if row.Mutant == "" {
			if row.Verdict != results.Pass || len(res.Windows) != 1 {
				t.Fatalf("the unmutated kernel: verdict %s (%s), windows %+v", row.Verdict, row.Reason, res.Windows)
			}
			w := res.Windows[0]
			// x86_64 7.3.4: 8 steps (after each call and the refs'
			// lock decl; __fentry__ is a nop at run time) × 4 actions.
			if len(w.Insns) < 6 || len(w.Actions) != 4 {
				t.Errorf("int3 window: %d steps × %v", len(w.Insns), w.Actions)
			}
			n := len(w.Insns) * len(w.Actions)
			line := fmt.Sprintf("int3: %d of %d instruction×action points explored (%d instructions × 4 actions), %d survived", n, n, len(w.Insns), n)
			if cov := res.RaceCoverage(); len(cov) != 1 || cov[0].String() != line {
				t.Errorf("coverage %v, want %q", cov, line)
			}
			trapped := 0
			for _, in := range survivedOnly(res.Injections) {
				if strings.HasPrefix(in.Insn, "cc") {
					trapped++
				}
				if in.InsnAfter == "" || in.Msg == "" {
					t.Errorf("injection %d at %s: no final bytes or account: %+v", in.Seq, in.Symbol, in)
				}
			}
			// The racer ran into the INT3 at the steps between the
			// first and the third write, for every action.
			if trapped < 8 {
				t.Errorf("%d injections saw the callsite hold the INT3, want the steps between its write and the last (at least 2 × 4)", trapped)
			}
			continue
		}
		if !row.Detected || !strings.HasPrefix(row.Title, "Oops: int3") {
			t.Errorf("mutant %s: detected %v, title %q: want Oops: int3", row.Mutant, row.Detected, row.Title)
			continue
		}
		last := res.Injections[len(res.Injections)-1]
		if last.Target != "int3" || last.Outcome != event.InjCrashed || len(res.Injections) > 32 {
			t.Errorf("mutant %s: injection %d (%s %s at %s): %s; want an int3 injection of the first pass crashed", row.Mutant, last.Seq, last.Target, last.Action, last.Symbol, last.Outcome)
		}
		t.Logf("mutant %s: %.1f s, injection %d (%s at %s): %s", row.Mutant, row.Seconds, last.Seq, last.Action, last.Symbol, row.Title)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
}

// The CALL_OPS window: ftrace_caller from the load of the callsite's ops
// literal to the call of op->func, every instruction, the function tracer
// instance removed meanwhile. The correct kernel survives every point
// (ftrace_shutdown's RCU-tasks wait keeps the ops alive until the held
// task has called through it); with the waits gone
// (mutants/ftrace-ops-tramp-free-early.patch, the x86 mutant's change) the
// first point after the task loaded the ops crashes the kernel, every
// point before it survived. riscv64 (QEMU 11.1) and arm64 in make
// test-all: a cold riscv64 build does not fit CI's 90 minutes beside the
// x86_64 suite.
func TestRISCV64RaceCallOpsWindow(t *testing.T) {
	requireAll(t)
	raceCallOps(t, "riscv64")
}

func TestARM64RaceCallOpsWindow(t *testing.T) {
	requireAll(t)
	raceCallOps(t, "arm64")
}

func raceCallOps(t *testing.T, arch string) {
	race := []string{"--agent-arg", "scenario=race", "--agent-arg", "racetarget=callops", "--agent-arg", "injections=all"}
	t.Run("correct", func(t *testing.T) {
		r := runFthArch(t, arch, 40*time.Minute, race...)
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			t.Fatalf("exit %d, verdict %s (%s)", r.exit, r.result.Verdict, r.result.Reason)
		}
		if len(r.result.Windows) != 1 || len(r.result.Windows[0].Insns) < 10 {
			t.Fatalf("windows %+v: want ftrace_caller's CALL_OPS window decoded", r.result.Windows)
		}
		explored := map[int]bool{}
		for _, in := range r.result.Injections {
			if in.Outcome == event.InjSurvived {
				explored[in.Offset] = true
			}
		}
		t.Logf("%d of %d instructions held and survived, %d injections", len(explored), len(r.result.Windows[0].Insns), len(r.result.Injections))
		if len(explored) < len(r.result.Windows[0].Insns)*9/10 {
			t.Errorf("only %d of %d instructions held and survived", len(explored), len(r.result.Windows[0].Insns))
		}
	})
	t.Run("ops-freed-early", func(t *testing.T) {
		r := runFthArch(t, arch, 40*time.Minute, append(race, "--patch", "mutants/ftrace-ops-tramp-free-early.patch")...)
		r.mustCell(t)
		if r.result.Verdict != results.Fail {
			t.Fatalf("verdict %s (%s): the ops freed under the held task must crash the kernel", r.result.Verdict, r.result.Reason)
		}
		inj := r.result.Injections
		if len(inj) == 0 || inj[len(inj)-1].Outcome != event.InjCrashed {
			t.Fatalf("injections %+v: want the last one crashed", inj)
		}
		for _, in := range inj[:len(inj)-1] {
			if in.Outcome == event.InjCrashed || in.Outcome == event.InjFreedUnderTask {
				t.Errorf("injection %d: %s before the last", in.Seq, in.Outcome)
			}
		}
		last := inj[len(inj)-1]
		t.Logf("crashed at injection %d, %s (%s): %s", len(inj), last.Symbol, last.Asm, r.result.Title())
	})
}

// The literal target: every write to fth_target_counted's CALL_OPS
// callsite traced through the gdbstub while the callsite walks from nop
// through one ops, the list ops and a direct call and back. On the
// correct kernel every transition writes the literal before the branch
// goes live (10 of 10 survive); with the branch written first
// (mutants/<arch>-callops-literal-after-branch.patch, which no count of
// calls can see: only the user being attached loses calls) the first
// transition, nop to one ops, fails with the title that says so.
// riscv64 (QEMU 11.1) and arm64 in make test-all.
func TestRISCV64RaceLiteralOrder(t *testing.T) {
	requireAll(t)
	raceLiteralOrder(t, "riscv64")
}

func TestARM64RaceLiteralOrder(t *testing.T) {
	requireAll(t)
	raceLiteralOrder(t, "arm64")
}

// ppc64le's literal and bl are in the callsite's out-of-line stub, its
// branch at the callsite: the same walk, the same rule (make test-all).
func TestPPC64LERaceLiteralOrder(t *testing.T) {
	requireAll(t)
	raceLiteralOrder(t, "ppc64le")
}

func raceLiteralOrder(t *testing.T, arch string) {
	out := e2eOut(t)
	mutant := arch + "-callops-literal-after-branch"
	r := runCell(t, 40*time.Minute, out, fthBin, "mutate", "--arches", arch, "--mutants", mutant, "--agent-arg", "scenario=race",
		"--agent-arg", "racetarget=literal", "--require-detected", "--out", out, "--run-id", "m")
	table := mutationTable(t, filepath.Join(out, "m"))
	if len(table.Rows) != 2 {
		t.Fatalf("%d rows, want the unmutated kernel and %s", len(table.Rows), mutant)
	}
	const title = "callsite out of order: fth_target_counted's branch live with ftrace_nop_ops in its literal during ops-on"
	for _, row := range table.Rows {
		res, err := results.ReadResult(filepath.Join(out, "m", row.Cell, results.ResultFile))
		if err != nil {
			t.Fatalf("%s: %v", row.Cell, err)
		}
		if row.Mutant == "" {
			if row.Verdict != results.Pass || len(survivedOnly(res.Injections)) != 10 {
				t.Errorf("the unmutated kernel: verdict %s (%s), %d of %d transitions survived: want all 10", row.Verdict, row.Reason, len(survivedOnly(res.Injections)), len(res.Injections))
			}
			for _, in := range res.Injections {
				t.Logf("%s: %s: %s", in.Action, in.Outcome, in.Msg)
			}
			continue
		}
		if !row.Detected || row.Title != title {
			t.Fatalf("mutant %s: detected %v, verdict %s, title %q; want %q", row.Mutant, row.Detected, row.Verdict, row.Title, title)
		}
		if inj := res.Injections; len(inj) == 0 || inj[0].Outcome != event.InjWrongState || inj[0].Action != "ops-on" {
			t.Errorf("mutant %s: injections %+v; want the first (ops-on) wrong-state", row.Mutant, inj)
		}
		t.Logf("mutant %s caught %.1f s after boot: %s", row.Mutant, row.Seconds, row.Title)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
}

// The callsite window's mutant on 7.3: riscv64's callsite patched as 6.12
// patched it (the AUIPC a nop while disabled, written back before the
// JALR). The correct kernel survives five injections between the two
// slots; the mutant jumps through a stale t0 at the first, on the
// callsite as a disable left it. make test-all (riscv64 under QEMU 11.1).
func TestRISCV64RaceCallsiteMutant(t *testing.T) {
	requireAll(t)
	raceCallsiteMutant(t, "riscv64", "riscv64-callsite-auipc-repatched")
}

// The same window on arm64: the MOV X9, LR slot patched with the BL
// (a nop while disabled, written back before the BL); the mutant returns
// through a stale x9 at the first injection. make test-all.
func TestARM64RaceCallsiteMutant(t *testing.T) {
	requireAll(t)
	raceCallsiteMutant(t, "arm64", "arm64-callsite-mov-repatched")
}

// raceCallsiteMutant runs the unmutated kernel and mutant on arch with
// five injections at the callsite's second slot: the first must survive
// them all, the mutant crash at the first.
func raceCallsiteMutant(t *testing.T, arch, mutant string) {
	out := e2eOut(t)
	r := runCell(t, 40*time.Minute, out, fthBin, "mutate", "--arches", arch, "--campaign=false", "--mutants", mutant,
		"--agent-arg", "scenario=race", "--agent-arg", "racetarget=callsite", "--agent-arg", "injections=5",
		"--require-detected", "--out", out, "--run-id", "m")
	table := mutationTable(t, filepath.Join(out, "m"))
	if len(table.Rows) != 2 {
		t.Fatalf("%d rows, want the unmutated kernel and %s", len(table.Rows), mutant)
	}
	for _, row := range table.Rows {
		res, err := results.ReadResult(filepath.Join(out, "m", row.Cell, results.ResultFile))
		if err != nil {
			t.Fatalf("%s: %v", row.Cell, err)
		}
		if row.Mutant == "" {
			if row.Verdict != results.Pass || len(res.Injections) != 5 || len(survivedOnly(res.Injections)) != 5 {
				t.Errorf("the unmutated kernel: verdict %s (%s), %d of %d injections survived: want 5 of 5", row.Verdict, row.Reason, len(survivedOnly(res.Injections)), len(res.Injections))
			}
			continue
		}
		if !row.Detected {
			t.Fatalf("mutant %s not detected: verdict %s (%s)", row.Mutant, row.Verdict, row.Reason)
		}
		if inj := res.Injections; len(inj) == 0 || inj[0].Outcome != event.InjCrashed || inj[0].Symbol != "fth_target_counted+0x4" {
			t.Errorf("mutant %s: injections %+v; want the first, at fth_target_counted+0x4, crashed", row.Mutant, inj)
		}
		t.Logf("mutant %s caught %.1f s after boot: %s", row.Mutant, row.Seconds, row.Title)
	}
	if r.exit != 0 && !t.Failed() {
		t.Errorf("fth mutate exited %d with every row as wanted", r.exit)
	}
}
