// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: update_ftrace_direct_mod() asks BPF trampolines it does not
 * modify to share IPMODIFY.
 *
 * Usage: ipmodify_share [control]
 *
 *   1. attach a BPF fexit program to cmdline_proc_show() (its trampoline
 *      calls the original function);
 *   2. load ipmodify_redirect.ko (from $MODDIR, default: this program's
 *      directory): an IPMODIFY ftrace_ops on version_proc_show();
 *   3. add cmdline_proc_show() to that ops' filter after it registered
 *      (control: the ops has both functions in its filter when it
 *      registers, and this step is skipped);
 *   4. attach a BPF fentry program to version_proc_show();
 *   5. attach a second fentry program there, which modifies that
 *      trampoline (update_ftrace_direct_mod() with the shared direct ops
 *      of HAVE_SINGLE_FTRACE_DIRECT_OPS);
 *   6. read /proc/cmdline, which the IPMODIFY ops redirects.
 *
 * Exit status: 0 every attach accepted and the redirect taken, 1 an
 * attach refused (the kernel log has the WARNING) or the redirect
 * bypassed by the fexit trampoline, 2 the reproducer could not run.
 *
 * Built by the Makefile with the module, or alone: cc -O2 -Wall -static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MODULE_NAME "ipmodify_redirect"

static void *read_file(const char *path, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0 || !buf) {
		perror(path);
		exit(2);
	}
	while ((r = read(fd, buf + n, cap - n)) > 0) {
		n += r;
		if (n == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf) {
				perror("realloc");
				exit(2);
			}
		}
	}
	if (r < 0) {
		perror(path);
		exit(2);
	}
	close(fd);
	*len = n;
	return buf;
}

/* The size of the data that follows a BTF type of this kind. */
static size_t btf_type_extra(const struct btf_type *t)
{
	unsigned int vlen = BTF_INFO_VLEN(t->info);

	switch (BTF_INFO_KIND(t->info)) {
	case BTF_KIND_INT:
	case BTF_KIND_VAR:
	case BTF_KIND_DECL_TAG:
		return 4;
	case BTF_KIND_ARRAY:
		return sizeof(struct btf_array);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return vlen * sizeof(struct btf_member);
	case BTF_KIND_ENUM:
		return vlen * sizeof(struct btf_enum);
	case BTF_KIND_FUNC_PROTO:
		return vlen * sizeof(struct btf_param);
	case BTF_KIND_DATASEC:
		return vlen * sizeof(struct btf_var_secinfo);
	case BTF_KIND_ENUM64:
		return vlen * 12;
	default:
		return 0;
	}
}

/* The vmlinux BTF id of the function @name. */
static int btf_func_id(const char *name)
{
	size_t len;
	char *data = read_file("/sys/kernel/btf/vmlinux", &len);
	struct btf_header *h = (struct btf_header *)data;
	char *types = data + h->hdr_len + h->type_off;
	char *strs = data + h->hdr_len + h->str_off;
	char *p = types;
	int id = 1;

	if (len < sizeof(*h) || h->magic != BTF_MAGIC) {
		fprintf(stderr, "/sys/kernel/btf/vmlinux: not BTF\n");
		exit(2);
	}
	while (p < types + h->type_len) {
		struct btf_type *t = (struct btf_type *)p;

		if (BTF_INFO_KIND(t->info) == BTF_KIND_FUNC &&
		    !strcmp(strs + t->name_off, name)) {
			free(data);
			return id;
		}
		p += sizeof(*t) + btf_type_extra(t);
		id++;
	}
	fprintf(stderr, "no BTF for %s\n", name);
	exit(2);
}

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * Load an empty fentry or fexit program on @func and attach it; return
 * the link's fd, or -errno of the attach.
 */
static int attach(const char *func, enum bpf_attach_type type)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	union bpf_attr attr;
	int prog, link;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_TRACING;
	attr.expected_attach_type = type;
	attr.attach_btf_id = btf_func_id(func);
	attr.insns = (uint64_t)(unsigned long)insns;
	attr.insn_cnt = 2;
	attr.license = (uint64_t)(unsigned long)"GPL";
	attr.log_buf = (uint64_t)(unsigned long)log;
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	prog = sys_bpf(BPF_PROG_LOAD, &attr);
	if (prog < 0) {
		fprintf(stderr, "BPF_PROG_LOAD on %s: %s\n%s", func, strerror(errno), log);
		exit(2);
	}
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog;
	attr.link_create.attach_type = type;
	link = sys_bpf(BPF_LINK_CREATE, &attr);
	if (link < 0)
		return -errno;
	return link;
}

static void step(int n, const char *what, int ret)
{
	printf("%d. %s: %s\n", n, what, ret < 0 ? strerror(-ret) : "ok");
	fflush(stdout);
}

static void load_module(const char *dir, const char *params)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.ko", dir, MODULE_NAME);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || syscall(__NR_finit_module, fd, params, 0)) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static int grow_filter(void)
{
	int fd = open("/sys/module/" MODULE_NAME "/parameters/grow", O_WRONLY);
	int ret = 0;

	if (fd < 0 || write(fd, "1", 1) != 1)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	int control = argc > 1 && !strcmp(argv[1], "control");
	const char *dir = getenv("MODDIR");
	char here[4096], buf[256];
	int fexit, fentry, fentry2, fd, redirected;
	ssize_t n;

	if (!dir) {
		snprintf(here, sizeof(here), "%s", argv[0]);
		dir = strrchr(here, '/') ? (*strrchr(here, '/') = 0, here) : ".";
	}

	fexit = attach("cmdline_proc_show", BPF_TRACE_FEXIT);
	step(1, "fexit on cmdline_proc_show", fexit);
	if (fexit < 0)
		return 2;

	load_module(dir, control ? "both=1" : "");
	step(2, control ?
	     "IPMODIFY ops registered on version_proc_show and cmdline_proc_show" :
	     "IPMODIFY ops registered on version_proc_show", 0);
	if (!control)
		step(3, "cmdline_proc_show added to the registered IPMODIFY ops' filter",
		     grow_filter());

	fentry = attach("version_proc_show", BPF_TRACE_FENTRY);
	step(4, "fentry on version_proc_show", fentry);
	fentry2 = attach("version_proc_show", BPF_TRACE_FENTRY);
	step(5, "second fentry on version_proc_show (modifies its trampoline)", fentry2);

	fd = open("/proc/cmdline", O_RDONLY);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = 0;
	if (fd >= 0)
		close(fd);
	redirected = !!strstr(buf, MODULE_NAME ": redirected");
	printf("6. /proc/cmdline reads: %s", n > 0 ? buf : "(nothing)\n");
	printf("   the IPMODIFY ops' redirect of cmdline_proc_show was %s\n",
	       redirected ? "taken" : "bypassed");

	if (fentry2 >= 0)
		close(fentry2);
	if (fentry >= 0)
		close(fentry);
	close(fexit);
	if (syscall(__NR_delete_module, MODULE_NAME, O_NONBLOCK))
		perror("delete_module " MODULE_NAME);

	if (fentry < 0 || fentry2 < 0) {
		printf("FAIL: %s\n",
		       "BPF trampoline attach refused after an IPMODIFY ops grew its filter");
		return 1;
	}
	if (!redirected) {
		printf("FAIL: %s\n",
		       "BPF fexit trampoline bypasses the redirect of an IPMODIFY ops");
		return 1;
	}
	return 0;
}
