package known

import (
	"slices"
	"strings"
)

// Report is what a mail about one finding of docs/findings.md says beyond
// what a cell recorded: its subject, the cause in the kernel's words, how
// to reproduce it without this harness, and the fix. `fth report --mail`
// reads it for a cell that reproduces the finding (Match); a failure that
// matches none is reported as new, with what the cell recorded alone.
type Report struct {
	// Number is the finding's number in docs/findings.md. One bug with
	// two ways in is one report: 12 is folded into 14, 13 into 8.
	Number string
	// Also are the numbers folded into this one.
	Also []string
	// ID is the finding's entry in All, "" when it has none (a race no
	// random workload meets is not listed there: a churn that met it by
	// chance must fail, not pass as known).
	ID string
	// Bug says the finding is a kernel bug. False for what was put down
	// to QEMU or to this harness, or is not decided (Status says which).
	Bug bool
	// Status is one line for a finding that is not a kernel bug, or not
	// yet a report that can be sent.
	Status string
	// Subject follows "[BUG] " in the mail's subject: the subsystem's
	// prefix, then what goes wrong, in the kernel's words.
	Subject string
	// Seen says where it was seen, kernel by kernel with its arches
	// ("Linux 7.3.4 (x86_64) and 6.12.117 (x86_64)"); docs/findings.md
	// has the runs.
	Seen string
	// Summary is the cause, as a maintainer would read it: paragraphs
	// separated by a blank line, no word of this harness's.
	Summary string
	// Repros are the harness's scripted sequences that reproduce it
	// (scenario=repro repro=<sequence>), controls not included.
	Repros []string
	// Titles are substrings of the titles its reports get, for a cell
	// that neither names the finding's ID nor ran one of its sequences.
	Titles []string
	// Standalone is its reproducer's directory under ReproDir, "" while
	// it has none; Fails is a regular expression a title of a failing
	// run of it matches (the reproducer's FAIL line, or for a hang the
	// watchdogs' words).
	Standalone string
	Fails      string
	// Arches are the arches the standalone reproducer applies to (the
	// bug is in one arch's code); nil: every arch.
	Arches []string
	// Run says how a maintainer runs the standalone reproducer: numbered
	// steps, the files by their names.
	Run string
	// Fixes are its patches under FixesDir, the preferred first.
	Fixes []string
	// Needs are other findings' fixes (under FixesDir) that every kernel
	// the standalone reproducer is verified on carries, the unfixed one
	// included: a bug of the same path that would end the run first.
	Needs []string
	// Fragments are kconfigs fragments that every kernel the standalone
	// reproducer is verified on adds to its arch's default ones: what
	// its config needs beyond them (a debug option that makes the bug
	// visible).
	Fragments []string
	// Paths are the other ways into the same bug that the standalone
	// reproducer takes when given their arguments; each is verified on
	// its own (Verifications).
	Paths []Path
	// Args are the standalone reproducer's first arguments (run.sh
	// <Args> [control]): set on the reports Verifications derives for
	// Paths, nil for a report's own way in.
	Args []string
}

// Path is another way into a report's bug, folded into it (13 into 8):
// its own arguments to the same reproducer, its own failing title, and
// the fix that closes it.
type Path struct {
	// Number is the folded finding's number in docs/findings.md.
	Number string
	// Args come first on run.sh's command line ("control" after them
	// for the path's control).
	Args []string
	// Fails is a regular expression a title of a failing run matches.
	Fails string
	// Fix is the patch under FixesDir that closes this path.
	Fix string
}

// Verifications returns what `fth verify` checks of r's standalone
// reproducer: r itself, then a copy of r per Path with the path's
// number, arguments, failing title and fix, the fix's siblings after it.
func (r Report) Verifications() []Report {
	out := []Report{r}
	for _, p := range r.Paths {
		v := r
		v.Number, v.Args, v.Fails, v.Paths = p.Number, p.Args, p.Fails, nil
		v.Fixes = append([]string{p.Fix}, slices.DeleteFunc(slices.Clone(r.Fixes), func(f string) bool { return f == p.Fix })...)
		out = append(out, v)
	}
	return out
}

// FixesDir holds the fixes, relative to the repository: one patch each,
// in `git format-patch` form.
const FixesDir = "results/known/fixes"

// Reports returns a report for every finding of docs/findings.md, in
// its order, in a new slice.
func Reports() []Report {
	return []Report{
		{
			Number: "1", ID: "rcu-read-unlock-special-fentry", Bug: true,
			Subject: "bpf: an fentry program on rcu_read_unlock_special() recurses until the stack overflows",
			Seen:    "Linux 7.3.4 (x86_64, riscv64)",
			Summary: `rcu_read_unlock_special() is traceable, has BTF and is not in
btf_id_deny, although its caller __rcu_read_unlock() is. With
PREEMPT_RCU, a BPF fentry program attached to it crashes the kernel
within a fraction of a second: the trampoline's exit path calls
rcu_read_unlock() (__bpf_prog_exit_recur() -> rcu_read_unlock_migrate()
-> migrate_enable()), whose __rcu_read_unlock() calls
rcu_read_unlock_special() again, because the special state is cleared
only in that function's body, which the trampoline runs after. The
recursion guard skips the program but not the trampoline's enter and
exit around it.

With VMAP_STACK the stack runs into its guard page and the CPU double
faults, with nothing printed; the page above the fault holds the same
cycle of return addresses over and over (the trampoline,
__bpf_prog_exit_recur, rcu_read_unlock_migrate, migrate_enable,
rcu_read_unlock_special). Without VMAP_STACK the overflow corrupts
whatever lies below the stack, and the first report varies from run to
run (a bad-pagetable oops in futex_wait_setup, a triple fault).

The fix denies the function in btf_id_deny next to __rcu_read_unlock();
marking it notrace, as its callee rcu_preempt_deferred_qs_irqrestore()
already is, would close it for every ftrace user.`,
			Titles:     []string{"rcu_read_unlock_special"},
			Standalone: "rcu-read-unlock-special",
			Run: `The attached reproducer is a program and a script; nothing is timed.

  1. Build with the options in config.
  2. make KDIR=<the kernel's build directory>   (or cc -O2 -Wall -static)
  3. ./run.sh           (the kernel crashes within a second: the bug)
     ./run.sh control   (an fentry program on rcu_note_context_switch():
                         the kernel keeps running)`,
			// The recursion overflows the stack, and what is reported
			// first depends on what the overflow hits: with VMAP_STACK
			// the guard page, and then nothing is printed (a triple fault
			// resets the guest, or the vCPUs loop in the fault entry code
			// and the console goes silent); without it whatever lies
			// below the stack (a NULL dereference in copy_process, a bad
			// page table in futex_wait_setup). So any kernel crash of
			// the reproducer's 10 s counts; the control (the same
			// program and load, the program on another function) and
			// the fixed kernel must show none.
			Fails: `^(BUG: |Oops|general protection fault|kernel BUG|Kernel panic|WARNING|reset: the guest reset|hang: no output for )`,
			Fixes: []string{"bpf-deny-rcu-read-unlock-special.patch"},
		},
		{
			Number: "2", ID: "ftrace-direct-modify-unload-hang", Bug: true, Status: "reproduced standalone: the shipped sample loaded and unloaded every 3 s",
			Subject: "samples/ftrace: ftrace-direct-modify hangs x86_64 since DYNAMIC_FTRACE_WITH_JMP: my_tramp2 is at an odd address",
			Seen:    "Linux 7.3.4 (x86_64)",
			Summary: `Since DYNAMIC_FTRACE_WITH_JMP (7.3, x86_64), bit 0 of a direct-call
address means "jump, don't call": ftrace_jmp_set() sets it, and both
ftrace_call_replace() and ftrace_regs_caller honour it.
register_ftrace_direct() and modify_ftrace_direct() accept any address.

samples/ftrace/ftrace-direct-modify.c's trampolines are not aligned.
With CONFIG_X86_KERNEL_IBT=n, my_tramp1 is 11 bytes long and my_tramp2
starts at offset 0xb of the module's text (0x11 in
ftrace-direct-multi-modify.c). When the sample's kthread moves the
direct call to my_tramp2, the callsite of schedule() becomes a jmp to
my_tramp2 - 1: my_tramp1's ret. schedule() then returns at its entry
without switching, every task that waits spins, and the stopper threads
and the RCU grace-period kthread never run: soft lockups, workqueue
lockups, "rcu_preempt kthread starved".

Aligning each trampoline (.balign 16) fixes the samples. The API takes
an odd address from any caller without a word; a check in
register_ftrace_direct() and modify_ftrace_direct() would catch the
next caller that falls into it.`,
			Standalone: "direct-modify-odd-tramp",
			Arches:     []string{"x86_64"},
			Fails:      `^(BUG: soft lockup in |INFO: rcu detected stall in |INFO: task hung in |BUG: workqueue lockup in |hang: no output for )`,
			Run: `The attached reproducer needs only the kernel's own sample: a script
and a config fragment, nothing timed.

  1. Build with the options in config; check that my_tramp2 is at an
     odd address: nm samples/ftrace/ftrace-direct-modify.ko
  2. ./run.sh           (the kernel locks up: the bug)
     ./run.sh control   (ftrace-direct.ko cycled the same way: must pass)`,
			Fixes: []string{"samples-ftrace-direct-tramp-align.patch"},
		},
		{
			Number: "3", Bug: false, Status: "QEMU 7.2's multi-threaded TCG, not the kernel's: not seen under QEMU 11.1",
			Subject: "x86/ftrace: Oops: int3 under QEMU's multi-threaded TCG",
		},
		{
			Number: "4", Bug: false, Status: "withdrawn: a KASAN report at boot, in x86 CPU identification before any ftrace user exists; outside what this tool tests, its mechanism read from the source and not confirmed",
			Subject: "x86/kasan: wild-memory-access in rcu_is_watching() at boot with 5-level paging",
			Titles:  []string{"wild-memory-access in rcu_is_watching"},
		},
		{
			Number: "5", Bug: true, Status: "reproduced standalone with kprobes from tracefs (ppc64le, QEMU 11.1)",
			Subject: "powerpc/ftrace: ftrace_regs_caller restores r13 (the paca) from pt_regs after a preemptible handler",
			Seen:    "Linux 7.3.4 (ppc64le, under QEMU)",
			Summary: `ftrace_regs_caller (arch/powerpc/kernel/trace/ftrace_entry.S,
ftrace_regs_entry with allregs=1) saves r13..r31 in pt_regs and, once
the handler has returned, restores r2..r31 from them, r13 included. r13
is the running CPU's paca. Nothing there disables preemption: a task
preempted in the handler, or in the code around it, and moved to
another CPU takes the first CPU's paca back into r13 and runs on with
another CPU's current, preempt count and per-CPU data until its next
interrupt reloads r13.

With any SAVE_REGS ftrace_ops (an ftrace-based kprobe or kretprobe)
on a busy function, a PREEMPT(lazy) or PREEMPT(full) pseries guest
reports "BUG: scheduling while atomic" with preempt counts raised in
tasks that never disabled preemption, then faults in code that reads
per-CPU data of the wrong CPU (__futex_hash, timerqueue_linked_add,
pick_task_fair). Two kprobes from kprobe_events, on vfs_read() and
vfs_write(), with four tasks reading and writing a byte at a time,
crash the kernel within seconds. The function tracer on the same
functions (no SAVE_REGS) passes. ftrace_caller (no regs) never restores
r13, nor does an interrupt's return to kernel mode.

Restoring r2..r12 and r14..r31 removed every one of those symptoms.
Seen only under QEMU (pseries, TCG): two later panics with the fix, with
nothing on the console, are not explained.`,
			Titles:     []string{"NULL pointer dereference in __futex_hash"},
			Standalone: "regs-caller-r13",
			Arches:     []string{"ppc64le"},
			// A task running on with another CPU's paca breaks whatever
			// it touches next: every kernel crash counts (3 runs gave 3
			// titles: an instruction fetch fault, scheduling while
			// atomic, a BUG in plpar_hcall_norets); the fixed kernel
			// and the control gave none.
			Fails: `^(BUG: |Oops|kernel BUG|Kernel panic|WARNING|general protection fault|INFO: rcu detected stall|hang: no output for )`,
			Run: `The attached reproducer needs only tracefs: a script and a config
fragment, nothing timed.

  1. Build a ppc64le kernel with the options in config (gcc 14 or newer,
     so that PPC_FTRACE_OUT_OF_LINE and the patchable entries are on).
  2. ./run.sh           (kprobes on vfs_read and vfs_write, four
                         tasks reading and writing a byte at a time
                         for 60 s: the bug)
     ./run.sh control   (the function tracer on the same functions:
                         must pass)`,
			Fixes: []string{"ppc64-ftrace-regs-caller-keep-r13.patch"},
		},
		{
			Number: "6", Bug: true,
			Subject: "powerpc/64: replay_soft_interrupts() is traceable, and a BPF trampoline on it runs with RCU not watching",
			Seen:    "Linux 7.3.4 (ppc64le, under QEMU)",
			Summary: `interrupt_exit_kernel_prepare() and arch_local_irq_restore() are
notrace, and so are the interrupt handlers they replay soft-masked
interrupts into (interrupt_handler), but replay_soft_interrupts(), which
the first calls, and __replay_soft_interrupts(), which both reach, are
not. Both can run where RCU is not watching: an interrupt that returns
to the idle loop has left its RCU section in irqentry_exit() before
interrupt_exit_kernel_prepare() replays what became pending meanwhile,
and the idle loop enables interrupts with RCU not watching.

A BPF fentry program on replay_soft_interrupts() runs there: its
trampoline's __bpf_prog_enter_recur() calls rcu_read_lock(), which is no
read-side critical section while RCU is not watching, and with
CONFIG_LOCKDEP the first call warns "RCU not watching for tracepoint"
from lock_acquire(), called from __bpf_prog_enter_recur() in the
trampoline, on the idle task's interrupt return: the trampoline's caller
is interrupt_exit_kernel_prepare+0x180 (arch/powerpc/kernel/interrupt.c:269,
its call of replay_soft_interrupts()), the interrupt taken in
plpar_hcall_norets_notrace() under pseries_lpar_idle(). The same warning
comes from lock_release() under __bpf_prog_exit_recur().

Marking both functions notrace, as the functions around them are, ends
it.`,
			Titles:     []string{"RCU not watching", "WARNING in interrupt_exit_kernel_prepare"},
			Standalone: "replay-rcu-not-watching",
			Arches:     []string{"ppc64le"},
			Fragments:  []string{"debug/lock-alloc"},
			Fails:      `^BPF trampoline entered with RCU not watching$|^WARNING in (interrupt_exit_kernel_prepare|lock_acquire|lock_release|__bpf_prog_enter_recur|__bpf_prog_exit_recur)$`,
			Run: `The attached reproducer is a program and a script; nothing is timed.

  1. Build a ppc64le (pseries) kernel with the options in config (gcc 14
     or newer, for BPF trampolines on powerpc64).
  2. make KDIR=<the kernel's build directory>   (or cc -O2 -Wall -static)
  3. ./run.sh           (an fentry program on replay_soft_interrupts(),
                         two tasks on two CPUs waking each other for
                         20 s: "RCU not watching for tracepoint")
     ./run.sh control   (the same on hrtimer_interrupt(): no warning)`,
			Fixes: []string{"powerpc-64-replay-soft-interrupts-notrace.patch"},
		},
		{
			Number: "7", Bug: false, Status: "the harness's own module's bug (an unaligned trampoline, the trap of 2), fixed in the module",
			Subject: "ftrace: a direct call to an odd address is taken as a jump on x86_64",
		},
		{
			Number: "8", Also: []string{"13"}, ID: "ipmodify-share-asked-of-a-stranger", Bug: true,
			Subject: "ftrace: update_ftrace_direct_mod() asks BPF trampolines it does not modify to share IPMODIFY",
			Seen:    "Linux 7.3.4 (x86_64)",
			Summary: `With HAVE_SINGLE_FTRACE_DIRECT_OPS every BPF trampoline is one entry of
one shared direct ftrace_ops, and update_ftrace_direct_mod() runs
__ftrace_hash_update_ipmodify(ops, orig_hash, orig_hash, true) with
orig_hash that ops' whole filter. For every function of that ops whose
record has FTRACE_FL_IPMODIFY it calls bpf_tramp_ftrace_ops_func(...,
FTRACE_OPS_CMD_ENABLE_SHARE_IPMODIFY_SELF) on that function's
trampoline, though its caller holds only the lock of the trampoline
being modified: on a PROVE_LOCKING kernel the
lockdep_assert_held_once(select_trampoline_lock(tr)) there fires first
(kernel/bpf/trampoline.c:112).

A trampoline that calls the original function (fexit) and has not
agreed to share then gets BPF_TRAMP_F_SHARE_IPMODIFY set behind its
back and answers -EAGAIN; the next ask warns (WARN_ON_ONCE at
kernel/bpf/trampoline.c:121) and the attach is refused with -EBUSY.
Two ways lead there: an IPMODIFY ops that takes the function into its
filter after it registered (ftrace_set_filter() ->
ftrace_hash_ipmodify_update() sets the record's flag, and the
registration handshake, prepare_direct_functions_for_ipmodify(), never
runs), and a fexit added to a trampoline of a livepatched function while
another trampoline's modify runs (its flags rebuilt, its own modify not
yet under direct_mutex).

On the filter path the fexit trampoline never learns of the IPMODIFY
ops and keeps calling the original function directly, so a redirect by
that ops is bypassed on every call while the fexit is attached. In-tree
users set their filter before they register (livepatch) or restore the
IP (kprobes, whose IPMODIFY ops grows its filter this way), so the
reachable effect in-tree is the warning and a spurious -EBUSY; the
bypass needs an ops that grows its filter and redirects, as the
reproducer's module does.

Two patches, one per path. Running the registration's handshake
(prepare_direct_functions_for_ipmodify()) in ftrace_set_hash() for the
functions a registered IPMODIFY ops adds to its filter ends the bypass
and the warning on the filter path. Asking only the functions being
modified (hash, not orig_hash) in update_ftrace_direct_mod() ends the
warning on the second path; on the filter path it ends the warning but
not the bypass.`,
			Repros:     []string{"ipmodify-filter", "ipmodify-mid-update"},
			Titles:     []string{"bpf_tramp_ftrace_ops_func"},
			Standalone: "ipmodify-share",
			Run: `The attached reproducer needs no other tool and no timing: a module
(an IPMODIFY ftrace_ops that redirects, as livepatch's does), a program
that loads two empty BPF programs with the bpf() syscall, a script, and
a config fragment.

  1. Build with the options in config.
  2. make KDIR=<the kernel's build directory>   (module and program)
  3. ./run.sh           (exit 1, the WARNING and a refused attach: the bug)
     ./run.sh control   (the ops registered with both functions: passes)

Step 6 of its output shows the bypass: /proc/cmdline reads the real
command line, not the redirect, while the fexit program is attached;
the reproducer fails on it too.

The second way in is a race; bpf-tramp-race-delay.patch (debug only)
makes a trampoline update that starts calling the original function
sleep for bpf_tramp_race_delay_ms, which the program sets to 2000:

  1. Build with the options in config and bpf-tramp-race-delay.patch.
  2. make KDIR=<the kernel's build directory>
  3. ./run.sh mid-update           (a fexit added to cmdline_proc_show()
                                    while other trampolines are modified:
                                    the WARNING and refused attaches)
     ./run.sh mid-update control   (the fentry attached before the ops
                                    registers: passes)`,
			Fails: `^WARNING in bpf_tramp_ftrace_ops_func$|^BPF trampoline attach refused after an IPMODIFY ops grew its filter$|^BPF fexit trampoline bypasses the redirect of an IPMODIFY ops$`,
			Fixes: []string{"ftrace-ipmodify-filter-share-direct.patch", "ftrace-direct-mod-ask-only-modified.patch"},
			Paths: []Path{{
				Number: "13", Args: []string{"mid-update"},
				Fails: `^WARNING in bpf_tramp_ftrace_ops_func$|^BPF trampoline attach refused while another trampoline's update was under way$`,
				Fix:   "ftrace-direct-mod-ask-only-modified.patch",
			}},
		},
		{
			Number: "9", Bug: true,
			Subject: "ftrace: unregister_ftrace_direct() frees direct_functions entries under a lookup",
			Seen:    "Linux 7.3.4 and 6.12.117 (x86_64)",
			Summary: `unregister_ftrace_direct() takes its entries out of direct_functions
in place (reset_direct() -> remove_direct_functions_hash():
hlist_del_rcu(), then kfree() with no grace period). Two readers walk
that hash without a lock the removal takes: call_direct_funcs() ->
ftrace_find_rec_direct() with only preemption disabled (7.3 with
HAVE_SINGLE_FTRACE_DIRECT_OPS, on a callsite that a direct call shares
with another ops), and tracefs's enabled_functions (t_show() ->
ftrace_find_rec_direct()) under ftrace_lock, while the removal holds
only direct_mutex (6.12 and 7.3). A reader that holds the entry when it
is freed reads freed memory and follows its next pointer:

  general protection fault, probably for non-canonical address 0x6b6b6b6b6b6b6b7b
  RIP: ftrace_find_rec_direct+0x4f

with slab_debug=P; without poisoning the walk goes on through freed
memory unseen until the object is reused. The other writers of
direct_functions (register_ftrace_direct(), update_ftrace_direct_*())
replace the hash whole and free the old one after a grace period;
freeing the entry with kfree_rcu_mightsleep() closes the window.`,
			Repros:     []string{"direct-unregister-free", "direct-unregister-free-tracefs"},
			Titles:     []string{"ftrace_find_rec_direct", "t_show"},
			Standalone: "direct-unregister-free",
			Fails:      ` in (t_show|ftrace_find_rec_direct)$`,
			Run: `The attached reproducer needs a module and tracefs: the module, a
script that picks the functions and reads enabled_functions, a config
fragment, and a debug patch that widens the window so that most runs
hit it.

  1. Apply ftrace-race-delay.patch (debug only), build with the options
     in config, and boot with ftrace_race_delay_ms=20 slab_debug=P.
  2. make KDIR=<the kernel's build directory>
  3. ./run.sh           (the kernel faults: the bug)
     ./run.sh control   (functions of two buckets: must pass)`,
			Fixes: []string{"ftrace-direct-unregister-free-after-gp.patch", "ftrace-direct-unregister-free-after-gp-6.12.patch"},
		},
		{
			Number: "10", Bug: true,
			Subject: "ftrace: ftrace_func_mapper_remove_ip() frees an entry under a probe's lookup",
			Seen:    "Linux 7.3.4 and 6.12.117 (x86_64)",
			Summary: `A function probe (set_ftrace_filter's func:enable_event:...,
traceon, snapshot, ...) keeps each function's data in one
ftrace_func_mapper, which its callback looks the ip up in on every call
with preemption disabled (event_enable_probe() ->
ftrace_func_mapper_find_ip() -> ftrace_lookup_ip()). Removing the probe
from one function (!func:enable_event:...) runs
unregister_ftrace_function_probe_func(): it takes the functions out of
the probe's ops, waits synchronize_rcu() for calls of those functions,
then frees each function's entry in place
(ftrace_func_mapper_remove_ip(): hlist_del_rcu(), then kfree()). The
callback of a function the probe stays on may be walking the same
bucket at that moment; the grace period before was for other calls:

  general protection fault, probably for non-canonical address 0x6b6b6b6b6b6b6b7b
  RIP: ftrace_lookup_ip+0x37
  ftrace_func_mapper_find_ip <- event_enable_probe <- function_trace_probe_call

with slab_debug=P. ftrace_func_mapper_remove_ip() runs under
ftrace_lock, a mutex, where the same path already sleeps in
synchronize_rcu(), so kfree_rcu_mightsleep() can free the entry. The
hash's adds are unsafe the same way by reading (a plain
hlist_add_head() under a walking reader); not reproduced.`,
			Repros:     []string{"mapper-remove-free"},
			Titles:     []string{"ftrace_lookup_ip", "ftrace_func_mapper_find_ip"},
			Standalone: "mapper-remove-free",
			Fails:      ` in ftrace_(func_mapper_find_ip|lookup_ip)$`,
			Run: `The attached reproducer needs only tracefs: a script, a config
fragment, and a debug patch that widens the window so that most runs
hit it.

  1. Apply ftrace-race-delay.patch (debug only), build with the options
     in config, and boot with ftrace_race_delay_ms=20 slab_debug=P.
  2. ./run.sh           (the kernel faults: the bug)
     ./run.sh control   (a function of another bucket: must pass)`,
			Fixes: []string{"ftrace-func-mapper-free-after-gp.patch", "ftrace-func-mapper-free-after-gp-6.12.patch"},
		},
		{
			Number: "11", Bug: true,
			Subject: "powerpc/ftrace: a BPF trampoline is not called while a livepatch of the same function is applied",
			Seen:    "Linux 7.3.4 (ppc64le, under QEMU)",
			Summary: `With PPC_FTRACE_OUT_OF_LINE, ftrace_regs_exit branches to
livepatch_handler when an ops moved the NIP (bne- livepatch_handler)
before it checks for a direct call (bnectr cr1), so the direct
trampoline in CTR is dropped and the patched function runs without it.
The powerpc BPF JIT (__arch_prepare_bpf_trampoline()) ignores
BPF_TRAMP_F_SHARE_IPMODIFY and BPF_TRAMP_F_ORIG_STACK, so the sharing
handshake with the IPMODIFY ops succeeds instead of refusing, as riscv's
JIT does (-ENOTSUPP). A BPF fexit program on a livepatched function then
sees none of its calls, and nothing warns. x86_64 and arm64 call it on
every call.

Calling the direct trampoline first would have it call the livepatched
function through its local entry with the wrong TOC; the smallest safe
change is to refuse the combination until the JIT supports it, as riscv
does. With the JIT refusing both flags, a fexit program and a livepatch
on one function no longer lose calls: whichever comes second is refused
with -EOPNOTSUPP.

A refused livepatch must not leave BPF_TRAMP_F_SHARE_IPMODIFY behind:
bpf_tramp_ftrace_ops_func() sets it before the rebuild the JIT refuses,
bpf_trampoline_update() restores the flags it found (that one
included), and the ops, never registered, never asks to stop sharing,
so the function's next fexit program was refused too. The fix clears
the flag when that rebuild fails; riscv's JIT refuses the same flags
and needs it as well (by reading).

A trampoline with fentry programs only is not asked to rebuild and is
not refused; by reading ftrace_regs_exit its direct call is dropped the
same way, which was not tested. Seen only under QEMU (pseries, TCG).
The runs carried the fix for the r13 report (ftrace_regs_caller), whose
bug the same path would otherwise hit first.`,
			Titles:     []string{"fexit on fth_deliver_seq"},
			Standalone: "livepatch-fexit",
			Arches:     []string{"ppc64le"},
			Fails:      `^BPF fexit program not called while a livepatch of its function is applied$`,
			Run: `The attached reproducer is a C program of bpf() calls and the
kernel's own samples/livepatch/livepatch-sample.ko, nothing timed.

  1. Build a ppc64le kernel with the options in config (gcc 14 or newer,
     for PPC_FTRACE_OUT_OF_LINE).
  2. make KDIR=<the kernel's build directory> (the program, static).
  3. As root: ./run.sh, then ./run.sh control.

run.sh reads /proc/cmdline 1000 times a step while a BPF fexit program
on cmdline_proc_show() counts its calls: alone, with the livepatch
loaded after the program, and attached after the livepatch was loaded
alone. It exits 1 when reads made with both in place were not counted,
0 when every read was counted or the kernel refused the second of the
two; the control leaves the livepatch out.`,
			Fixes: []string{"powerpc-bpf-refuse-share-ipmodify.patch"},
			// Every call goes through ftrace_regs_caller, whose stale
			// r13 (Finding 5) would crash some runs first.
			Needs: []string{"ppc64-ftrace-regs-caller-keep-r13.patch"},
		},
		{
			Number: "14", Also: []string{"12"}, ID: "refused-direct-called", Bug: true,
			Subject: "ftrace: a refused direct call is still taken after register_ftrace_direct() returns",
			Seen:    "Linux 7.3.4 (x86_64, arm64; riscv64 through BPF's -EAGAIN) and 6.12.117 (arm64)",
			Summary: `ftrace_startup() adds the ops to ftrace_ops_list
(__register_ftrace_function()) and only then runs the IPMODIFY check,
ftrace_hash_ipmodify_enable(). A direct ops without ops_func, on a
function that already has an IPMODIFY ops (a livepatch, or a kprobe
with a post_handler), is refused there with -EBUSY; BPF's ops_func
refuses with -EAGAIN when the trampoline must first be rebuilt with
BPF_TRAMP_F_ORIG_STACK. Either way the rollback takes the ops off the
list again with no grace period.

While the ops is listed, a callsite that two or more ops share goes
through ftrace_ops_list_func(), which calls the refused ops too:
call_direct_funcs() hands the caller the direct trampoline's address,
and the caller jumps there once the list function returns. That jump
can come after register_ftrace_direct() has returned the error to the
owner, who is free to release the trampoline. BPF does so at once on
-EAGAIN (bpf_trampoline_update() -> bpf_tramp_image_free()), and a
caller then runs freed text: "Oops: int3" at the freed image's first
byte on x86_64, "Oops - BRK" on arm64, "Oops - illegal instruction" on
riscv64, when the window was held open. A module that keeps its
trampoline sees the calls after the refusal; the reproducer counts
them, on x86_64 under QEMU on every run, with no delay added.

The rollback's reset_direct() also clears ops->func while a list
function may still be walking the ops: __ftrace_ops_list_func() then
finds a listed ops with no func, and its FTRACE_WARN_ON() calls
ftrace_kill(), which disables function tracing for the whole system
until reboot (WARNING: kernel/trace/ftrace.c:8579 at
arch_ftrace_ops_list_func, "op=... direct_ops"; 3 of 8 runs of the
reproducer without the debug patch).

Running the IPMODIFY check before the ops is listed closes the window
and costs nothing; waiting in the rollback for every task that may
have called the listed ops closes it too, but sleeps for two grace
periods with ftrace_lock and direct_mutex held, on a path BPF takes on
the first attach of every fexit program to a livepatched function.`,
			Repros:     []string{"refused-direct", "eagain-free"},
			Titles:     []string{"called after the kernel refused its attach", "direct trampoline called after register_ftrace_direct()", "in freed bpf_trampoline"},
			Standalone: "refused-direct-called",
			Run: `The attached reproducer needs no other tool: a module, a script that
loads it and says what it saw, and a config fragment. A plain kernel
meets the window a few times in 50 attempts; the debug patch widens it.

  1. Build with the options in config; optionally apply
     ftrace-race-delay.patch (debug only) and boot with
     ftrace_race_delay_ms=20.
  2. make KDIR=<the kernel's build directory>
  3. ./run.sh           (exit 1 and a FAIL: line: the bug)
     ./run.sh control   (the control: must pass)`,
			Fails: `^direct trampoline called after register_ftrace_direct\(\) returned an error$|^WARNING in (refused_direct_target|arch_ftrace_ops_list_func)$`,
			Fixes: []string{"ftrace-startup-check-ipmodify-before-listing.patch", "ftrace-startup-refused-after-gp.patch"},
		},
	}
}

// How says how a cell was matched to a finding's report.
type How string

// The ways of Match, surest first.
const (
	// ByID: the cell's report was attributed to the finding's known
	// trigger (Finding.Known in result.json).
	ByID How = "id"
	// ByRepro: the cell ran one of the finding's scripted sequences.
	ByRepro How = "repro"
	// ByReproducer: the cell ran the finding's standalone reproducer.
	ByReproducer How = "reproducer"
	// ByTitle: only the title is alike; the mail says so and claims no
	// more.
	ByTitle How = "title"
)

// Match returns the report of the finding a cell reproduced, and how it
// was told: by the known finding's ID its report was attributed to, by
// the repro sequence or standalone reproducer it ran, else by the
// longest of the findings' title substrings in its title. ok is false for
// a failure no finding matches: a new one.
func Match(id, repro, reproducer, title string) (r Report, how How, ok bool) {
	all := Reports()
	for _, r := range all {
		switch {
		case id != "" && r.ID == id:
			return r, ByID, true
		case repro != "" && slices.Contains(r.Repros, repro):
			return r, ByRepro, true
		case reproducer != "" && r.Standalone == reproducer:
			return r, ByReproducer, true
		}
	}
	best := ""
	for _, c := range all {
		for _, t := range c.Titles {
			if title != "" && strings.Contains(title, t) && len(t) > len(best) {
				r, best = c, t
			}
		}
	}
	return r, ByTitle, best != ""
}
