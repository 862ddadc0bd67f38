// SPDX-License-Identifier: GPL-2.0
/*
 * Injected bugs: a write of a bug's name to /sys/kernel/debug/fth_target/bug
 * commits that bug once, so the kernel's own checkers (lockdep, RCU's
 * lockdep, DEBUG_PREEMPT, DEBUG_ATOMIC_SLEEP, debug objects, kmemleak) print
 * the report the harness's console parser must detect and title. The agent's
 * crash=bug:<name> writes it after the attach phase (kconfigs/debug/triage,
 * scripts/capture-reports.sh); LKDTM covers the faults and KASAN reports.
 *
 * Each bug is a named function, so the report's guilty frame is the bug and
 * not the checker. The checkers' bugs leave the kernel usable: locks are
 * released where lockdep allows it, and a lock that must stay held is one
 * nothing else takes. The faults (divide-error, the gpf-*s, double-fault,
 * external-abort, illegal-instruction) kill the writing task, as an oops
 * does, or the kernel.
 */
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/ftrace.h>
#include <linux/io.h>
#include <linux/kthread.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/percpu.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timer.h>
#include <linux/uaccess.h>

#include "bugs.h"

struct fth_bug_obj {
	struct mutex m;
	spinlock_t s;
	struct timer_list t;
	int v;
};

/* Every mutex from here has one lockdep class: this init site. */
static void fth_bug_mutex_init(struct mutex *m)
{
	mutex_init(m);
}

static noinline int fth_bug_bad_unlock(void)
{
	static DEFINE_MUTEX(never_locked);

	mutex_unlock(&never_locked);
	return 0;
}

static noinline int fth_bug_held_lock_freed(void)
{
	struct fth_bug_obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	mutex_init(&o->m);
	mutex_lock(&o->m);
	kfree(o);
	return 0;
}

static DEFINE_MUTEX(exit_held);

static int fth_bug_exit_thread(void *arg)
{
	/* Nothing else takes exit_held: it stays locked for good. */
	mutex_lock(&exit_held);
	return 0;
}

static noinline int fth_bug_locks_held_at_exit(void)
{
	struct task_struct *t = kthread_run(fth_bug_exit_thread, NULL, "fth_bug_exit");

	if (IS_ERR(t))
		return PTR_ERR(t);
	msleep(200);
	return 0;
}

static noinline int fth_bug_recursive_lock(void)
{
	struct mutex a, b;

	fth_bug_mutex_init(&a);
	fth_bug_mutex_init(&b);
	mutex_lock(&a);
	mutex_lock(&b);
	mutex_unlock(&b);
	mutex_unlock(&a);
	return 0;
}

static noinline int fth_bug_circular_lock(void)
{
	static DEFINE_MUTEX(first);
	static DEFINE_MUTEX(second);

	mutex_lock(&first);
	mutex_lock(&second);
	mutex_unlock(&second);
	mutex_unlock(&first);
	mutex_lock(&second);
	mutex_lock(&first);
	mutex_unlock(&first);
	mutex_unlock(&second);
	return 0;
}

static noinline int fth_bug_non_static_key(void)
{
	struct fth_bug_obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	/* Never spin_lock_init()ed: lockdep finds no key. */
	spin_lock(&o->s);
	spin_unlock(&o->s);
	kfree(o);
	return 0;
}

static noinline int fth_bug_uninit_mutex(void)
{
	struct fth_bug_obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	/* Never mutex_init()ed: DEBUG_MUTEXES finds no magic and refuses it. */
	mutex_lock(&o->m);
	kfree(o);
	return 0;
}

static int __rcu *fth_bug_rcu_ptr;
static int fth_bug_rcu_val = 1;

static noinline int fth_bug_rcu_outside_reader(void)
{
	int *p;

	rcu_assign_pointer(fth_bug_rcu_ptr, &fth_bug_rcu_val);
	p = rcu_dereference(fth_bug_rcu_ptr);
	return *p - 1;
}

static DEFINE_SPINLOCK(softirq_lock);
static struct timer_list softirq_timer;

static void fth_bug_softirq_fn(struct timer_list *t)
{
	spin_lock(&softirq_lock);
	spin_unlock(&softirq_lock);
}

static noinline int fth_bug_inconsistent_lock(void)
{
	/* Process context with softirqs on, then the same lock in a timer. */
	spin_lock(&softirq_lock);
	spin_unlock(&softirq_lock);
	timer_setup(&softirq_timer, fth_bug_softirq_fn, 0);
	mod_timer(&softirq_timer, jiffies + 1);
	msleep(100);
	timer_delete_sync(&softirq_timer);
	return 0;
}

static noinline int fth_bug_sleep_in_atomic(void)
{
	static DEFINE_SPINLOCK(atomic_lock);

	spin_lock(&atomic_lock);
	might_sleep();
	spin_unlock(&atomic_lock);
	return 0;
}

static noinline int fth_bug_smp_processor_id(void)
{
	return smp_processor_id() & 0;
}

static DEFINE_PER_CPU(int, fth_bug_pcpu);

static noinline int fth_bug_this_cpu_read(void)
{
	return __this_cpu_read(fth_bug_pcpu) & 0;
}

static void fth_bug_timer_fn(struct timer_list *t)
{
}

static noinline int fth_bug_free_active_timer(void)
{
	struct fth_bug_obj *o = kzalloc(sizeof(*o), GFP_KERNEL);

	if (!o)
		return -ENOMEM;
	timer_setup(&o->t, fth_bug_timer_fn, 0);
	mod_timer(&o->t, jiffies + 60 * HZ);
	/* Debug objects report the armed timer and deactivate it. */
	kfree(o);
	return 0;
}

static void *fth_bug_leak_sink;

/*
 * Sixteen objects, each reference overwritten by the next: a stale copy of
 * the last one may survive in a register or on the stack (kmemleak scans
 * task stacks, and one such copy hid a single leaked object from a scan
 * under TCG), but not of all sixteen. The agent asks for the scan.
 */
#define FTH_BUG_LEAKS 16

static noinline int fth_bug_leak(void)
{
	int i;

	for (i = 0; i < FTH_BUG_LEAKS; i++) {
		WRITE_ONCE(fth_bug_leak_sink, kmalloc(128, GFP_KERNEL));
		if (fth_bug_leak_sink)
			memset(fth_bug_leak_sink, 0x5a, 128);
	}
	WRITE_ONCE(fth_bug_leak_sink, NULL);
	return 0;
}

/*
 * The faults whose report format is the arch's own trap handler rather than
 * a checker's: each traps in its own named function.
 */

/*
 * An integer division by zero traps (#DE) only on x86: arm64 and riscv
 * define a result, and powerpc's is undefined without a trap.
 */
static noinline int fth_bug_divide_error(void)
{
#ifdef CONFIG_X86
	/* Both volatile: gcc turns 1 / x into a compare, with no division. */
	volatile int num = 42, zero = 0;

	return num / zero;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * A load from LIST_POISON1, a non-canonical address on x86_64: a general
 * protection fault, not a page fault. In asm so that KASAN does not check
 * the address's shadow first.
 */
static noinline int fth_bug_gpf_non_canonical(void)
{
#ifdef CONFIG_X86_64
	unsigned long v, addr = 0xdead000000000100UL;

	asm volatile("movq (%1), %0" : "=r"(v) : "r"(addr) : "memory");
	return v & 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * The two rarer general protection faults of x86_64: an aligned SSE load
 * from a canonical address that is not 16-byte aligned ("general protection
 * fault, maybe for address"), and a data segment loaded with a selector the
 * GDT does not have ("segment-related general protection fault", the error
 * code being the selector).
 */
static noinline int fth_bug_gpf_maybe_for_address(void)
{
#ifdef CONFIG_X86_64
	static u8 buf[64] __aligned(16);

	asm volatile("movaps (%0), %%xmm0" : : "r"(buf + 1) : "memory");
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

static noinline int fth_bug_gpf_segment(void)
{
#ifdef CONFIG_X86_64
	asm volatile("mov %0, %%ds" : : "r"(0xfff8) : "memory");
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * x86_64 with the frame-pointer unwinder (kconfigs/debug/fp-unwinder): the
 * saved frame pointer of this frame points off every stack while
 * dump_stack() walks it, so the unwinder warns "kernel stack frame pointer
 * ... has bad value" and dumps the stack it read. Restored afterwards; with
 * ORC the dump is all that happens.
 */
static unsigned long fth_bug_not_a_stack[4];

static noinline int fth_bug_bad_frame_pointer(void)
{
#ifdef CONFIG_X86_64
	unsigned long *fp = __builtin_frame_address(0);
	unsigned long saved = READ_ONCE(*fp);

	WRITE_ONCE(*fp, (unsigned long)&fth_bug_not_a_stack[2]);
	dump_stack();
	WRITE_ONCE(*fp, saved);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * arm64: a load from a physical address QEMU's virt machine leaves
 * unassigned (between the virtio-mmio and platform-bus windows): the bus
 * error comes back as a synchronous external abort.
 */
static noinline int fth_bug_external_abort(void)
{
#ifdef CONFIG_ARM64
	void __iomem *p = ioremap(0x0b000000, PAGE_SIZE);

	if (!p)
		return -ENOMEM;
	readl(p);
	iounmap(p);
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * An instruction the CPU does not define, outside any BUG() table entry:
 * x86's ud2 ("invalid opcode"), arm64's udf #0, riscv's all-zero parcel and
 * powerpc's primary opcode 0.
 */
static noinline int fth_bug_illegal_instruction(void)
{
#if defined(CONFIG_X86)
	asm volatile("ud2");
	/* objtool knows ud2 ends the path. */
	unreachable();
#elif defined(CONFIG_ARM64)
	asm volatile(".inst 0x00000000");
#elif defined(CONFIG_RISCV)
	asm volatile(".4byte 0x00000000");
#elif defined(CONFIG_PPC)
	asm volatile(".long 0x00000000");
#else
	return -EOPNOTSUPP;
#endif
	return 0;
}

/*
 * A reference to a net_device that is never put: unregistering it waits
 * for good, printing "unregister_netdevice: waiting for fth0 to become
 * free" every 10 s. The wait runs in a kthread so the write returns.
 */
static const struct net_device_ops fth_bug_netdev_ops;

static int fth_bug_unregister_thread(void *dev)
{
	unregister_netdev(dev);
	free_netdev(dev);
	return 0;
}

static noinline int fth_bug_netdev_refcount_leak(void)
{
	struct net_device *dev;
	struct task_struct *t;
	int err;

	dev = alloc_netdev(0, "fth%d", NET_NAME_ENUM, ether_setup);
	if (!dev)
		return -ENOMEM;
	dev->netdev_ops = &fth_bug_netdev_ops;
	eth_hw_addr_random(dev);
	err = register_netdev(dev);
	if (err) {
		free_netdev(dev);
		return err;
	}
	dev_hold(dev);
	t = kthread_run(fth_bug_unregister_thread, dev, "fth_bug_netdev");
	return PTR_ERR_OR_ZERO(t);
}

/*
 * A task that stays runnable in the kernel without a voluntary context
 * switch holds up an RCU Tasks grace period, the one every trampoline
 * detach waits for; after 10 s RCU Tasks says so
 * ("rcu_tasks_wait_gp: ... grace period number N (since boot) is M jiffies
 * old"), the line this harness's churn printed.
 */
#define FTH_BUG_HOLDOUT_SECONDS 14

static int fth_bug_holdout_thread(void *arg)
{
	unsigned long end = jiffies + FTH_BUG_HOLDOUT_SECONDS * HZ;

	while (time_before(jiffies, end))
		cpu_relax();
	return 0;
}

static noinline int fth_bug_rcu_tasks_holdout(void)
{
#ifdef CONFIG_TASKS_RCU
	struct task_struct *t = kthread_run(fth_bug_holdout_thread, NULL, "fth_bug_holdout");

	if (IS_ERR(t))
		return PTR_ERR(t);
	msleep(100);
	synchronize_rcu_tasks();
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * A WARN in an ftrace_ops callback, so the report's stack runs through the
 * arch's ftrace entry glue (ftrace_caller, an ops trampoline or
 * ftrace_ops_list_func) between the traced function and the callback.
 */
static noinline void fth_bug_traced(void)
{
	asm volatile("" ::: "memory");
}

static void fth_bug_ftrace_callback(unsigned long ip, unsigned long parent_ip,
				    struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	WARN_ONCE(1, "fth_target: injected WARN in an ftrace callback");
}

static struct ftrace_ops fth_bug_ftrace_ops = {
	.func = fth_bug_ftrace_callback,
};

static noinline int fth_bug_warn_in_ftrace_callback(void)
{
	int err;

	err = ftrace_set_filter_ip(&fth_bug_ftrace_ops, (unsigned long)fth_bug_traced, 0, 0);
	if (err)
		return err;
	err = register_ftrace_function(&fth_bug_ftrace_ops);
	if (err)
		return err;
	fth_bug_traced();
	return unregister_ftrace_function(&fth_bug_ftrace_ops);
}

/*
 * A WARN in a function the agent has put a BPF fexit trampoline on
 * (crash=bug:warn-via-trampoline): the trampoline calls the function, so
 * the report's stack runs through bpf_trampoline_<id> between this and
 * its caller. Global, so the module's BTF names it for the attach.
 */
noinline int fth_bug_warn_traced(void);
noinline int fth_bug_warn_traced(void)
{
	WARN_ONCE(1, "fth_target: injected WARN under a BPF trampoline");
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} fth_bugs[] = {
	{ "bad-unlock", fth_bug_bad_unlock },
	{ "held-lock-freed", fth_bug_held_lock_freed },
	{ "locks-held-at-exit", fth_bug_locks_held_at_exit },
	{ "recursive-lock", fth_bug_recursive_lock },
	{ "circular-lock", fth_bug_circular_lock },
	{ "non-static-key", fth_bug_non_static_key },
	{ "uninit-mutex", fth_bug_uninit_mutex },
	{ "rcu-outside-reader", fth_bug_rcu_outside_reader },
	{ "inconsistent-lock", fth_bug_inconsistent_lock },
	{ "sleep-in-atomic", fth_bug_sleep_in_atomic },
	{ "smp-processor-id", fth_bug_smp_processor_id },
	{ "this-cpu-read", fth_bug_this_cpu_read },
	{ "free-active-timer", fth_bug_free_active_timer },
	{ "leak", fth_bug_leak },
	{ "divide-error", fth_bug_divide_error },
	{ "gpf-non-canonical", fth_bug_gpf_non_canonical },
	{ "illegal-instruction", fth_bug_illegal_instruction },
	{ "netdev-refcount-leak", fth_bug_netdev_refcount_leak },
	{ "rcu-tasks-holdout", fth_bug_rcu_tasks_holdout },
	{ "warn-in-ftrace-callback", fth_bug_warn_in_ftrace_callback },
	{ "warn-via-trampoline", fth_bug_warn_traced },
	{ "gpf-maybe-for-address", fth_bug_gpf_maybe_for_address },
	{ "gpf-segment", fth_bug_gpf_segment },
	{ "double-fault", fth_bug_double_fault },
	{ "external-abort", fth_bug_external_abort },
	{ "bad-frame-pointer", fth_bug_bad_frame_pointer },
};

static ssize_t bug_write(struct file *file, const char __user *buf,
			 size_t count, loff_t *ppos)
{
	char name[32];
	size_t i;
	int err;

	if (count >= sizeof(name))
		return -EINVAL;
	if (copy_from_user(name, buf, count))
		return -EFAULT;
	name[count] = '\0';
	strim(name);
	for (i = 0; i < ARRAY_SIZE(fth_bugs); i++) {
		if (strcmp(name, fth_bugs[i].name))
			continue;
		pr_info("fth_target: injecting bug %s\n", name);
		err = fth_bugs[i].fn();
		return err ? err : count;
	}
	return -ENOENT;
}

static ssize_t bug_read(struct file *file, char __user *buf, size_t count,
			loff_t *ppos)
{
	char out[1024];
	size_t i;
	int len = 0;

	for (i = 0; i < ARRAY_SIZE(fth_bugs); i++)
		len += scnprintf(out + len, sizeof(out) - len, "%s\n", fth_bugs[i].name);
	return simple_read_from_buffer(buf, count, ppos, out, len);
}

static const struct file_operations bug_fops = {
	.owner = THIS_MODULE,
	.write = bug_write,
	.read = bug_read,
	.llseek = default_llseek,
};

void fth_bugs_init(struct dentry *dir)
{
	debugfs_create_file("bug", 0600, dir, NULL, &bug_fops);
}
