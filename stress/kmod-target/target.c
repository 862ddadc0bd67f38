// SPDX-License-Identifier: GPL-2.0
/*
 * fth_target: kernel functions for ftrace-harness to trace while the module
 * itself comes and goes.
 *
 * Loading a module runs ftrace_module_init() and ftrace_module_enable(),
 * which patch the new module's callsites for every tracer whose filter
 * already names them (set_ftrace_filter ":mod:fth_target"). That is the
 * path of the Linux 6.16 riscv regression (patching without text_mutex), so
 * the module must have callsites that are executing from the moment it is
 * live: kthreads call fth_target_hot() from init until exit.
 *
 * fth_target_counted() is called only when userspace writes N to
 * /sys/kernel/debug/fth_target/call, exactly N times, so a fentry program
 * on it must count exactly N hits (the exact-count oracle).
 *
 * A write of M to /sys/kernel/debug/fth_target/dsleep sleeps M ms in D
 * state: the agent's crash=hung-task.
 *
 * A write of M to /sys/kernel/debug/fth_target/nap calls
 * fth_target_napping(), which sleeps M ms: a BPF fexit trampoline around it
 * sees its task leave voluntarily in the middle, after __bpf_tramp_enter()
 * and before __bpf_tramp_exit(), as a task in a blocking function does
 * (the race's fexit trampoline target).
 *
 * A write to /sys/kernel/debug/fth_target/rcu_tasks_barrier returns once
 * every call_rcu_tasks() callback queued before it has run
 * (rcu_barrier_tasks()): the first of a detached fexit image's waits,
 * which the race's fexit target must see end before its task leaves the
 * traced function. Not there without CONFIG_TASKS_RCU.
 *
 * /sys/kernel/debug/fth_target/bug commits one injected bug by name (bugs.c).
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "bugs.h"

static unsigned int nthreads = 2;
module_param(nthreads, uint, 0444);
MODULE_PARM_DESC(nthreads, "kthreads calling fth_target_hot (default 2)");

/* The most calls one write may ask for: bounds the time spent in the write. */
#define FTH_MAX_CALLS 10000000UL

static atomic64_t hot_calls = ATOMIC64_INIT(0);
static atomic64_t counted_calls = ATOMIC64_INIT(0);
static struct task_struct **threads;
static struct dentry *dir;

/*
 * noinline and global: each must keep its own callsite (and BTF entry) for
 * fentry, kprobes and the function tracer to find.
 */
noinline int fth_target_hot(int x)
{
	atomic64_inc(&hot_calls);
	return x * 3 + 1;
}

noinline void fth_target_counted(void)
{
	atomic64_inc(&counted_calls);
}

/* The longest nap one write may ask for. */
#define FTH_MAX_NAP_MS 10000UL

noinline void fth_target_napping(unsigned int ms)
{
	msleep(ms);
}

static int fth_target_thread(void *arg)
{
	int x = 0, i;

	while (!kthread_should_stop()) {
		for (i = 0; i < 100; i++)
			x = fth_target_hot(x);
		/* Sleep, so a TCG guest's vCPUs still run the agent. */
		usleep_range(100, 200);
	}
	return x & 0;
}

static ssize_t call_write(struct file *file, const char __user *buf,
			  size_t count, loff_t *ppos)
{
	unsigned long n, i;
	int err;

	err = kstrtoul_from_user(buf, count, 10, &n);
	if (err)
		return err;
	if (n > FTH_MAX_CALLS)
		return -E2BIG;
	for (i = 0; i < n; i++)
		fth_target_counted();
	return count;
}

static ssize_t call_read(struct file *file, char __user *buf, size_t count,
			 loff_t *ppos)
{
	char out[64];
	int len;

	len = scnprintf(out, sizeof(out), "hot %lld\ncounted %lld\n",
			(long long)atomic64_read(&hot_calls),
			(long long)atomic64_read(&counted_calls));
	return simple_read_from_buffer(buf, count, ppos, out, len);
}

/* A write's number of milliseconds, at most max. */
static int write_ms(const char __user *buf, size_t count, unsigned long max,
		    unsigned long *ms)
{
	int err = kstrtoul_from_user(buf, count, 10, ms);

	if (err)
		return err;
	return *ms > max ? -E2BIG : 0;
}

static ssize_t nap_write(struct file *file, const char __user *buf,
			 size_t count, loff_t *ppos)
{
	unsigned long ms;
	int err = write_ms(buf, count, FTH_MAX_NAP_MS, &ms);

	if (err)
		return err;
	fth_target_napping(ms);
	return count;
}

static const struct file_operations nap_fops = {
	.owner = THIS_MODULE,
	.write = nap_write,
	.llseek = default_llseek,
};

#ifdef CONFIG_TASKS_RCU
static ssize_t rcu_tasks_barrier_write(struct file *file, const char __user *buf,
				       size_t count, loff_t *ppos)
{
	rcu_barrier_tasks();
	return count;
}

static const struct file_operations rcu_tasks_barrier_fops = {
	.owner = THIS_MODULE,
	.write = rcu_tasks_barrier_write,
	.llseek = default_llseek,
};
#endif

/*
 * dsleep puts its writer to sleep uninterruptibly for the given number of
 * milliseconds (at most FTH_MAX_DSLEEP_MS): the harness's hang injection.
 * The hung task detector reports the writer while every other task goes
 * on, which is the partial hang the host must end a cell on without
 * waiting for its deadline.
 */
#define FTH_MAX_DSLEEP_MS (30 * 60 * 1000)

static ssize_t dsleep_write(struct file *file, const char __user *buf,
			    size_t count, loff_t *ppos)
{
	unsigned long ms;
	int err = write_ms(buf, count, FTH_MAX_DSLEEP_MS, &ms);

	if (err)
		return err;
	msleep(ms);
	return count;
}

static const struct file_operations dsleep_fops = {
	.owner = THIS_MODULE,
	.write = dsleep_write,
	.llseek = default_llseek,
};

static const struct file_operations call_fops = {
	.owner = THIS_MODULE,
	.write = call_write,
	.read = call_read,
	.llseek = default_llseek,
};

static void stop_threads(void)
{
	unsigned int i;

	for (i = 0; i < nthreads; i++)
		if (!IS_ERR_OR_NULL(threads[i]))
			kthread_stop(threads[i]);
	kfree(threads);
}

static int __init fth_target_init(void)
{
	unsigned int i;

	threads = kcalloc(nthreads, sizeof(*threads), GFP_KERNEL);
	if (!threads)
		return -ENOMEM;
	for (i = 0; i < nthreads; i++) {
		threads[i] = kthread_run(fth_target_thread, NULL, "fth_target/%u", i);
		if (IS_ERR(threads[i])) {
			int err = PTR_ERR(threads[i]);

			stop_threads();
			return err;
		}
	}
	dir = debugfs_create_dir("fth_target", NULL);
	debugfs_create_file("call", 0600, dir, NULL, &call_fops);
	debugfs_create_file("dsleep", 0200, dir, NULL, &dsleep_fops);
	debugfs_create_file("nap", 0200, dir, NULL, &nap_fops);
#ifdef CONFIG_TASKS_RCU
	debugfs_create_file("rcu_tasks_barrier", 0200, dir, NULL, &rcu_tasks_barrier_fops);
#endif
	fth_bugs_init(dir);
	return 0;
}

static void __exit fth_target_exit(void)
{
	debugfs_remove_recursive(dir);
	stop_threads();
}

module_init(fth_target_init);
module_exit(fth_target_exit);
MODULE_DESCRIPTION("ftrace-harness trace target: always-running callsites that come and go");
MODULE_LICENSE("GPL");
