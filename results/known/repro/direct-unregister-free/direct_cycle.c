// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: unregister_ftrace_direct() frees its direct_functions
 * entries at once (remove_direct_functions_hash(): remove_hash_entry(),
 * then kfree()), while a lookup of another ip may be walking the same
 * bucket. tracefs's enabled_functions looks every direct record up that
 * way (t_show() -> ftrace_find_rec_direct()) under ftrace_lock, which the
 * removal does not take.
 *
 * The module registers a direct call on @keep, and then, @rounds times,
 * one on @cycle and takes it away again. Both calls go to a trampoline
 * that only returns. With two entries, direct_functions has four buckets;
 * run.sh picks two functions of one bucket, @cycle's entry goes in at its
 * head, and a reader of enabled_functions that looks up @keep walks past
 * it while it is freed.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/module.h>
#include <linux/string.h>

static char *keep;
module_param(keep, charp, 0444);
MODULE_PARM_DESC(keep, "the function whose direct call stays");

static char *cycle;
module_param(cycle, charp, 0444);
MODULE_PARM_DESC(cycle, "the function whose direct call comes and goes");

static unsigned int rounds = 100;
module_param(rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "registrations and unregistrations on @cycle (default: 100)");

static unsigned int done;
module_param(done, uint, 0444);
MODULE_PARM_DESC(done, "rounds done");

#if defined(CONFIG_X86_64)
#include <asm/ibt.h>
#include <asm/nospec-branch.h>
/* 16-byte aligned: bit 0 of a direct address asks x86_64 for a jump. */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	direct_cycle_tramp, @function\n"
"	.globl	direct_cycle_tramp\n"
"direct_cycle_tramp:"
	ASM_ENDBR
"	pushq	%rbp\n"
"	movq	%rsp, %rbp\n"
"	leave\n"
	ASM_RET
"	.size	direct_cycle_tramp, .-direct_cycle_tramp\n"
"	.popsection\n"
);
#else
#error "no direct trampoline for this architecture"
#endif

extern void direct_cycle_tramp(void);

static struct ftrace_ops keep_ops, cycle_ops;

static int set_filter(struct ftrace_ops *ops, const char *func)
{
	char buf[KSYM_NAME_LEN];

	strscpy(buf, func, sizeof(buf));
	return ftrace_set_filter(ops, buf, strlen(buf), 0);
}

static int __init direct_cycle_init(void)
{
	unsigned long addr = (unsigned long)direct_cycle_tramp;
	int err;

	if (!keep || !cycle)
		return -EINVAL;
	err = set_filter(&keep_ops, keep) ?: set_filter(&cycle_ops, cycle);
	if (err)
		goto free;
	err = register_ftrace_direct(&keep_ops, addr);
	if (err)
		goto free;
	for (done = 0; done < rounds; done++) {
		err = register_ftrace_direct(&cycle_ops, addr);
		if (err)
			break;
		usleep_range(1000, 2000);
		err = unregister_ftrace_direct(&cycle_ops, addr, false);
		if (err)
			break;
	}
	if (err)
		pr_err("round %u: %d\n", done, err);
	unregister_ftrace_direct(&keep_ops, addr, false);
free:
	ftrace_free_filter(&keep_ops);
	ftrace_free_filter(&cycle_ops);
	return err;
}

static void __exit direct_cycle_exit(void)
{
}

module_init(direct_cycle_init);
module_exit(direct_cycle_exit);
MODULE_DESCRIPTION("Reproducer: direct_functions entries freed under a lookup");
MODULE_LICENSE("GPL");
