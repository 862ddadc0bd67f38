// SPDX-License-Identifier: GPL-2.0
/*
 * fth_klp: the delivery oracle's livepatch user (ftrace-harness).
 *
 * A livepatch module as the kernel's own samples/livepatch are: loading it
 * patches fth_deliver_seq (in fth_deliver.ko) with a copy that reports
 * every call it receives to fth_deliver, which judges it like any other
 * user; writing 0 to /sys/kernel/livepatch/fth_klp/enabled unpatches it,
 * and the module is then unloaded. The agent does both while the other
 * users come and go on the same callsite, so a call that runs the original
 * while the patch is fully applied (the redirect bypassed or lost in a
 * transition of another user) is a missed call of "livepatch".
 *
 * The counting function comes from symbol_get(): nothing to resolve at
 * build time, and fth_deliver cannot go while this module holds it.
 */
#include <linux/kernel.h>
#include <linux/module.h>

#if IS_ENABLED(CONFIG_LIVEPATCH)
#include <linux/livepatch.h>

void fth_deliver_record_livepatch(unsigned long caller, unsigned long n);

static void (*record)(unsigned long caller, unsigned long n);

static noinline void fth_klp_deliver_seq(unsigned long caller, unsigned long n)
{
	record(caller, n);
}

static struct klp_func funcs[] = {
	{ .old_name = "fth_deliver_seq", .new_func = fth_klp_deliver_seq },
	{}
};

static struct klp_object objs[] = {
	{ .name = "fth_deliver", .funcs = funcs },
	{}
};

static struct klp_patch patch = {
	.mod = THIS_MODULE,
	.objs = objs,
};

static int __init fth_klp_init(void)
{
	int ret;

	record = symbol_get(fth_deliver_record_livepatch);
	if (!record) {
		pr_err("fth_klp: load fth_deliver first\n");
		return -ENOENT;
	}
	ret = klp_enable_patch(&patch);
	if (ret)
		symbol_put(fth_deliver_record_livepatch);
	return ret;
}

/* Runs only after the patch is disabled and freed: nothing calls us. */
static void __exit fth_klp_exit(void)
{
	symbol_put(fth_deliver_record_livepatch);
}

MODULE_INFO(livepatch, "Y");
#else
static int __init fth_klp_init(void)
{
	return -EOPNOTSUPP;
}

static void __exit fth_klp_exit(void)
{
}
#endif

module_init(fth_klp_init);
module_exit(fth_klp_exit);
MODULE_DESCRIPTION("ftrace-harness delivery oracle: a livepatch of fth_deliver_seq that counts its calls");
MODULE_LICENSE("GPL");
