package console

import (
	"reflect"
	"testing"
)

func TestParseFrame(t *testing.T) {
	tests := []struct {
		text       string
		fn         string
		unreliable bool
		ok         bool
	}{
		{"  genl_rcv_msg+0x328/0x580", "genl_rcv_msg", false, true},
		{"  ? __pfx_iommu_map_sg+0x10/0x10", "__pfx_iommu_map_sg", true, true},
		{" [<ffffffff81b2e7d9>] dump_stack+0x45/0x6c", "dump_stack", false, true},
		{" [<ffffffff822247af>] ? proc_do_submiturb+0x9af/0x2c30", "proc_do_submiturb", true, true},
		{"[<ffffffff80014264>] io_ring_exit_work+0x44c/0xbc0", "io_ring_exit_work", false, true},
		{"[c00000003ae5b800] [c00000000135c19c] dump_stack+0x128/0x1cc (unreliable)", "dump_stack", true, true},
		{" ftrace_bug+0x3bc/0x424 (unreliable)", "ftrace_bug", true, true},
		{" __dump_stack lib/dump_stack.c:77 [inline]", "__dump_stack", false, true},
		{" kobject_put.cold+0x28f/0x2ec lib/kobject.c:708", "kobject_put", false, true},
		{"  __switch_to+0x2b0/0x6e0 (T)", "__switch_to", false, true},
		{" <EOI>  [<ffffffff815bcdb1>] ? __sanitizer_cov_trace_pc+0x21/0x60", "__sanitizer_cov_trace_pc", true, true},
		{"[<80c1e5e8>] (__schedule) from [<80c1eb20>] (schedule+0x60/0xdc)", "__schedule", false, true},
		{" hrtimer_cancel+0x15/0x30 [amdgpu]", "hrtimer_cancel", false, true},
		// Lines that carry a symbol but are not frames.
		{"RIP: 0010:nl802154_add_llsec_key+0x1f7/0x560", "", false, false},
		{"hardirqs last  enabled at (79893): [<ffffffff81007bd9>] trace_hardirqs_on_thunk+0x1a/0x1c", "", false, false},
		{"ffff888026ad6260 (sk_lock-AF_X25){+.?.}-{0:0}, at: x25_kill_by_neigh+0x10d/0x250", "", false, false},
		{"random: get_random_u64 called from __kmem_cache_create+0x2d/0x430 with crng_init=1", "", false, false},
		{"[00616161616161a1] address between user and kernel address ranges", "", false, false},
		{"  lock(sk_lock-AF_X25);", "", false, false},
	}
	for _, tt := range tests {
		f, ok := parseFrame(tt.text)
		if ok != tt.ok || f.fn != tt.fn || f.unreliable != tt.unreliable {
			t.Errorf("parseFrame(%q) = %+v, %v; want fn=%q unreliable=%v ok=%v", tt.text, f, ok, tt.fn, tt.unreliable, tt.ok)
		}
	}
}

func TestSkippedFrame(t *testing.T) {
	skipped := []string{
		"dump_stack", "dump_stack_lvl", "panic", "__warn", "warn_slowpath_fmt", "report_bug", "handle_bug",
		"exc_invalid_op", "asm_exc_invalid_op", "do_error_trap", "die", "kasan_report", "__sanitizer_cov_trace_pc",
		"lock_acquire", "__lock_acquire", "mutex_lock_nested", "__mutex_lock", "_raw_spin_lock_irqsave",
		"lockdep_rcu_suspicious", "print_circular_bug", "__schedule", "schedule", "io_schedule", "schedule_timeout",
		"__switch_to", "folio_wait_bit_common", "hrtimer_interrupt", "asm_sysvec_apic_timer_interrupt",
		"smp_apic_timer_interrupt", "fortify_panic",
	}
	kept := []string{
		"ftrace_bug", "ftrace_replace_code", "blkdev_reread_part", "tipc_bearer_find", "do_read_cache_folio",
		"smp_call_function_many", "memory_bm_find_bit", "panic_notifier", "lock_sock_destroy", "schedule_work_on",
		"scheduler_tick", "do_one_initcall", "arch_scale_cpu_capacity",
	}
	for _, fn := range skipped {
		if !skippedFrame(fn) {
			t.Errorf("skippedFrame(%q) = false, want true", fn)
		}
	}
	for _, fn := range kept {
		if skippedFrame(fn) {
			t.Errorf("skippedFrame(%q) = true, want false", fn)
		}
	}
}

// feedStack runs text lines through a stackTracker as a report would.
func feedStack(lines ...string) *stackTracker {
	st := newStackTracker()
	for _, l := range lines {
		cls, f := classify(l)
		st.add(cls, f, l)
	}
	return &st
}

func TestStackTracker(t *testing.T) {
	tests := []struct {
		name     string
		lines    []string
		stack    []string
		useful   string
		afterIRQ string
	}{
		{
			name: "unreliable frames dropped, machinery skipped",
			lines: []string{
				"Call Trace:", " dump_stack+0x194/0x257", " ? arch_local_irq_restore+0x53/0x53",
				" lockdep_rcu_suspicious+0x123/0x170", " tipc_bearer_find+0x2b4/0x3b0", "RIP: 0033:0x453299",
			},
			stack:    []string{"dump_stack", "lockdep_rcu_suspicious", "tipc_bearer_find"},
			useful:   "tipc_bearer_find",
			afterIRQ: "tipc_bearer_find",
		},
		{
			name: "interrupted code after the irq section",
			lines: []string{
				"Call Trace:", " <IRQ>", " do_raw_spin_lock+0x2af/0x360", " drm_handle_vblank+0x154/0xc70",
				" hrtimer_interrupt+0x314/0x770", " </IRQ>", "RIP: 0010:handle_mm_fault+0x7f4/0xc80",
				"RSP: 0018:ffff88800a7ff7b0 EFLAGS: 00000293", " __get_user_pages+0x8f7/0x1e10", "Modules linked in:",
				" not_a_trace_frame+0x1/0x2",
			},
			stack:    []string{"do_raw_spin_lock", "drm_handle_vblank", "hrtimer_interrupt", "__get_user_pages"},
			useful:   "drm_handle_vblank",
			afterIRQ: "__get_user_pages",
		},
		{
			name:     "frames without a Call Trace header",
			lines:    []string{"epc : io_ring_exit_work+0x44c/0xbc0", "[<ffffffff80014264>] io_ring_exit_work+0x44c/0xbc0", "[<ffffffff801c2668>] process_one_work+0x930/0x1e14"},
			stack:    []string{"io_ring_exit_work", "process_one_work"},
			useful:   "io_ring_exit_work",
			afterIRQ: "io_ring_exit_work",
		},
		{
			name:  "only machinery",
			lines: []string{"Call trace:", " __switch_to+0x2b0/0x6e0 (T)", " __schedule+0x1370/0x2d80", " schedule+0xa4/0x140"},
			stack: []string{"__switch_to", "__schedule", "schedule"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := feedStack(tt.lines...)
			if got := st.stack(); !reflect.DeepEqual(got, tt.stack) {
				t.Errorf("stack = %v, want %v", got, tt.stack)
			}
			if got := st.useful(false, skippedFrame); got != tt.useful {
				t.Errorf("useful(false) = %q, want %q", got, tt.useful)
			}
			if got := st.useful(true, skippedFrame); got != tt.afterIRQ {
				t.Errorf("useful(true) = %q, want %q", got, tt.afterIRQ)
			}
		})
	}
}
