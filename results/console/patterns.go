package console

// This file is data: which console lines start a report, how each report is
// titled, which lines still belong to an open report, and which stack frames
// never name the culprit. The code that uses it is in rules.go, detector.go,
// stack.go and title.go. The tables are returned by functions so that the
// only package-level state is their compiled form in rules.go.
//
// Every regexp is matched against a line's message, i.e. after the optional
// "[  12.345678]" timestamp and "[  T123]" / "[    C1]" caller id.

// funcRule says where the function named in a report's title comes from.
type funcRule int

const (
	// funcNone: the title names no function.
	funcNone funcRule = iota
	// funcGroup: the named group "func" of the header or of a detail line,
	// because the kernel itself names the culprit there (WARNING, KASAN).
	funcGroup
	// funcIP: the kernel instruction pointer line (RIP:, pc :, epc :, NIP,
	// PC is at), because oopses, lockups and stalls are about where the CPU
	// was; when that is a helper (kcov, fortify), the first useful frame
	// after the interrupt entry instead.
	funcIP
	// funcFault: the faulting kernel instruction pointer, skipping only
	// reporting and sanitizer helpers: an oops is about the instruction that
	// trapped, even in a lock primitive (an int3 left in up_read by a racing
	// text patch is a bug in up_read's call site, not in its caller).
	funcFault
	// funcAccess: the function that made a bad memory access, named by a
	// sanitizer's header or by the faulting instruction pointer of a
	// general protection or page fault, unless it is any skipped frame: a
	// lock primitive touching freed or wild memory was handed its caller's
	// lock. Traps that are not data accesses (int3, invalid opcode) keep
	// funcFault.
	funcAccess
	// funcStack: the first call-trace frame that is not reporting, locking,
	// scheduling or interrupt machinery.
	funcStack
	// funcWorkqueue: the work function of the first "Workqueue:" line, the
	// only place a workqueue lockup names what is stuck.
	funcWorkqueue
	// funcHeldLock: the first lock site lockdep names ("(name){....}, at:
	// func+0x", or "at:" and the site on the next line), for the reports
	// about one lock: still held at exit or return to user space, freed
	// while held, released unbalanced, taken recursively. Their stack is
	// the checking path, the same for every such bug; the site is the
	// culprit.
	funcHeldLock
	// funcAcquire: a circular dependency is titled by the lock being taken
	// when lockdep saw the cycle (the first "at:" site), else by the lock
	// already held (the second), else by the stack, skipping machinery at
	// each step: the acquiring call site is what closes the cycle.
	funcAcquire
	// funcSite: the named group "func", never skipped: an ftrace bug is
	// about the call site ftrace failed to patch, whatever function it is.
	funcSite
	// funcStall: a lockup or stall catches its CPU at a random point of a
	// loop, so the instruction pointer does not name the same bug twice.
	// The title names the frame below the first dispatcher of the
	// interrupted stack (stallAnchors: the syscall entry, the work or timer
	// dispatch, vfs_read...): the syscall or callback that loops.
	funcStall
	// funcHang: a hung task waits where the culprit made it wait, so the
	// frames that say how it waits (hangSkip) are passed over, and the
	// waits every stuck RCU grace period or RTNL holder makes all its
	// victims share (hangAnchors) name the bucket instead.
	funcHang
)

// patternSpec describes one kind of report header.
type patternSpec struct {
	// Kind is the crash class of reports this header starts.
	Kind Kind
	// Header recognises the report's first line. Named groups feed Title.
	Header string
	// Details are matched against the report's first few lines (including
	// the header); the first match of each adds its named groups, for
	// reports whose header says too little (ftrace bug).
	Details []string
	// Title is the title template: "{name}" is replaced by the named group
	// of that name, normalised; "{func}" by the function chosen by Func. When
	// no function is found, " in {func}" is dropped.
	Title string
	// Func chooses the title's function.
	Func funcRule
	// Skip is a regexp of frames this report's title never names, on top
	// of the skip list (skipframes.txt): the report's own machinery, which
	// is no culprit here although it can be elsewhere (schedule() in
	// "scheduling while atomic", the debug-objects callers of ODEBUG).
	// It must match the whole symbol.
	Skip string
	// Absorb lists header lines that continue this report instead of
	// starting a new one, when they come within absorbWindow lines of the
	// header: the die line after "kernel BUG at", the WARNING ftrace_bug()
	// prints after its own banner.
	Absorb []string
	// End recognises the report's last line; "" means endTrace.
	End string
	// UntilEnd keeps the report open across free-form sections (a KASAN
	// report's allocation stacks and memory dump), until End, a new header
	// in the same context or MaxLines.
	UntilEnd bool
	// MaxLines bounds the report's length; 0 means defaultMaxLines.
	MaxLines int
}

// Fragments shared by several patterns.
const (
	// funcName is a kernel symbol as printed in a header, capturing "func".
	funcName = `(?P<func>[A-Za-z_][\w.]*)`
	// offset is the "+0x1a/0x40" after a symbol.
	offset = `\+0x[0-9a-f]+/0x[0-9a-f]+`
	// module is the " [fth_target]" after an offset in a module's text.
	module = `(?: \[[\w.-]+\])?`
	// dieLine is the line die() prints: "Oops: 0000 [#1] SMP",
	// "invalid opcode: 0000 [#1]", "Internal error: Oops - BUG: f2000800 [#1]".
	dieLine = `^[A-Za-z][^\[]*\[#\d+\]`
	// endTrace ends WARNINGs and oopses ("---[ end trace 0000000000000000 ]---")
	// and panics ("---[ end Kernel panic - not syncing: ... ]---").
	endTrace = `^-+\[ end (?:trace|Kernel panic)`
	// lockdepMaxLines bounds deadlock reports, whose dependency chains put
	// the call trace well past defaultMaxLines.
	lockdepMaxLines = 250
	// sanitizerEnd closes KASAN, KMSAN, KCSAN, KFENCE and UBSAN reports.
	sanitizerEnd = `^={10,}$|^-+\[ end trace`
	// ftraceFailure is what ftrace_bug() says went wrong.
	ftraceFailure = `(?P<what>ftrace (?:faulted on (?:modifying|writing|unknown error)|failed to modify))`
	// lockdepBanner starts a lockdep report's header: "WARNING: " since
	// v4.15, "[ INFO: " or "[ BUG: " (the header in brackets) before.
	lockdepBanner = `^(?:\[ )?(?:WARNING|INFO|BUG): `
	// panicOnWarn is the panic a WARN() makes with panic_on_warn. Before
	// v4.16 __warn() panicked before printing the call trace, so the
	// trace that follows is the WARN's: the panic continues the report.
	// Later kernels panic after the report's end marker, a finding of its
	// own.
	panicOnWarn = `^Kernel panic - not syncing: panic_on_warn set`
	// kmemleakObject is kmemleak's report of one leaked object.
	kmemleakObject = `^(?:kmemleak: )?unreferenced object(?: \(percpu\))? 0x[0-9a-f]+ \(size \d+\):`
	// kmemleakAllocators are the allocation paths of a leak's backtrace
	// above the code that allocated and lost it.
	kmemleakAllocators = `\w*(?:kmemleak|mmap|kmem|slab|alloc|create_object|idr_get|list_lru_init|kasprintf|kvasprintf|pcpu_create|strdup|strndup|memdup)\w*`
	// warnCallers are the checks whose WARN is about their caller:
	// might_sleep() and friends, softirq re-enabling, work flushing.
	warnCallers = `\w*might_sleep|__might_resched|__might_fault|__local_bh_enable_ip|\w*flush_work`
	// odebugUsers are debug objects' own users (timers, work, RCU heads,
	// per-cpu counters, vmalloc), the object's owner called them.
	odebugUsers = `\w*(?:debug_|rcu|hrtimer_|timer_|work_|percpu_|vunmap|vfree|__free_|kobject_)\w*`
	// ftraceSite is the faulting call site ftrace_bug() prints: "[<ffff...>] func+0x4/0x20".
	ftraceSite = `\[<[0-9a-f]+>\] ` + funcName + `\+0x`
)

// headerPatterns is the header table. Order matters: the first match wins,
// so specific headers come before the generic "WARNING:" and "BUG:" ones.
func headerPatterns() []patternSpec {
	oopsDie := []string{dieLine}
	return []patternSpec{
		// The agent's Go runtime dying: "fatal error: concurrent map
		// writes", "panic: runtime error: ...", then its goroutines. The
		// kernel never starts a line so; init's "Exiting..." ends it.
		{Kind: KindAgentCrash, Header: `^(?P<what>(?:fatal error|panic): \S.*)$`, Title: "agent crashed: {what}", End: `^init: .*Exiting\.\.\.$`, UntilEnd: true, MaxLines: 400},

		// ftrace_bug() prints a banner, the failure, the call site, the
		// record flags and then WARNs: one bug, titled from the call site.
		{
			Kind:    KindFtraceBug,
			Header:  `^-+\[ ftrace bug \]-+$`,
			Details: []string{`^` + ftraceFailure, ftraceSite},
			Title:   "ftrace bug: {what} in {func}",
			Func:    funcSite,
			Absorb:  []string{`^ftrace (?:faulted|failed)`, `^WARNING: .*\bftrace_bug` + offset},
		},
		// Kernels before the banner start with the failure line itself.
		{
			Kind:    KindFtraceBug,
			Header:  `^` + ftraceFailure,
			Details: []string{ftraceSite},
			Title:   "ftrace bug: {what} in {func}",
			Func:    funcSite,
			Absorb:  []string{`^WARNING: .*\bftrace_bug` + offset},
		},

		// Lockdep prints "WARNING:" headers that are not WARN() splats.
		// The workqueue's own functions take a lock per work item: a cycle
		// through them is about the work, not the workqueue.
		{Kind: KindLockdep, Header: lockdepBanner + `possible circular locking dependency detected`, Title: "possible deadlock in {func}", Func: funcAcquire, Skip: `process_one_work|flush_workqueue|drain_workqueue|destroy_workqueue`, MaxLines: lockdepMaxLines},
		{Kind: KindLockdep, Header: lockdepBanner + `possible recursive locking detected`, Title: "possible deadlock in {func}", Func: funcHeldLock, MaxLines: lockdepMaxLines},
		{Kind: KindLockdep, Header: lockdepBanner + `(?:HARD|SOFT)IRQ-safe -> (?:HARD|SOFT)IRQ-unsafe lock order detected`, Title: "possible deadlock in {func}", Func: funcStack, MaxLines: lockdepMaxLines},
		{Kind: KindLockdep, Header: lockdepBanner + `possible irq lock inversion dependency detected`, Title: "possible deadlock in {func}", Func: funcHeldLock, MaxLines: lockdepMaxLines},
		{Kind: KindLockdep, Header: lockdepBanner + `inconsistent lock state`, Title: "inconsistent lock state in {func}", Func: funcStack},
		// RCU's own and the allocators' lockdep checks fire for their caller.
		{Kind: KindLockdep, Header: lockdepBanner + `suspicious RCU usage`, Title: "suspicious RCU usage in {func}", Func: funcStack, Skip: `_*rcu_\w+|\w+_rcu|\w*(?:kmem|slab)\w*`},
		// Kernels before v4.15 print these headers as "BUG:".
		{Kind: KindLockdep, Header: lockdepBanner + `bad unlock balance detected!`, Title: "bad unlock balance in {func}", Func: funcHeldLock},
		{Kind: KindLockdep, Header: lockdepBanner + `held lock freed!`, Title: "held lock freed in {func}", Func: funcHeldLock},
		{Kind: KindLockdep, Header: lockdepBanner + `lock held when returning to user space!`, Title: "lock held when returning to user space in {func}", Func: funcHeldLock},
		{Kind: KindLockdep, Header: `^BUG: (?P<what>MAX_LOCKDEP_\w+ too low!)`, Title: "BUG: {what}"},
		{Kind: KindLockdep, Header: lockdepBanner + `\S+/\d+ still has locks held!`, Title: "still has locks held in {func}", Func: funcHeldLock},
		{Kind: KindLockdep, Header: `^INFO: trying to register non-static key`, Title: "trying to register non-static key in {func}", Func: funcStack, Skip: `\w*(?:stack|lock|IRQ)\w*`},
		{Kind: KindLockdep, Header: `^\[ BUG: Invalid wait context \]`, Title: "BUG: Invalid wait context in {func}", Func: funcStack},
		// DEBUG_LOCKS_WARN_ON() is a WARN whose message comes first; any
		// WARN in the locking code is lockdep finding the locking broken.
		{Kind: KindLockdep, Header: `^DEBUG_LOCKS_WARN_ON\(`, Title: "locking bug in {func}", Func: funcStack, Absorb: []string{`^WARNING: `, panicOnWarn}},
		{Kind: KindLockdep, Header: `^WARNING: (?:CPU: \d+ PID: \d+ at )?kernel/locking/[\w./-]+:\d+ `, Title: "locking bug in {func}", Func: funcStack, Absorb: []string{panicOnWarn}},

		// WARNs whose message says what broke. The message comes before the
		// WARNING line, which joins the report; the warning function is a
		// helper, so the title names its caller.
		{Kind: KindWarning, Header: `^refcount_t: (?P<fixed>[^.]+)\.?$`, Title: "refcount_t: {fixed} in {func}", Func: funcStack, Skip: `\w*refcount\w*`, Absorb: []string{`^WARNING: `, panicOnWarn}},
		// DEBUG_LIST's CHECK_DATA_CORRUPTION(): a WARN (a BUG with
		// BUG_ON_DATA_CORRUPTION) whose message says which list operation
		// found the list broken; syzkaller's title.
		{Kind: KindWarning, Header: `^list_(?:add|del) corruption[.,] `, Title: "BUG: corrupted list in {func}", Func: funcStack, Absorb: []string{`^WARNING: `, `^kernel BUG at `, dieLine, panicOnWarn}},
		{Kind: KindWarning, Header: `^ODEBUG: (?P<what>[\w ]+?) \(active state \d+\) object: `, Title: "ODEBUG: {what} in {func}", Func: funcStack, Skip: odebugUsers, Absorb: []string{`^WARNING: `, panicOnWarn}},
		// The frame-pointer unwinder's complaint has no call trace of its
		// own, only a raw stack dump; "in comm:pid" is the task.
		{Kind: KindWarning, Header: `^WARNING: kernel stack (?P<what>frame pointer|regs) at\s+\S+\s+in .+:\d+ has bad (?:'bp' )?value`, Title: "WARNING: kernel stack {what} has bad value"},

		// WARN(): classic, new (v6.15+, optionally with the condition) and
		// ancient forms. The header names the function that warned.
		// A WARN in debug objects or in a might_sleep()-style check is
		// about its caller (warnCallers).
		{Kind: KindWarning, Header: `^WARNING: CPU: \d+ PID: \d+ at \S+ ` + funcName + `\+0x`, Title: "WARNING in {func}", Func: funcGroup, Skip: warnCallers, Absorb: []string{panicOnWarn}},
		{Kind: KindWarning, Header: `^WARNING: (?:\[.*\] )?\S+:\d+ at ` + funcName + offset + module + `, CPU#\d+`, Title: "WARNING in {func}", Func: funcGroup, Skip: warnCallers, Absorb: []string{panicOnWarn}},
		{Kind: KindWarning, Header: `^WARNING: at \S+ ` + funcName + `\+0x`, Title: "WARNING in {func}", Func: funcGroup, Skip: warnCallers, Absorb: []string{panicOnWarn}},
		{Kind: KindWarning, Header: `^WARNING: at ` + funcName + offset + module + `, CPU#\d+`, Title: "WARNING in {func}", Func: funcGroup, Skip: warnCallers, Absorb: []string{panicOnWarn}},

		// arm64's overflow stack report (panic_bad_stack()): pc is where
		// the task ran out of stack; the panic that follows is its end.
		{Kind: KindOops, Header: `^Insufficient stack space to handle exception!`, Title: "kernel stack overflow in {func}", Func: funcStall, Absorb: []string{`^Kernel panic - not syncing: kernel stack overflow`}},
		{Kind: KindPanic, Header: `^Kernel panic - not syncing: stack-protector: Kernel stack is corrupted in: ` + funcName, Title: "kernel panic: stack is corrupted in {func}", Func: funcGroup},
		// schedule() checks the stack end: the overflow happened in what
		// the task ran before, named like a stall.
		{Kind: KindPanic, Header: `^Kernel panic - not syncing: corrupted stack end detected inside scheduler`, Title: "kernel panic: corrupted stack end in {func}", Func: funcStall, Skip: `\w*schedule\w*|retint_kernel`},
		{Kind: KindPanic, Header: `^Kernel panic - not syncing: (?P<msg>.*\S)`, Title: "kernel panic: {msg}"},

		{Kind: KindSoftLockup, Header: `^(?:(?:NMI )?watchdog: )?BUG: soft lockup - CPU#\d+ stuck for \d+s!`, Title: "BUG: soft lockup in {func}", Func: funcStall},
		{Kind: KindHardLockup, Header: `^(?:(?:NMI )?watchdog: )?(?:CPU\d+: )?Watchdog detected hard LOCKUP on cpu \d+`, Title: "BUG: hard lockup in {func}", Func: funcIP},
		// The stalled CPU's backtrace comes after the stall summary, often
		// from another CPU's context.
		{Kind: KindRCUStall, Header: `^(?:rcu: )?(?:INFO: )?(?P<flavor>rcu_\w+) (?:self-)?detected (?:expedited )?stalls? on`, Title: "INFO: rcu detected stall in {func}", Func: funcStall, Skip: `\w*rcu\w*|\w*apic_timer_interrupt\w*`, MaxLines: 150},
		// RCU Tasks says a grace period is taking long (rcu_task_stall_info,
		// 10 s by default) well before its stall warning: a task kept in
		// a trampoline, or never scheduled, holds up every detach.
		{Kind: KindRCUStall, Header: `^\w+: (?P<flavor>rcu_tasks\w*) grace period number \d+ \(since boot\)(?: gp_state: \S+)? is \d+ jiffies old`, Title: "INFO: {flavor} grace period stall", MaxLines: 20},
		{Kind: KindHungTask, Header: `^INFO: task (?P<task>.+):\d+ blocked (?:in I/O wait )?for more than \d+ seconds`, Title: "INFO: task hung in {func}", Func: funcHang},
		{Kind: KindHungTask, Header: `^INFO: task (?P<task>.+):\d+ can't die for more than \d+ seconds`, Title: "INFO: task can't die in {func}", Func: funcStack, Skip: `\w*schedule\w*`},
		// The busy workers' backtraces come after a long pool dump.
		{Kind: KindWorkqueueStall, Header: `^BUG: workqueue lockup - pool`, Title: "BUG: workqueue lockup in {func}", Func: funcWorkqueue, MaxLines: 250},

		{Kind: KindOops, Header: `^(?:Oops: )?(?:segment-related )?general protection fault\b`, Title: "general protection fault in {func}", Func: funcAccess},
		{Kind: KindOops, Header: `^(?:traps: )?PANIC: double fault, error_code: 0x[0-9a-f]+`, Title: "PANIC: double fault in {func}", Func: funcFault, Absorb: oopsDie},
		{Kind: KindOops, Header: `^BUG: (?:\w+ )?stack guard page was hit at`, Title: "BUG: stack guard page was hit in {func}", Func: funcFault, Absorb: oopsDie},
		// powerpc's bad_page_fault(): "BUG: Kernel NULL pointer dereference on read at 0x00000000",
		// then "Faulting instruction address:" and die()'s "Oops: Kernel access of bad area, sig: 11 [#1]".
		{Kind: KindOops, Header: `^BUG: (?P<what>Kernel NULL pointer dereference|Unable to handle kernel (?:data access|instruction fetch|unaligned access)|Unable to handle unknown paging fault)`, Title: "BUG: {what} in {func}", Func: funcAccess, Absorb: oopsDie},
		// arm (and arm64 before v5.8) do_mem_abort(): "Unhandled fault: synchronous external abort (0x96000010) at 0x...".
		{Kind: KindOops, Header: `^Unhandled fault: (?P<what>.+?) \(0x[0-9a-f]+\) at 0x[0-9a-f]+`, Title: "Unhandled fault: {what} in {func}", Func: funcAccess, Absorb: oopsDie},
		{Kind: KindOops, Header: `^BUG: unable to handle (?P<what>page fault|kernel paging request|kernel NULL pointer dereference)`, Title: "BUG: unable to handle {what} in {func}", Func: funcAccess, Absorb: oopsDie},
		{Kind: KindOops, Header: `^BUG: kernel NULL pointer dereference, address`, Title: "BUG: kernel NULL pointer dereference in {func}", Func: funcAccess, Absorb: oopsDie},
		{Kind: KindOops, Header: `^Unable to handle kernel (?P<what>paging request|NULL pointer dereference|access to user memory|execute from non-executable memory|read from unreadable memory|write to read-only memory)`, Title: "Unable to handle kernel {what} in {func}", Func: funcAccess, Absorb: oopsDie},
		{Kind: KindOops, Header: `^Oops: (?P<what>[A-Za-z][A-Za-z0-9 ]*[A-Za-z0-9]): [0-9a-f]+ \[#\d+\]`, Title: "Oops: {what} in {func}", Func: funcFault},
		{Kind: KindOops, Header: `^(?P<what>int3|invalid opcode|double fault|stack segment|divide error|divide_error|overflow|bounds|invalid TSS|segment not present|alignment check|simd floating point|stack guard page|coprocessor segment overrun): [0-9a-f]+ \[#\d+\]`, Title: "Oops: {what} in {func}", Func: funcFault},
		{Kind: KindOops, Header: `^Internal error: Oops - (?P<what>[^:\[]*[^:\[ ]): [0-9a-fx]+ \[#\d+\]`, Title: "Oops: {what} in {func}", Func: funcFault},
		{Kind: KindOops, Header: `^Oops: (?P<what>[^,\[]*[^,\[ ]), sig: \d+ \[#\d+\]`, Title: "Oops: {what} in {func}", Func: funcFault},
		{Kind: KindOops, Header: `^(?:Internal error: )?Oops(?:: [0-9a-fx]+)? \[#\d+\]`, Title: "Oops in {func}", Func: funcFault},
		// riscv die(): "Oops - illegal instruction [#1]", "Kernel BUG [#1]".
		{Kind: KindOops, Header: `^Oops - (?P<what>[^\[]*[^\[ ]) \[#\d+\]`, Title: "Oops: {what} in {func}", Func: funcFault},
		{Kind: KindBug, Header: `^Kernel BUG \[#\d+\]`, Title: "kernel BUG in {func}", Func: funcIP},
		// arm64 die() for what is not an "Oops": "Internal error: synchronous external abort: 0000000096000010 [#1]  SMP".
		{Kind: KindOops, Header: `^Internal error: (?P<what>[^:\[]*[^:\[ ]): [0-9a-fx]+ \[#\d+\]`, Title: "Internal error: {what} in {func}", Func: funcFault},

		// The skb helpers BUG() on their caller's bad skb.
		{Kind: KindBug, Header: `^kernel BUG at (?P<file>[^\s:]+):\d+`, Title: "kernel BUG in {func}", Func: funcIP, Skip: `skb_\w+`, Absorb: oopsDie},
		// KCSAN names both racing functions, ordered so the title is stable.
		{Kind: KindBug, Header: `^BUG: KCSAN: (?P<what>[\w :-]+?) in ` + funcName + ` / (?P<other>[A-Za-z_][\w.]*)`, Title: "KCSAN: {what} in {func} / {other}", Func: funcGroup, End: sanitizerEnd, UntilEnd: true, MaxLines: 200},
		{Kind: KindBug, Header: `^BUG: (?P<tool>KASAN|KMSAN|KCSAN|KFENCE): (?P<what>.+?) in ` + funcName, Title: "{tool}: {what} in {func}", Func: funcAccess, End: sanitizerEnd, UntilEnd: true, MaxLines: 300},
		{Kind: KindBug, Header: `^BUG: using (?P<what>smp_processor_id|__this_cpu_\w+)\(\) in preemptible \[[0-9a-f]+\] code`, Details: []string{`^caller is ` + funcName + `\+0x`}, Title: "BUG: using {what}() in preemptible code in {func}", Func: funcGroup, Skip: `\w*preempt\w*|debug_\w+`},
		// mm/usercopy.c prints what it caught, then BUG()s.
		{Kind: KindBug, Header: `^usercopy: Kernel memory (?:exposure|overwrite) attempt detected`, Title: "BUG: bad usercopy in {func}", Func: funcStack, Absorb: []string{`^kernel BUG at `, dieLine}},
		{Kind: KindBug, Header: `^UBSAN: (?P<what>.+?) in \S+`, Title: "UBSAN: {what} in {func}", Func: funcStack, Skip: `\w*(?:ubsan|overflow)\w*`, End: sanitizerEnd, UntilEnd: true, MaxLines: 150},
		{Kind: KindBug, Header: `^BUG: scheduling while atomic`, Title: "BUG: scheduling while atomic in {func}", Func: funcStack, Skip: `\w*schedule\w*`},
		{Kind: KindBug, Header: `^BUG: sleeping function called from invalid context`, Title: "BUG: sleeping function called from invalid context in {func}", Func: funcStack},
		// kmemleak names the leaked object's allocation stack; the first
		// frame past the allocator allocated it.
		// Kernels before v5.2 print "BUG: memory leak" before the object.
		{Kind: KindLeak, Header: `^BUG: memory leak$|` + kmemleakObject, Title: "memory leak in {func}", Func: funcStack, Skip: kmemleakAllocators, Absorb: []string{kmemleakObject}, MaxLines: 60},
		// Older kernels' own VFS use-after-free checks, with no trace.
		{Kind: KindBug, Header: `^VFS: (?P<what>Busy inodes after unmount|Close: file count is 0)`, Title: "VFS: {what}"},
		{Kind: KindLeak, Header: `^unregister_netdevice: waiting for \S+ to become free`, Title: "unregister_netdevice: waiting for DEV to become free", MaxLines: 20},
		{Kind: KindBug, Header: `^BUG: (?P<what>spinlock|rwlock) (?P<how>lockup suspected|already unlocked|recursion|cpu recursion|bad magic|wrong owner|wrong CPU|trylock failure on UP)`, Title: "BUG: {what} {how} in {func}", Func: funcStack, Skip: `\w*(?:spin_|_lock|_unlock)\w*`},
		// The work function that returned with a lock held or preemption off.
		{Kind: KindBug, Header: `^BUG: workqueue leaked lock or atomic`, Details: []string{`last function: ` + funcName}, Title: "BUG: workqueue leaked lock or atomic in {func}", Func: funcSite},
		{Kind: KindBug, Header: `^BUG: (?P<what>.*\S)`, Title: "BUG: {what}", Absorb: oopsDie},
	}
}

// whoLines say which CPU, task and taint a report is about. Each is matched
// against every line of the report's own context; the first line that
// names a field sets it. The named groups are cpu, pid, comm and taint.
func whoLines() []string {
	return []string{
		// dump_stack_print_info(): "CPU: 1 UID: 0 PID: 49 Comm: uinit Not tainted 7.3.4 #1 PREEMPT(full)";
		// older kernels have no UID; comm is %.20s and may hold spaces.
		`^CPU: (?P<cpu>\d+) (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: (?P<comm>.*?) (?:Kdump: loaded )?(?:Not tainted|Tainted: (?P<taint>[A-Z ]*[A-Z]))`,
		// __warn() since v6.15: "WARNING: file:line at func+0x1/0x2, CPU#0: kworker/u8:0/10040".
		`^WARNING: .* at \S+, CPU#(?P<cpu>\d+): (?P<comm>.+)/(?P<pid>\d+)$`,
		// Soft lockups: "BUG: soft lockup - CPU#2 stuck for 136s! [syz-executor4:4888]".
		`soft lockup - CPU#(?P<cpu>\d+) stuck for \d+s! \[(?P<comm>.+):(?P<pid>\d+)\]`,
		// Hung tasks: "INFO: task udevd:5612 blocked for more than 143 seconds.".
		`^INFO: task (?P<comm>.+):(?P<pid>\d+) blocked`,
		// check_preemption_disabled(): "BUG: using smp_processor_id() in preemptible [00000000] code: sh/123".
		`^BUG: using .* in preemptible \[[0-9a-f]+\] code: (?P<comm>.+)/(?P<pid>\d+)$`,
		// Lockdep names the task before its lock: "kworker/0:1/12 is trying to acquire lock:".
		`^(?P<comm>\S+)/(?P<pid>\d+) (?:is trying to|is freeing memory|\[HC)`,
		// Lockdep's "WARNING: sh/123 still has locks held!".
		`^WARNING: (?P<comm>\S+)/(?P<pid>\d+) still has locks held`,
		// KCSAN: "write to 0xffff... of 8 bytes by task 1234 on cpu 0:".
		`bytes by task (?P<pid>\d+) on cpu (?P<cpu>\d+):$`,
		`bytes by interrupt on cpu (?P<cpu>\d+):$`,
		// kmemleak: `  comm "swapper/0", pid 1, jiffies 4294893533`.
		`^(?:kmemleak:)?\s+comm "(?P<comm>[^"]*)", pid (?P<pid>\d+), jiffies`,
		// Taint on a line of its own: hung tasks ("      Tainted: G   L   6.1 #1"),
		// lockdep's print_kernel_ident() ("7.3.4 #1 Not tainted").
		`^\s*(?:\S+ #\d+ )?(?:Not tainted|Tainted: (?P<taint>[A-Z ]*[A-Z]))(?:\s|$)`,
	}
}

// bodyPrefixes are unindented lines that belong to a report even though they
// are neither frames nor register dumps, so an open report keeps going.
func bodyPrefixes() []string {
	return []string{
		"Modules linked in:", "CPU: ", "Hardware name:", "Workqueue:", "Tainted:", "Kernel Offset:", "Rebooting in",
		"Dumping ftrace buffer:", "Shutting down cpus with NMI", "Sending NMI from CPU", "NMI backtrace for cpu",
		"task:", "Stopper:", "irq event stamp:", "hardirqs last", "softirqs last", "Preemption disabled at:",
		"Showing busy workqueues", "Showing backtraces of busy workers", "Showing all locks held", "workqueue ", "pool ",
		"Mem abort info:", "Data abort info:", "#PF: ", "PGD ", "Internal error:", "Process ", "Stack: ", "Exception stack",
		"rcu: ", "Allocated by task", "Freed by task", "Last potentially related work creation",
		"Second to last potentially related work creation", "The buggy address", "Memory state around the buggy address",
		"page:", "page dumped because", "flags: 0x", "raw: ", "head: ", "page_owner", "page last",
		"Uninit was", "Bytes ", "Memory access of size", "Read of size", "Write of size", "Read at addr", "Write at addr",
		"KASAN: ", "Reported by Kernel Concurrency Sanitizer", "CPU features:", "Memory Limit:",
		"SMP: stopping secondary CPUs", "SMP: failed to stop", "INFO: lockdep is turned off", "stack backtrace:",
		"other info that might help us debug this", "Possible unsafe locking scenario",
		"Initializing ftrace call sites", "Setting ftrace call site", "Updating ftrace call site",
		"Changing ftrace call site", "Unknown ftrace call site", "ftrace record flags:", "expected tramp:",
		"---[ ", "kmemleak: ", "caller is ", "ODEBUG: ", "refcount_t: ", "usercopy: ", "DEBUG_LOCKS_WARN_ON",
		"Faulting instruction address:", "Fixing recursive fault", "PANIC: double fault", "traps: PANIC: double fault",
		// __might_resched()'s lines between "BUG: sleeping function called
		// from invalid context" and its stack (kernel/sched/core.c).
		"in_atomic(): ", "preempt_count: ", "RCU nest depth: ",
		// powerpc __die()'s second line, after "Oops: ..., sig: N [#1]".
		"LE PAGE_SIZE=", "BE PAGE_SIZE=",
		// panic_bad_stack()'s lines (arm64).
		"ESR: 0x", "FAR: 0x", "Task stack:", "IRQ stack:", "Overflow stack:",
	}
}

// stallAnchor is a dispatcher frame of an interrupted stack (funcStall):
// the frame below it (called by it) names the stall, or with Self the
// anchor itself, when what it dispatches varies from one stall of the same
// bug to the next.
type stallAnchor struct {
	Frame string
	Self  bool
}

// stallAnchors are matched, whole symbol, against a stalled stack from
// its top down; the first one met decides (syzkaller's linux.go reads
// stalls by the same dispatchers: the facts are the kernel's call graph).
func stallAnchors() []stallAnchor {
	return []stallAnchor{
		// IPIs: which function smp_call_function* waits on varies; the
		// wait is the bug.
		{Frame: `\w*smp_call_function\w*`, Self: true},
		// Syscall and exception entry; work, timer, softirq and kthread
		// dispatch; task work on the way back to user space. A name may
		// carry an arch or era prefix or suffix (do_syscall_64,
		// __run_timers, ret_from_fork_asm), so these match inside it.
		{Frame: `\w*(?:do_syscall_|do_fast_syscall_|sysenter_dispatch|tracesys_phase2|el0_svc_handler|invoke_syscall|ret_fast_syscall|__do_fault|do_page_fault)\w*|page_fault`},
		{Frame: `\w*(?:process_one_work|netif_receive_skb|do_softirq|call_timer_fn|_run_timers|run_timer_softirq|hrtimer_run|run_ksoftirqd|smpboot_thread_fn|start_secondary|cpu_startup_entry|ret_from_fork|tasklet_action|tasklet_hi_action|__fput|task_work_run|exit_to_usermode)\w*|kthread`},
		// The discriminating file, ioctl and socket operations: what
		// they call names the driver or protocol.
		{Frame: `\w*(?:full_proxy_write|full_proxy_read|vfs_write|vfs_read|vfs_iter_read|vfs_iter_write|do_iter_read|do_iter_write|call_read_iter|call_write_iter|new_sync_read|new_sync_write|vfs_ioctl|ksys_ioctl|compat_ioctl|blkdev_driver_ioctl|blkdev_ioctl|do_iter_readv_writev|mmap_region|do_mmap|do_dentry_open|vfs_open)\w*|call_mmap\w*`},
		{Frame: `\w*(?:kernel_setsockopt|sock_common_setsockopt|kernel_listen|sk_common_release|kernel_accept)\w*|(?:sock_sendmsg|sock_recvmsg|sock_release|__sock_release|sock_mmap|sock_do_ioctl|sock_ioctl|compat_sock_ioctl|nfnetlink_rcv_msg|rtnetlink_rcv_msg|netlink_dump)\w*|setsockopt|listen|accept|(?:sys_)?(?:socketpair|connect|ioctl)\w*`},
	}
}

// hangAnchor is a wait every victim of one stuck subsystem shares
// (funcHang): a task waiting in Frame is titled Title ("" keeps the frame).
type hangAnchor struct {
	Frame string
	Title string
}

func hangAnchors() []hangAnchor {
	return []hangAnchor{
		// Every rtnl_lock() caller hangs behind one RTNL holder.
		{Frame: `rtnl_lock`},
		// A stuck grace period hangs every synchronize_*() caller, under
		// whichever flavour it waits for.
		{Frame: `synchronize_(?:rcu|srcu|net|sched)\w*`, Title: "synchronize_rcu"},
	}
}

// hangSkip says how a hung task waits rather than what it waits for:
// scheduling, sleeping locks, completions, kthread and workqueue waits.
const hangSkip = `\w*(?:sched|_lock|_slowlock|down|rwsem|completion|kthread|wait|synchronize|context_switch|__switch_to|cancel_delayed_work|rcu_barrier)\w*`

// syscallPrefixes are the per-arch and per-era wrappers of one syscall
// (__x64_sys_mremap, __se_sys_mremap, SyS_mremap, __arm64_sys_mremap): a
// title names the syscall by whichever of them, stripped once, leaves the
// shortest name, so every arch and kernel gives one title.
func syscallPrefixes() []string {
	return []string{"SYSC_", "SyS_", "sys_", "__x64_", "__ia32_", "__arm64_", "____sys_", "___sys_", "__sys_", "__se_", "__se_sys_", "__do_sys_", "compat_SYSC_", "compat_SyS_", "ksys_"}
}
