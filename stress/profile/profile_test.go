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
		// A lost record closes the open interval without a time.
		{Type: unix.PERF_RECORD_SAMPLE, Body: sampleBody(sw, 10000, 1, kernelMarker, 0x30, 0x20)},
		{Type: unix.PERF_RECORD_LOST, Body: make([]byte, 16)},
		{Type: unix.PERF_RECORD_SWITCH, Body: switchBody(20000)},
	}
	binary.NativeEndian.PutUint64(recs[8].Body[8:], 3)
	for _, r := range recs {
		if err := d.add(r); err != nil {
			t.Fatal(err)
		}
	}
	rec := d.rec
	if rec.Samples != 3 || rec.Switches != 2 || rec.Lost != 3 {
		t.Errorf("samples, switches, lost = %d, %d, %d; want 3, 2, 3", rec.Samples, rec.Switches, rec.Lost)
	}
	if got := rec.OnCPU[stackKey(Stack{0x10, 0x20})]; got != 8*time.Millisecond {
		t.Errorf("on-CPU of 0x10←0x20 = %v, want 8ms", got)
	}
	if got := rec.OnCPU[stackKey(nil)]; got != 4*time.Millisecond {
		t.Errorf("user-space time = %v, want 4ms", got)
	}
	if got := rec.OffCPUTotal(); got != 8000 {
		t.Errorf("off-CPU = %v, want 8µs (one closed interval)", got)
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
		off    bool
		want   Centre
	}{
		{"rcu-tasks wait names its run and caller", "__schedule schedule schedule_timeout __wait_for_common __wait_rcu_gp synchronize_rcu_tasks_generic synchronize_rcu_tasks ftrace_shutdown unregister_ftrace_direct", true,
			Centre{"rcu", "synchronize_rcu_tasks ← ftrace_shutdown"}},
		{"the inner cost wins", "__text_poke smp_text_poke_batch_finish ftrace_replace_code ftrace_modify_all_code", false,
			Centre{"text", "smp_text_poke_batch_finish ← ftrace_replace_code"}},
		{"record walk", "ftrace_check_record ftrace_replace_code ftrace_modify_all_code ftrace_startup", false,
			Centre{"ftrace", "ftrace_replace_code ← ftrace_modify_all_code"}},
		{"preempted in the record walk", "__schedule preempt_schedule_irq irqentry_exit asm_sysvec_apic_timer_interrupt ftrace_replace_code ftrace_modify_all_code", true,
			Centre{"preempted", "ftrace_replace_code ← ftrace_modify_all_code"}},
		{"softirq on the thread's time", "kfree rcu_do_batch rcu_core handle_softirqs __irq_exit_rcu sysvec_apic_timer_interrupt asm_sysvec_apic_timer_interrupt ftrace_replace_code", false,
			Centre{"irq", "rcu_core"}},
		{"a mutex wait", "__schedule schedule schedule_preempt_disabled __mutex_lock mutex_lock register_ftrace_direct", true,
			Centre{"locks", "mutex_lock ← register_ftrace_direct"}},
		{"stop_machine on arm64", "__schedule schedule schedule_timeout wait_for_completion stop_machine_cpuslocked stop_machine ftrace_run_stop_machine", true,
			Centre{"text", "stop_machine ← ftrace_run_stop_machine"}},
		{"nothing named", "sort_r bpf_kprobe_multi_link_attach __sys_bpf", false,
			Centre{"other", "sort_r ← bpf_kprobe_multi_link_attach"}},
		{"user space", "", false, Centre{"user", "user space"}},
		{"a bare schedule is the caller's", "__schedule schedule", true, Centre{"user", "user space"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rs.Classify(strings.Fields(tc.frames), tc.off); got != tc.want {
				t.Errorf("Classify = %+v, want %+v", got, tc.want)
			}
		})
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
	if p.Coverage != 0.9 || !p.AddsUp {
		t.Errorf("coverage %v adds up %v; want 0.9 within the margin", p.Coverage, p.AddsUp)
	}
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
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
			unix.Getppid()
		}
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
	t.Logf("wall %.3fs on %.3fs off %.3fs coverage %.3f, %d samples, %d switches; centres %+v", prof.WallSeconds, prof.OnCPUSeconds, prof.OffCPUSeconds, prof.Coverage, prof.Samples, prof.Switches, prof.Centres)
	if !prof.AddsUp {
		t.Errorf("the profile does not add up: coverage %.3f", prof.Coverage)
	}
	if prof.OffCPUSeconds < 0.15 {
		t.Errorf("off-CPU %.3fs, want about the 0.2 s slept", prof.OffCPUSeconds)
	}
	if rec.Samples < 50 {
		t.Errorf("%d on-CPU samples in about 0.1 s of spinning at 1 ms, want about 100", rec.Samples)
	}
	if _, err := os.Stat("/proc/kallsyms"); err == nil && prof.Lost > 0 {
		t.Errorf("%d records lost", prof.Lost)
	}
}
