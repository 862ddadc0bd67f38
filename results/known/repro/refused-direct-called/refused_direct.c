// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: a direct call refused by ftrace_startup() is still taken by
 * callers after register_ftrace_direct() has returned the refusal.
 *
 * ftrace_startup() adds the ops to ftrace_ops_list before it runs the
 * IPMODIFY check (ftrace_hash_ipmodify_enable()). A direct ops with no
 * ops_func, on a function that already has an IPMODIFY ops, is refused
 * there with -EBUSY and taken off the list again with no grace period. A
 * caller whose callsite goes through ftrace_ops_list_func() may have
 * called the direct ops in between: call_direct_funcs() handed it the
 * trampoline's address, and it jumps there once the list function
 * returns, after the refusal has reached the owner, who is free to
 * release the trampoline.
 *
 * This module registers two ftrace_ops on refused_direct_target(): a
 * plain one, and one with FTRACE_OPS_FL_IPMODIFY (as livepatch's). Two
 * ops put the callsite on the list function. One kthread per online CPU
 * calls the function in a loop. The module then registers a direct call
 * to its own trampoline on the same function, @attempts times. Each
 * attempt is refused with -EBUSY. The trampoline counts every call it
 * receives after a refusal was returned ("stray"): each one is a jump to
 * a trampoline the kernel has told its owner is not in use.
 *
 * With ipmodify=0 the second ops is a plain one, every attempt is
 * accepted, and the calls are counted as "attached" (the control: the
 * callers do reach the trampoline through the list function).
 *
 * A plain kernel meets the window a few times in 50 attempts; the debug
 * patch that comes with this reproducer widens it
 * (ftrace_race_delay_ms=).
 *
 * Results are in /sys/module/refused_direct/parameters/ and in the log.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>

static bool ipmodify = true;
module_param(ipmodify, bool, 0444);
MODULE_PARM_DESC(ipmodify, "make the second ftrace_ops IPMODIFY (default: yes; no is the control)");

static unsigned int attempts = 100;
module_param(attempts, uint, 0444);
MODULE_PARM_DESC(attempts, "register_ftrace_direct() attempts (default: 100)");

static unsigned int settle_ms = 100;
module_param(settle_ms, uint, 0444);
MODULE_PARM_DESC(settle_ms, "wait after each attempt, for late callers (default: 100)");

static unsigned long stray, during, attached, refused, accepted;
module_param(stray, ulong, 0444);
MODULE_PARM_DESC(stray, "calls of the trampoline after register_ftrace_direct() returned an error");
module_param(during, ulong, 0444);
MODULE_PARM_DESC(during, "calls of the trampoline while register_ftrace_direct() ran");
module_param(attached, ulong, 0444);
MODULE_PARM_DESC(attached, "calls of the trampoline while it was registered");
module_param(refused, ulong, 0444);
MODULE_PARM_DESC(refused, "attempts refused");
module_param(accepted, ulong, 0444);
MODULE_PARM_DESC(accepted, "attempts accepted");

enum { IDLE, REGISTERING, REFUSED, ATTACHED };
static int phase = IDLE;
static atomic_long_t counts[ATTACHED + 1];

static unsigned long sink;

noinline void refused_direct_target(unsigned long n)
{
	WRITE_ONCE(sink, READ_ONCE(sink) + n);
}

/* Called by the trampoline. */
void refused_direct_func(void);
void refused_direct_func(void)
{
	atomic_long_inc(&counts[READ_ONCE(phase)]);
}

#if defined(CONFIG_X86_64)
#include <asm/ibt.h>
#include <asm/nospec-branch.h>
/*
 * 16-byte aligned: since DYNAMIC_FTRACE_WITH_JMP, bit 0 of a direct
 * address asks x86_64 for a jump instead of a call.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	refused_direct_tramp, @function\n"
"	.globl	refused_direct_tramp\n"
"refused_direct_tramp:"
	ASM_ENDBR
"	pushq	%rbp\n"
"	movq	%rsp, %rbp\n"
	CALL_DEPTH_ACCOUNT
"	pushq	%rdi\n"
"	call	refused_direct_func\n"
"	popq	%rdi\n"
"	leave\n"
	ASM_RET
"	.size	refused_direct_tramp, .-refused_direct_tramp\n"
"	.popsection\n"
);
#elif defined(CONFIG_ARM64)
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	refused_direct_tramp, @function\n"
"	.globl	refused_direct_tramp\n"
"refused_direct_tramp:\n"
"	hint	34\n"
"	sub	sp, sp, #32\n"
"	stp	x9, x30, [sp]\n"
"	str	x0, [sp, #16]\n"
"	bl	refused_direct_func\n"
"	ldr	x0, [sp, #16]\n"
"	ldp	x30, x9, [sp]\n"
"	add	sp, sp, #32\n"
"	ret	x9\n"
"	.size	refused_direct_tramp, .-refused_direct_tramp\n"
"	.popsection\n"
);
#elif defined(CONFIG_RISCV)
#include <asm/asm.h>
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	refused_direct_tramp, @function\n"
"	.globl	refused_direct_tramp\n"
"refused_direct_tramp:\n"
"	addi	sp, sp, -4*" SZREG "\n"
"	" REG_S "	a0, 0*" SZREG "(sp)\n"
"	" REG_S "	t0, 1*" SZREG "(sp)\n"
"	" REG_S "	ra, 2*" SZREG "(sp)\n"
"	call	refused_direct_func\n"
"	" REG_L "	a0, 0*" SZREG "(sp)\n"
"	" REG_L "	t0, 1*" SZREG "(sp)\n"
"	" REG_L "	ra, 2*" SZREG "(sp)\n"
"	addi	sp, sp, 4*" SZREG "\n"
"	jr	t0\n"
"	.size	refused_direct_tramp, .-refused_direct_tramp\n"
"	.popsection\n"
);
#else
#error "no direct trampoline for this architecture"
#endif

extern void refused_direct_tramp(void);

static void count_func(unsigned long ip, unsigned long parent_ip,
		       struct ftrace_ops *op, struct ftrace_regs *fregs)
{
}

static struct ftrace_ops plain_ops = {
	.func = count_func,
};

/*
 * Where the arch passes arguments without full regs (DYNAMIC_FTRACE_WITH_ARGS),
 * livepatch's IPMODIFY ops has no SAVE_REGS; x86_64 takes a direct call
 * from ftrace_regs_caller only, so there the ops asks for regs, as a
 * kprobe's does.
 */
static struct ftrace_ops second_ops = {
	.func = count_func,
#ifdef CONFIG_X86_64
	.flags = FTRACE_OPS_FL_SAVE_REGS,
#endif
};

static struct ftrace_ops direct_ops;

static struct task_struct **callers;

/*
 * Bursts of calls, then a short sleep: a task that never sleeps is never
 * quiescent for RCU-tasks, and the unregistrations of the control wait
 * for it.
 */
static int caller_fn(void *data)
{
	unsigned long n = 0;
	unsigned int i;

	while (!kthread_should_stop()) {
		for (i = 0; i < 256; i++)
			refused_direct_target(n++);
		usleep_range(50, 100);
	}
	return 0;
}

static void stop_callers(void)
{
	unsigned int cpu;

	if (!callers)
		return;
	for_each_possible_cpu(cpu)
		if (!IS_ERR_OR_NULL(callers[cpu]))
			kthread_stop(callers[cpu]);
	kfree(callers);
	callers = NULL;
}

static int start_callers(void)
{
	unsigned int cpu;

	callers = kcalloc(nr_cpu_ids, sizeof(*callers), GFP_KERNEL);
	if (!callers)
		return -ENOMEM;
	for_each_online_cpu(cpu) {
		callers[cpu] = kthread_run(caller_fn, NULL, "refused_direct/%u", cpu);
		if (IS_ERR(callers[cpu])) {
			int err = PTR_ERR(callers[cpu]);

			stop_callers();
			return err;
		}
	}
	return 0;
}

static int set_filter(struct ftrace_ops *ops)
{
	return ftrace_set_filter_ip(ops, (unsigned long)refused_direct_target, 0, 0);
}

static int __init refused_direct_init(void)
{
	unsigned long addr = (unsigned long)refused_direct_tramp;
	unsigned int i;
	int err;

	if (ipmodify)
		second_ops.flags |= FTRACE_OPS_FL_IPMODIFY;

	err = set_filter(&plain_ops) ?: set_filter(&second_ops) ?: set_filter(&direct_ops);
	if (err)
		goto free_filters;
	err = register_ftrace_function(&plain_ops);
	if (err)
		goto free_filters;
	err = register_ftrace_function(&second_ops);
	if (err)
		goto unregister_plain;
	err = start_callers();
	if (err)
		goto unregister_second;

	for (i = 0; i < attempts; i++) {
		WRITE_ONCE(phase, REGISTERING);
		err = register_ftrace_direct(&direct_ops, addr);
		if (!err) {
			accepted++;
			WRITE_ONCE(phase, ATTACHED);
			msleep(settle_ms);
			WRITE_ONCE(phase, REGISTERING);
			err = unregister_ftrace_direct(&direct_ops, addr, false);
			if (err) {
				pr_err("unregister_ftrace_direct() failed: %d\n", err);
				break;
			}
			WRITE_ONCE(phase, IDLE);
		} else {
			refused++;
			WRITE_ONCE(phase, REFUSED);
			msleep(settle_ms);
			WRITE_ONCE(phase, IDLE);
		}
	}
	err = 0;

	stop_callers();
	stray = atomic_long_read(&counts[REFUSED]);
	during = atomic_long_read(&counts[REGISTERING]);
	attached = atomic_long_read(&counts[ATTACHED]);
	pr_info("%s ops: %lu attempts accepted, %lu refused; trampoline calls: %lu while registered, %lu during registration, %lu after a refusal\n",
		ipmodify ? "IPMODIFY" : "plain", accepted, refused, attached, during, stray);
	if (stray)
		pr_err("BUG: direct trampoline called %lu times after register_ftrace_direct() returned an error\n",
		       stray);

unregister_second:
	if (unregister_ftrace_function(&second_ops))
		goto disabled;
unregister_plain:
	if (unregister_ftrace_function(&plain_ops))
		goto disabled;
free_filters:
	ftrace_free_filter(&plain_ops);
	ftrace_free_filter(&second_ops);
	ftrace_free_filter(&direct_ops);
	return err;

disabled:
	/*
	 * ftrace_kill() ran: the ops cannot be taken off the list, so the
	 * module must not go away under them.
	 */
	__module_get(THIS_MODULE);
	pr_err("ftrace is disabled (a WARNING above says why): the module stays loaded\n");
	return err;
}

static void __exit refused_direct_exit(void)
{
}

module_init(refused_direct_init);
module_exit(refused_direct_exit);
MODULE_DESCRIPTION("Reproducer: a refused direct call is taken after the refusal");
MODULE_LICENSE("GPL");
