package console

import (
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
)

// TestHeaders checks which single lines start a report, including lines
// that look alarming but are normal boot or userspace output.
func TestHeaders(t *testing.T) {
	tests := []struct {
		line string
		kind Kind // "" means not a header
	}{
		{"[   65.899519][ T6734] general protection fault, probably for non-canonical address 0xdffffc0000000000: 0000 [#1] SMP KASAN", KindOops},
		{"[   12.000001] Oops: general protection fault, probably for non-canonical address 0xdead000000000100: 0000 [#1] PREEMPT SMP NOPTI", KindOops},
		{"[   41.123456] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI", KindOops},
		{"[    9.1] int3: 0000 [#1] SMP", KindOops},
		{"[  772.918915] BUG: unable to handle kernel paging request at ffff88002bde1e40", KindOops},
		{"[   10.000000] BUG: unable to handle page fault for address: ffffffffff600000", KindOops},
		{"[  202.652969][ T9969] BUG: kernel NULL pointer dereference, address: 0000000000000086", KindOops},
		{"[   34.404245][ T3083] Unable to handle kernel paging request at virtual address 00616161616161a1", KindOops},
		{"[   34.423545][ T3083] Internal error: Oops: 0000000096000004 [#1] PREEMPT SMP", KindOops},
		{"[  805.129637][ T8558] kernel BUG at fs/reiserfs/prints.c:390!", KindBug},
		{"BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580", KindBug},
		{"BUG: scheduling while atomic: swapper/0/0/0x00000002", KindBug},
		{"[   94.447223] list_add corruption. next->prev should be prev (ffa00000003c7ca0), but was 0000000000000000. (next=ffa00000003c7cc0).", KindWarning},
		{"[   94.447223] list_del corruption, ffff888012345678->next is LIST_POISON1 (dead000000000100)", KindWarning},
		{"[  101.713679] in_atomic(): 1, irqs_disabled(): 0, non_block: 0, pid: 61, name: uinit", ""},
		{"[   34.688750][ T2373] BUG: KASAN: slab-out-of-bounds in test_and_clear_bit+0x1a/0x25", KindBug},
		{"[   30.504146][   T81] WARNING: CPU: 1 PID: 81 at drivers/usb/core/urb.c:478 usb_submit_urb+0x1188/0x1460", KindWarning},
		{"[  219.892769][ T5758] WARNING: fs/iomap/buffered-io.c:295 at ifs_free+0x34a/0x410, CPU#1: syz-executor/5758", KindWarning},
		{"el.service [0m.[  288.564375][T21583] WARNING: CPU: 72 PID: 21583 at ./include/linux/scatterlist.h:412 iommu_map_sg+0x496/0xa40", KindWarning},
		{"[   71.116589][ T8713] Kernel panic - not syncing: Fatal exception", KindPanic},
		{"[    6.791530] ------------[ ftrace bug ]------------", KindFtraceBug},
		{"[    6.791941] ftrace faulted on modifying", KindFtraceBug},
		{"[  444.457807][    C0] rcu: INFO: rcu_sched self-detected stall on CPU", KindRCUStall},
		{"[ 3481.239960] INFO: rcu_sched detected stalls on CPUs/tasks:", KindRCUStall},
		{"[ 1992.224966][   T28] INFO: rcu_tasks detected stalls on tasks:", KindRCUStall},
		{"[ 1098.601132][    C2] watchdog: BUG: soft lockup - CPU#2 stuck for 136s! [syz-executor4:4888]", KindSoftLockup},
		{"[ 1139.392042] NMI watchdog: Watchdog detected hard LOCKUP on cpu 27", KindHardLockup},
		{"[164.964389] watchdog: CPU3: Watchdog detected hard LOCKUP on cpu 3", KindHardLockup},
		{"[  584.319520][   T31] INFO: task udevd:5612 blocked in I/O wait for more than 143 seconds.", KindHungTask},
		{"INFO: task syz-executor.0:10324 blocked for more than 122 seconds.", KindHungTask},
		{"[  254.404314] WARNING: possible circular locking dependency detected", KindLockdep},
		{"[   91.193207] WARNING: suspicious RCU usage", KindLockdep},
		{"BUG: MAX_LOCKDEP_KEYS too low!", KindLockdep},
		{"[  120.818093][    C0] BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 56s!", KindWorkqueueStall},

		{"[  201.5] rcu_tasks_wait_gp: rcu_tasks grace period number 1234 (since boot) is 10125 jiffies old.", KindRCUStall},
		{"tasks_rcu_exit_stall: rcu_tasks grace period number 9 (since boot) gp_state: RTGS_WAIT_CBS is 4100 jiffies old.", KindRCUStall},
		{"[  318.2] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", KindRCUStall},
		{"Internal error: synchronous external abort: 0000000096000010 [#1]  SMP", KindOops},
		{"Unhandled fault: synchronous external abort (0x96000210) at 0xffff800011c60010", KindOops},
		{"Oops - illegal instruction [#1]", KindOops},
		{"Kernel BUG [#1]", KindBug},
		{"BUG: Kernel NULL pointer dereference on read at 0x00000000", KindOops},
		{"PANIC: double fault, error_code: 0x0", KindOops},
		{"Oops: divide error: 0000 [#1] SMP", KindOops},
		{"Oops: segment-related general protection fault: 0000 [#1] SMP", KindOops},
		{"WARNING: bad unlock balance detected!", KindLockdep},
		{"WARNING: held lock freed!", KindLockdep},
		{"WARNING: fth_target/0/97 still has locks held!", KindLockdep},
		{"INFO: trying to register non-static key.", KindLockdep},
		{"DEBUG_LOCKS_WARN_ON(chain_key != INITIAL_CHAIN_KEY)", KindLockdep},
		{"WARNING: kernel/locking/lockdep.c:5154 at __lock_acquire+0x1d68/0x2280, CPU#0: fth-agent/231", KindLockdep},
		{"BUG: using __this_cpu_read() in preemptible [00000000] code: fth-agent/233", KindBug},
		{"BUG: KCSAN: data-race in test_kernel_read / test_kernel_write", KindBug},
		{"kmemleak: unreferenced object 0xffff888003a5c000 (size 64):", KindLeak},
		{"ODEBUG: free active (active state 0) object: ff11000003d2a060 object type: timer_list hint: f+0x0/0x30", KindWarning},
		{"refcount_t: underflow; use-after-free.", KindWarning},
		{"usercopy: Kernel memory exposure attempt detected from SLUB object 'kmalloc-64' (offset 0, size 128)!", KindBug},
		{"WARNING: kernel stack frame pointer at 00000000d6f1c0b3 in fth-agent:233 has bad value 0000000000000001", KindWarning},
		{"unregister_netdevice: waiting for lo to become free. Usage count = 2", KindLeak},
		{"WARNING: at migrate_enable+0x11e/0x130, CPU#1: fth-agent/233", KindWarning},

		// Normal output.
		{"kmemleak: Kernel memory leak detector initialized (mem pool available: 15770)", ""},
		{"RCU Tasks: Setting shift to 1 and lim to 1 rcu_task_cb_adjust=1 rcu_task_cpu_ids=2.", ""},
		{"reboot: Restarting system", ""},
		{"[   12.345678] clocksource: Watchdog remote CPU 1 read timed out", ""},
		{"[    0.104914] rcu: Hierarchical RCU implementation.", ""},
		{"[    0.104915] rcu: \tRCU CPU stall warnings timeout set to 21 (rcu_cpu_stall_timeout).", ""},
		{"[    0.212345] watchdog: Disabling watchdog on nohz_full cores by default", ""},
		{"[    0.212399] NMI watchdog: Perf NMI watchdog permanently disabled", ""},
		{"[    0.094514] ftrace: allocating 35000 entries in 137 pages", ""},
		{"[    0.104840] ftrace: allocated 137 pages with 4 groups", ""},
		{"[    1.234567] Testing tracer function: PASSED", ""},
		{"[   20.000001] sysrq: Trigger a crash", ""},
		{"kernel.hung_task_timeout_secs = 120", ""},
		{`{"level":"error","msg":"Oops: attach failed, retrying"}`, ""},
		{`{"text":"[   13.000000] Kernel panic - not syncing: sysrq triggered crash"}`, ""},
		{"[    3.919246][    T1] WARNING: workqueue cpumask: online intersect > possible intersect", ""},
		{"[  217.823293][T11879] WARNING: Unprivileged eBPF is enabled, data leaks possible via Spectre v2 BHB attacks!", ""},
		{"Speculative Return Stack Overflow: WARNING: kernel not compiled with CPU_SRSO.", ""},
		{"[  184.801206][ T1191] IPv6: BUG: Address fc00:: on device lo is missing its host route.", ""},
		{"[  600.041156] EXT4-fs (loop1): INFO: recovery required on readonly filesystem", ""},
		// Another CPU's line cut short, then a report's header (ppc64le churn).
		{"[   48.959314] B[   48.959314] BUG: Kernel NULL pointer dereference on read at 0x00000128", KindOops},
		// Longer text before a second timestamp is a message quoting one.
		{"[   48.959314] replaying the console of [   48.959314] BUG: Kernel NULL pointer dereference on read at 0x00000128", ""},
	}
	for _, tt := range tests {
		l := splitLine(1, tt.line)
		p, _ := rules.matchHeader(l.text)
		var got Kind
		if p != nil {
			got = p.kind
		}
		if got != tt.kind {
			t.Errorf("%q: kind %q, want %q", tt.line, got, tt.kind)
		}
	}
}

// TestTitles pins titles of small synthetic reports, one per title rule;
// the corpus covers real logs.
func TestTitles(t *testing.T) {
	tests := []struct {
		name string
		log  string
		want string
		fn   string
	}{
		{
			name: "oops names the instruction pointer",
			log: "[   41.1] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n" +
				"[   41.2] RIP: 0010:arch_scale_cpu_capacity+0x5/0x10\n" +
				"[   41.3] Call Trace:\n[   41.4]  <TASK>\n[   41.5]  update_cpu_capacity+0x1a/0x90\n[   41.6]  </TASK>\n" +
				"[   41.7] ---[ end trace 0000000000000000 ]---\n",
			want: "Oops: int3 in arch_scale_cpu_capacity",
			fn:   "arch_scale_cpu_capacity",
		},
		{
			name: "soft lockup falls back to the stack when the IP is kcov",
			log: "[ 98.1][    C2] watchdog: BUG: soft lockup - CPU#2 stuck for 136s! [a:1]\n" +
				"[ 98.2][    C2] RIP: 0010:__sanitizer_cov_trace_pc+0xd/0x20\n" +
				"[ 98.3][    C2] Call Trace:\n[ 98.4][    C2]  update_cpu_capacity+0x8d5/0xb10\n",
			want: "BUG: soft lockup in update_cpu_capacity",
			fn:   "update_cpu_capacity",
		},
		{
			name: "a stall waiting on an IPI is titled by the wait, whichever variant",
			log: "[ 98.1][    C2] watchdog: BUG: soft lockup - CPU#2 stuck for 136s! [a:1]\n" +
				"[ 98.2][    C2] RIP: 0010:csd_lock_wait+0xd/0x20\n" +
				"[ 98.3][    C2] Call Trace:\n[ 98.4][    C2]  smp_call_function_many_cond+0x8d5/0xb10\n" +
				"[ 98.5][    C2]  on_each_cpu_cond_mask+0x3b/0x80\n[ 98.6][    C2]  do_syscall_64+0x5f/0x150\n",
			want: "BUG: soft lockup in smp_call_function",
			fn:   "smp_call_function",
		},
		{
			name: "a stall is titled by the syscall its loop runs under",
			log: "[ 28.1][    C0] rcu: INFO: rcu_preempt self-detected stall on CPU\n" +
				"[ 28.2][    C0] Call Trace:\n[ 28.3][    C0]  <IRQ>\n[ 28.4][    C0]  rcu_sched_clock_irq+0x1/0x2\n" +
				"[ 28.5][    C0]  </IRQ>\n[ 28.6][    C0]  <TASK>\n[ 28.7][    C0]  asm_sysvec_apic_timer_interrupt+0x1a/0x20\n" +
				"[ 28.8][    C0] RIP: 0010:d_walk+0x840/0xc80\n" +
				"[ 28.9][    C0]  shrink_dcache_parent+0x1/0x2\n[ 29.0][    C0]  vfs_rmdir+0x202/0x470\n[ 29.1][    C0]  do_rmdir+0x523/0x610\n" +
				"[ 29.2][    C0]  __x64_sys_rmdir+0x36/0x40\n[ 29.3][    C0]  do_syscall_64+0x5f/0x150\n",
			want: "INFO: rcu detected stall in sys_rmdir",
			fn:   "sys_rmdir",
		},
		{
			name: "a hung task behind a grace period is titled by the wait all its victims share",
			log: "[ 99.1] INFO: task kworker/0:1:12 blocked for more than 143 seconds.\n" +
				"[ 99.2] Call Trace:\n[ 99.3]  __schedule+0x1/0x2\n[ 99.4]  schedule+0x1/0x2\n" +
				"[ 99.5]  wait_for_completion+0x1/0x2\n[ 99.6]  __wait_rcu_gp+0x1/0x2\n[ 99.7]  synchronize_rcu_expedited+0x1/0x2\n" +
				"[ 99.8]  netdev_run_todo+0x1/0x2\n",
			want: "INFO: task hung in synchronize_rcu",
			fn:   "synchronize_rcu",
		},
		{
			name: "a circular dependency is titled by the lock being taken",
			log: "[ 12.1] ======================================================\n" +
				"[ 12.2] WARNING: possible circular locking dependency detected\n" +
				"[ 12.3] a/1 is trying to acquire lock:\n" +
				"[ 12.4]  (&bdev->bd_mutex){+.+.}, at: [<ffffffff8232bf0e>] blkdev_reread_part+0x1e/0x40\n" +
				"[ 12.5] but task is already holding lock:\n" +
				"[ 12.6]  (&lo->lo_ctl_mutex#2){+.+.}, at: [<ffffffff83542c29>] lo_compat_ioctl+0x109/0x140\n" +
				"[ 12.7] stack backtrace:\n[ 12.8] Call Trace:\n[ 12.9]  mutex_lock_nested+0x16/0x20\n[ 13.0]  loop_reread_partitions+0x1/0x2\n",
			want: "possible deadlock in blkdev_reread_part",
			fn:   "blkdev_reread_part",
		},
		{
			name: "a general protection fault in a lock primitive names the caller that handed it the lock",
			log: "[ 5.0] general protection fault: 0000 [#1] PREEMPT SMP KASAN\n" +
				"[ 5.1] RIP: 0010:do_raw_spin_lock+0x1/0x2\n[ 5.2] Call Trace:\n[ 5.3]  _raw_spin_lock_bh+0x1/0x2\n" +
				"[ 5.4]  l2cap_sock_teardown_cb+0x1/0x2\n",
			want: "general protection fault in l2cap_sock_teardown_cb",
			fn:   "l2cap_sock_teardown_cb",
		},
		{
			name: "an int3 in a lock primitive still names the primitive",
			log: "[ 5.0] int3: 0000 [#1] PREEMPT SMP\n" +
				"[ 5.1] RIP: 0010:up_read+0x1/0x2\n[ 5.2] Call Trace:\n[ 5.3]  l2cap_sock_teardown_cb+0x1/0x2\n",
			want: "Oops: int3 in up_read",
			fn:   "up_read",
		},
		{
			name: "a syscall wrapper is named by its syscall",
			log: "[ 5.0] general protection fault, probably for non-canonical address 0xdffffc0000000000: 0000 [#1] PREEMPT SMP KASAN\n" +
				"[ 5.1] RIP: 0010:__se_sys_mremap+0x1/0x2\n[ 5.2] Call Trace:\n[ 5.3]  do_syscall_64+0x5f/0x150\n",
			want: "general protection fault in mremap",
			fn:   "mremap",
		},
		{
			name: "die line after kernel BUG is one report",
			log: "[ 1.0] kernel BUG at mm/slub.c:304!\n[ 1.1] invalid opcode: 0000 [#1] SMP PTI\n" +
				"[ 1.2] RIP: 0010:__slab_free+0x1cc/0x320\n[ 1.3] ---[ end trace 1 ]---\n",
			want: "kernel BUG in __slab_free",
			fn:   "__slab_free",
		},
		{
			name: "stack-protector panic names the function",
			log:  "[  678.752880] Kernel panic - not syncing: stack-protector: Kernel stack is corrupted in: udp4_lib_lookup2+0x7ea/0x7f0\n",
			want: "kernel panic: stack is corrupted in udp4_lib_lookup2",
			fn:   "udp4_lib_lookup2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse([]byte(tt.log))
			if len(got) != 1 {
				t.Fatalf("got %d findings, want 1: %+v", len(got), got)
			}
			if got[0].Title != tt.want || got[0].Function != tt.fn {
				t.Errorf("title %q function %q, want %q %q", got[0].Title, got[0].Function, tt.want, tt.fn)
			}
		})
	}
}

// TestPatternTable checks the data table is consistent: every placeholder
// of a title is a named group of its header or details, or {func}.
func TestPatternTable(t *testing.T) {
	for i, p := range rules.patterns {
		names := map[string]bool{"func": true}
		for _, re := range append(p.details, p.header) {
			for _, n := range re.SubexpNames() {
				names[n] = true
			}
		}
		for _, ph := range rules.placeholder.FindAllString(p.title, -1) {
			if !names[ph[1:len(ph)-1]] {
				t.Errorf("pattern %d (%s) title %q: no group for %s", i, p.kind, p.title, ph)
			}
		}
		if p.fn == funcGroup {
			found := false
			for _, re := range append(p.details, p.header) {
				if re.SubexpIndex("func") >= 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("pattern %d (%s) takes its function from a group but has no func group", i, p.kind)
			}
		}
		if (p.fn == funcNone) == strings.Contains(p.title, "{func}") {
			t.Errorf("pattern %d (%s): title %q does not match its function rule", i, p.kind, p.title)
		}
	}
}

func TestCompileRulesError(t *testing.T) {
	_, err := compileRules([]patternSpec{{Kind: KindBug, Header: `^BUG: (`}}, skipFramesData, bodyPrefixes())
	var se *syntax.Error
	if !errors.As(err, &se) {
		t.Fatalf("compileRules with a bad header: error %v, want a wrapped *syntax.Error", err)
	}
}
