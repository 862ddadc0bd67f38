package profile

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/perfring"
)

// sampleBody builds a SAMPLE body of sampleType.
func sampleBody(id, at, period uint64, ips ...uint64) []byte {
	b := make([]byte, 0, 40+8*len(ips))
	b = binary.NativeEndian.AppendUint64(b, id)
	b = binary.NativeEndian.AppendUint32(b, 7)
	b = binary.NativeEndian.AppendUint32(b, 7)
	b = binary.NativeEndian.AppendUint64(b, at)
	b = binary.NativeEndian.AppendUint64(b, period)
	b = binary.NativeEndian.AppendUint64(b, uint64(len(ips)))
	for _, ip := range ips {
		b = binary.NativeEndian.AppendUint64(b, ip)
	}
	return b
}

// switchBody builds a SWITCH body: the sample_id trailer alone.
func switchBody(at uint64) []byte {
	b := make([]byte, 0, idTrailer)
	b = binary.NativeEndian.AppendUint32(b, 7)
	b = binary.NativeEndian.AppendUint32(b, 7)
	b = binary.NativeEndian.AppendUint64(b, at)
	return binary.NativeEndian.AppendUint64(b, 2)
}

const kernelMarker = ^uint64(127) // PERF_CONTEXT_KERNEL, -128

func TestDecoder(t *testing.T) {
	const clock, sw = 1, 2
	d := newDecoder(4*time.Millisecond, clock, sw)
	recs := []perfring.Record{
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(clock, 100, 4e6, kernelMarker, 0x10, 0x20)},
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(clock, 200, 4e6, kernelMarker, 0x10, 0x20)},
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(clock, 250, 4e6)}, // user space
		// Switch out at 1,000 in stack 0x30, back in at 9,000.
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(sw, 1000, 1, kernelMarker, 0x30, 0x20)},
		{Type: unix.PERF_RECORD_SWITCH, Misc: unix.PERF_RECORD_MISC_SWITCH_OUT, Body: switchBody(1001)},
		{Type: unix.PERF_RECORD_SWITCH, Body: switchBody(9000)},
		// A switch in with no switch out open counts nothing.
		{Type: unix.PERF_RECORD_SWITCH, Body: switchBody(9500)},
		// A preempted switch: SWITCH_OUT carries the kernel's word.
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(sw, 9600, 1, kernelMarker, 0x40)},
		{Type: unix.PERF_RECORD_SWITCH, Misc: unix.PERF_RECORD_MISC_SWITCH_OUT | unix.PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, Body: switchBody(9601)},
		{Type: unix.PERF_RECORD_SWITCH, Body: switchBody(9700)},
		{Type: unix.PERF_RECORD_THROTTLE, Body: make([]byte, 24)},
		// A lost record closes the open interval without a time.
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(sw, 10000, 1, kernelMarker, 0x30, 0x20)},
		{Type: unix.PERF_RECORD_LOST, Body: make([]byte, 16)},
		{Type: unix.PERF_RECORD_SWITCH, Body: switchBody(20000)},
	}
	binary.NativeEndian.PutUint64(recs[12].Body[8:], 3)
	for _, r := range recs {
		if err := d.add(r); err != nil {
			t.Fatal(err)
		}
	}
	rec := d.rec
	if rec.Samples != 3 || rec.Switches != 3 || rec.Lost != 3 || rec.Throttled != 1 {
		t.Errorf("samples, switches, lost, throttled = %d, %d, %d, %d; want 3, 3, 3, 1", rec.Samples, rec.Switches, rec.Lost, rec.Throttled)
	}
	if got := rec.Preempted[stackKey(Stack{0x40})]; got != 100 {
		t.Errorf("preempted = %v, want 100ns", got)
	}
	if got := rec.OnCPU[stackKey(Stack{0x10, 0x20})]; got != 8*time.Millisecond {
		t.Errorf("on-CPU of 0x10←0x20 = %v, want 8ms", got)
	}
	if got := rec.OnCPU[stackKey(nil)]; got != 4*time.Millisecond {
		t.Errorf("user-space time = %v, want 4ms", got)
	}
	if got := rec.OffCPUTotal(); got != 8100 {
		t.Errorf("off-CPU = %v, want 8.1µs (two closed intervals)", got)
	}
	if s := rec.Stacks[stackKey(Stack{0x30, 0x20})]; len(s) != 2 {
		t.Errorf("the switch-out stack is not kept: %v", s)
	}
	for _, bad := range []perfring.Record{
		{Type: unix.PERF_RECORD_SAMPLE, Body: make([]byte, 8)},
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(clock, 1, 1, 1, 2)[:48]},
		{Type: unix.PERF_RECORD_SWITCH, Body: make([]byte, 4)},
		{Type: unix.PERF_RECORD_LOST, Body: make([]byte, 8)},
	} {
		if err := d.add(bad); !errors.Is(err, perfring.ErrMalformed) {
			t.Errorf("record %d with %d bytes: err = %v, want malformed", bad.Type, len(bad.Body), err)
		}
	}
}

func TestClassify(t *testing.T) {
	rs, err := DefaultRules()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		frames string // innermost first
		how    How
		want   Centre
	}{
		{"rcu-tasks wait names its run and caller", "__schedule schedule schedule_timeout __wait_for_common __wait_rcu_gp synchronize_rcu_tasks_generic synchronize_rcu_tasks ftrace_shutdown unregister_ftrace_direct", Blocked,
			Centre{"rcu", "synchronize_rcu_tasks ← ftrace_shutdown"}},
		{"the inner cost wins", "__text_poke smp_text_poke_batch_finish ftrace_replace_code ftrace_modify_all_code", OnCPU,
			Centre{"text", "smp_text_poke_batch_finish ← ftrace_replace_code"}},
		{"record walk", "ftrace_check_record ftrace_replace_code ftrace_modify_all_code ftrace_startup", OnCPU,
			Centre{"ftrace", "ftrace_replace_code ← ftrace_modify_all_code"}},
		{"text_poke_sync's IPIs are text patching", "smp_call_function_many_cond on_each_cpu_cond_mask text_poke_sync smp_text_poke_batch_finish ftrace_replace_code", OnCPU,
			Centre{"text", "smp_text_poke_batch_finish ← ftrace_replace_code"}},
		{"a vfree's TLB flush is memory", "smp_call_function_many_cond on_each_cpu_cond_mask flush_tlb_kernel_range __purge_vmap_area_lazy _vm_unmap_aliases", OnCPU,
			Centre{"mem", "_vm_unmap_aliases"}},
		{"preempted in the record walk", "__schedule preempt_schedule_irq irqentry_exit asm_sysvec_apic_timer_interrupt ftrace_replace_code ftrace_modify_all_code", Preempted,
			Centre{"preempted", "ftrace_replace_code ← ftrace_modify_all_code"}},
		{"preempted at cond_resched", "__schedule __cond_resched ftrace_replace_code ftrace_modify_all_code", Preempted,
			Centre{"preempted", "ftrace_replace_code ← ftrace_modify_all_code"}},
		{"preempted on syscall exit", "__schedule schedule exit_to_user_mode_loop do_syscall_64", Preempted,
			Centre{"preempted", "exit_to_user_mode_loop ← do_syscall_64"}},
		{"softirq on the thread's time", "kfree rcu_do_batch rcu_core handle_softirqs __irq_exit_rcu sysvec_apic_timer_interrupt asm_sysvec_apic_timer_interrupt ftrace_replace_code", OnCPU,
			Centre{"irq", "rcu_core"}},
		{"riscv64's syscall entry is no interrupt", "patch_insn_write patch_text_nosync ftrace_make_call __ftrace_modify_code do_trap_ecall_u handle_exception", OnCPU,
			Centre{"text", "ftrace_make_call ← __ftrace_modify_code"}},
		{"a page fault is its code's", "clear_page_erms handle_mm_fault do_user_addr_fault exc_page_fault asm_exc_page_fault strncpy_from_user bpf_kprobe_multi_link_attach", OnCPU,
			Centre{"other", "clear_page_erms ← handle_mm_fault"}},
		{"a mutex wait", "__schedule schedule schedule_preempt_disabled __mutex_lock mutex_lock register_ftrace_direct", Blocked,
			Centre{"locks", "mutex_lock ← register_ftrace_direct"}},
		{"stop_machine on arm64", "__schedule schedule schedule_timeout wait_for_completion stop_machine_cpuslocked stop_machine ftrace_run_stop_machine", Blocked,
			Centre{"text", "stop_machine ← ftrace_run_stop_machine"}},
		{"nothing named", "sort_r bpf_kprobe_multi_link_attach __sys_bpf", OnCPU,
			Centre{"other", "sort_r ← bpf_kprobe_multi_link_attach"}},
		{"user space", "", OnCPU, Centre{"user", "user space"}},
		{"a bare schedule is the caller's", "__schedule schedule", Blocked, Centre{"user", "user space"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rs.Classify(strings.Fields(tc.frames), tc.how); got != tc.want {
				t.Errorf("Classify = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSymbolNames(t *testing.T) {
	// As kallsyms lists them: a section marker after the function at its
	// address, a compiler's copy with a suffix.
	syms := NewSymbols([]uint64{0x100, 0x100, 0x200, 0x300},
		[]string{"__schedule", "__sched_text_start", "do_jit.constprop.0", "__sched_text_end"})
	for addr, want := range map[uint64]string{0x100: "__schedule", 0x180: "__schedule", 0x210: "do_jit", 0x310: "do_jit", 0x50: "0x50"} {
		if got := syms.Name(addr); got != want {
			t.Errorf("Name(%#x) = %q, want %q", addr, got, want)
		}
	}
	// Return addresses are looked up a byte back: a call that ends
	// __schedule returns to do_jit's first byte.
	if got := syms.Names(Stack{0x200, 0x200}); got[0] != "do_jit" || got[1] != "__schedule" {
		t.Errorf("Names = %v, want [do_jit __schedule]", got)
	}
}

func TestParseRules(t *testing.T) {
	base := "@sched | | schedule\n@preempt | | preempt_schedule\n@irqentry | | handle_softirqs\n"
	if _, err := ParseRules(base + "rcu | grace periods | synchronize_rcu*\n"); err != nil {
		t.Errorf("a valid file: %v", err)
	}
	for name, text := range map[string]string{
		"two fields":        base + "rcu | synchronize_rcu\n",
		"no patterns":       base + "rcu | grace periods | \n",
		"no what":           base + "rcu | | synchronize_rcu\n",
		"twice":             base + "rcu | a | x\nrcu | b | y\n",
		"a built-in key":    base + "other | x | y\n",
		"no scheduler list": "@preempt | | p\n@irqentry | | i\nrcu | g | s\n",
	} {
		if _, err := ParseRules(text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAttribute(t *testing.T) {
	rs, err := DefaultRules()
	if err != nil {
		t.Fatal(err)
	}
	syms := NewSymbols([]uint64{0x100, 0x200, 0x300}, []string{"synchronize_rcu_tasks", "ftrace_shutdown", "ftrace_replace_code"})
	rec := &Recording{
		Period: 4 * time.Millisecond,
		OnCPU:  map[string]time.Duration{stackKey(Stack{0x310, 0x210}): 300 * time.Millisecond},
		OffCPU: map[string]time.Duration{stackKey(Stack{0x110, 0x210}): 600 * time.Millisecond},
		Stacks: map[string]Stack{stackKey(Stack{0x310, 0x210}): {0x310, 0x210}, stackKey(Stack{0x110, 0x210}): {0x110, 0x210}},
	}
	p := rs.Attribute(rec, syms, time.Second)
	if short := rs.Attribute(rec, syms, time.Millisecond); short.AddsUp || short.Error == "" {
		t.Errorf("a 1 ms operation was checked: %+v", short)
	}
	if p.Coverage != 0.9 || !p.AddsUp {
		t.Errorf("coverage %v adds up %v; want 0.9 within the margin", p.Coverage, p.AddsUp)
	}
	// The count says the samples missed a third of the CPU time: the
	// sampled stacks share it out.
	rec.CPUTime = 400 * time.Millisecond
	if q := rs.Attribute(rec, syms, time.Second); q.Coverage != 1 || q.OnCPUSeconds != 0.4 || q.SampledSeconds != 0.3 || q.Costs[1].Seconds != 0.4 {
		t.Errorf("with the exact CPU time: %+v", q)
	}
	rec.CPUTime = 0
	if len(p.Costs) != 2 || p.Costs[0].Key != "rcu" || p.Costs[0].Share != 0.6 || p.Costs[0].OffCPUSeconds != 0.6 || p.Costs[1].Key != "ftrace" {
		t.Errorf("costs = %+v", p.Costs)
	}
	if len(p.Centres) != 2 || p.Centres[0].Name != "synchronize_rcu_tasks ← ftrace_shutdown" {
		t.Errorf("centres = %+v", p.Centres)
	}
	if q := rs.Attribute(rec, syms, 2*time.Second); q.AddsUp {
		t.Errorf("0.9 s recorded of 2 s measured adds up: %+v", q)
	}
}

// TestProfileThisThread profiles the test's own thread on the host: it only
// reads the kernel's stacks, so it is safe outside a VM. It sleeps and spins
// in known syscalls and checks that the profile adds up to the wall time
// and sees the sleep where it is.
func TestProfileThisThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	syms, err := ReadSymbols("")
	if err != nil {
		t.Skipf("no kernel symbols here: %v", err)
	}
	t0 := time.Now()
	p, err := Start(time.Millisecond)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOSYS) {
		t.Skipf("perf events unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The spin runs until the thread has had 10 ms of CPU each round, not
	// 10 ms of wall time: on a loaded host (a kernel build beside the
	// tests) a wall-time spin gets half of that or less.
	spun := time.Duration(0)
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		start := threadCPU(t)
		for threadCPU(t)-start < 10*time.Millisecond {
			unix.Getppid()
		}
		spun += threadCPU(t) - start
	}
	rec, err := p.Stop()
	wall := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := DefaultRules()
	if err != nil {
		t.Fatal(err)
	}
	prof := rs.Attribute(rec, syms, wall)
	if rec.CPUTime < spun/2 {
		t.Errorf("CPU time %v for %v of spinning", rec.CPUTime, spun)
	}
	t.Logf("wall %.3fs on %.3fs (sampled %.3fs) off %.3fs coverage %.3f, %d samples, %d switches; centres %+v", prof.WallSeconds, prof.OnCPUSeconds, prof.SampledSeconds, prof.OffCPUSeconds, prof.Coverage, prof.Samples, prof.Switches, prof.Centres)
	if !prof.AddsUp {
		t.Errorf("the profile does not add up: coverage %.3f", prof.Coverage)
	}
	if prof.OffCPUSeconds < 0.15 {
		t.Errorf("off-CPU %.3fs, want about the 0.2 s slept", prof.OffCPUSeconds)
	}
	if want := int(spun / time.Millisecond); rec.Samples < want/2 {
		t.Errorf("%d on-CPU samples in %v of spinning at 1 ms, want about %d", rec.Samples, spun, want)
	}
	if _, err := os.Stat("/proc/kallsyms"); err == nil && prof.Lost > 0 {
		t.Errorf("%d records lost", prof.Lost)
	}
}

// threadCPU is the calling thread's CPU time so far.
func threadCPU(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
