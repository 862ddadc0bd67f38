// SPDX-License-Identifier: GPL-2.0
/*
 * An IPMODIFY ftrace_ops, as livepatch's, for the ipmodify-share
 * reproducer: it redirects every function in its filter to
 * redirected_show(), a replacement for the seq_file show functions of
 * /proc/version and /proc/cmdline.
 *
 * At load it registers with version_proc_show() in its filter (both=1:
 * with cmdline_proc_show() too, as livepatch sets its filter before it
 * registers). Writing 1 to /sys/module/ipmodify_redirect/parameters/grow
 * then adds cmdline_proc_show() to the filter of the registered ops
 * (ftrace_set_filter()): the way an ops that grows its filter after
 * registering takes a function that may already have a direct call.
 *
 * The calls that reached the replacement are counted in
 * /sys/module/ipmodify_redirect/parameters/redirected.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ftrace.h>
#include <linux/kallsyms.h>
#include <linux/module.h>
#include <linux/seq_file.h>
#include <linux/string.h>

static bool both;
module_param(both, bool, 0444);
MODULE_PARM_DESC(both, "register with cmdline_proc_show() in the filter too (the control)");

static unsigned long redirected;
module_param(redirected, ulong, 0444);
MODULE_PARM_DESC(redirected, "calls that reached the replacement");

#define VERSION_FN	"version_proc_show"
#define CMDLINE_FN	"cmdline_proc_show"

static int redirected_show(struct seq_file *m, void *v)
{
	redirected++;
	seq_puts(m, "ipmodify_redirect: redirected\n");
	return 0;
}

static void notrace redirect_func(unsigned long ip, unsigned long parent_ip,
				  struct ftrace_ops *op, struct ftrace_regs *fregs)
{
	ftrace_regs_set_instruction_pointer(fregs, (unsigned long)redirected_show);
}

static struct ftrace_ops redirect_ops = {
	.func	= redirect_func,
	.flags	= FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY,
};

static bool registered;

static int add_filter(const char *fn, int reset)
{
	char buf[KSYM_NAME_LEN];

	strscpy(buf, fn, sizeof(buf));
	return ftrace_set_filter(&redirect_ops, buf, strlen(buf), reset);
}

static int grow_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret || !on)
		return ret;
	if (!registered)
		return -ENODEV;
	ret = add_filter(CMDLINE_FN, 0);
	pr_info("ftrace_set_filter(%s) on the registered ops: %d\n", CMDLINE_FN, ret);
	return ret;
}

static const struct kernel_param_ops grow_ops = {
	.set	= grow_set,
};
module_param_cb(grow, &grow_ops, NULL, 0200);
MODULE_PARM_DESC(grow, "write 1: add cmdline_proc_show() to the registered ops' filter");

static int __init ipmodify_redirect_init(void)
{
	int ret;

	ret = add_filter(VERSION_FN, 1);
	if (!ret && both)
		ret = add_filter(CMDLINE_FN, 0);
	if (ret) {
		pr_err("ftrace_set_filter: %d\n", ret);
		return ret;
	}
	ret = register_ftrace_function(&redirect_ops);
	pr_info("register_ftrace_function (%s): %d\n",
		both ? VERSION_FN ", " CMDLINE_FN : VERSION_FN, ret);
	if (ret) {
		ftrace_free_filter(&redirect_ops);
		return ret;
	}
	registered = true;
	return 0;
}

static void __exit ipmodify_redirect_exit(void)
{
	unregister_ftrace_function(&redirect_ops);
	ftrace_free_filter(&redirect_ops);
}

module_init(ipmodify_redirect_init);
module_exit(ipmodify_redirect_exit);
MODULE_DESCRIPTION("An IPMODIFY ftrace_ops that grows its filter after registering");
MODULE_LICENSE("GPL");
