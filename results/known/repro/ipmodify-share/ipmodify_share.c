// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: update_ftrace_direct_mod() asks BPF trampolines it does not
 * modify to share IPMODIFY.
 *
 * Usage: ipmodify_share [control]
 *        ipmodify_share mid-update [control]
 *
 * The filter path (no argument):
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
 * The path of a trampoline update under way ("mid-update"):
 *
 *   1. load ipmodify_redirect.ko with both functions in its filter;
 *   2. attach a BPF fentry program to cmdline_proc_show(): registered
 *      while the IPMODIFY ops is there, it is asked to share and has
 *      nothing to share (it does not call the original function);
 *   3. attach fentry programs to loadavg_proc_show() and
 *      uptime_proc_show();
 *   4. set bpf_tramp_race_delay_ms (bpf-tramp-race-delay.patch) to 2000,
 *      where the kernel has it;
 *   5. attach a BPF fexit program to cmdline_proc_show() from a child
 *      process: its update rebuilds the trampoline's flags to call the
 *      original function, then sleeps before it modifies the direct call;
 *   6. meanwhile, for 3 s, attach and detach a second fentry program on
 *      loadavg_proc_show() and uptime_proc_show(): each modifies that
 *      trampoline, and update_ftrace_direct_mod() asks cmdline_proc_show()'s
 *      trampoline, whose lock it does not hold, to share IPMODIFY.
 *   Control: steps 1 and 2 swapped (the ops' registration asks the
 *   trampoline as a peer and marks it sharing before the fexit comes).
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
#include <sys/wait.h>
#include <time.h>
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

/* The vmlinux BTF id of the function @name, read once per name. */
static int btf_func_id(const char *name)
{
	static struct {
		const char *name;
		int id;
	} cache[8];
	static int cached;
	struct btf_header *h;
	char *data, *types, *strs, *p;
	size_t len;
	int id = 1, i;

	for (i = 0; i < cached; i++)
		if (!strcmp(cache[i].name, name))
			return cache[i].id;

	data = read_file("/sys/kernel/btf/vmlinux", &len);
	h = (struct btf_header *)data;
	if (len < sizeof(*h) || h->magic != BTF_MAGIC) {
		fprintf(stderr, "/sys/kernel/btf/vmlinux: not BTF\n");
		exit(2);
	}
	types = data + h->hdr_len + h->type_off;
	strs = data + h->hdr_len + h->str_off;
	p = types;
	while (p < types + h->type_len) {
		struct btf_type *t = (struct btf_type *)p;

		if (BTF_INFO_KIND(t->info) == BTF_KIND_FUNC &&
		    !strcmp(strs + t->name_off, name)) {
			free(data);
			if (cached < 8) {
				cache[cached].name = name;
				cache[cached++].id = id;
			}
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
		link = -errno;
	/* The link, if any, holds the program. */
	close(prog);
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

static int set_delay(const char *ms)
{
	int fd = open("/sys/module/kernel/parameters/bpf_tramp_race_delay_ms", O_WRONLY);
	int ret = 0;

	if (fd < 0 || write(fd, ms, strlen(ms)) != (ssize_t)strlen(ms))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

static double since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec - t0->tv_sec + (now.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * Another trampoline's modify asks a trampoline whose own update is
 * under way, and whose lock it does not hold, to share IPMODIFY.
 */
static int mid_update(const char *dir, int control)
{
	static const char *const others[] = { "loadavg_proc_show", "uptime_proc_show" };
	int fentry, other[2], modifies = 0, refused = 0, first_refusal = 0;
	int status, fexit_refused, i;
	struct timespec t0;
	pid_t pid;

	if (control) {
		fentry = attach("cmdline_proc_show", BPF_TRACE_FENTRY);
		step(1, "fentry on cmdline_proc_show", fentry);
		if (fentry < 0)
			return 2;
		load_module(dir, "both=1");
		step(2, "IPMODIFY ops registered on version_proc_show and cmdline_proc_show", 0);
	} else {
		load_module(dir, "both=1");
		step(1, "IPMODIFY ops registered on version_proc_show and cmdline_proc_show", 0);
		fentry = attach("cmdline_proc_show", BPF_TRACE_FENTRY);
		step(2, "fentry on cmdline_proc_show", fentry);
		if (fentry < 0)
			return 2;
	}
	for (i = 0; i < 2; i++) {
		other[i] = attach(others[i], BPF_TRACE_FENTRY);
		printf("3. fentry on %s: %s\n", others[i],
		       other[i] < 0 ? strerror(-other[i]) : "ok");
		if (other[i] < 0)
			return 2;
	}
	if (set_delay("2000"))
		printf("4. no bpf_tramp_race_delay_ms (bpf-tramp-race-delay.patch):\n"
		       "   the window is as wide as the image build\n");
	else
		printf("4. bpf_tramp_race_delay_ms=2000\n");
	fflush(stdout);

	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 2;
	}
	if (pid == 0) {
		int fexit = attach("cmdline_proc_show", BPF_TRACE_FEXIT);

		step(5, "fexit on cmdline_proc_show", fexit);
		_exit(fexit < 0 ? 1 : 0);
	}

	usleep(300000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (since(&t0) < 3) {
		for (i = 0; i < 2; i++) {
			int link = attach(others[i], BPF_TRACE_FENTRY);

			modifies++;
			if (link >= 0) {
				close(link);
				continue;
			}
			if (!refused++)
				first_refusal = link;
		}
	}
	printf("6. %d attaches of a second fentry to loadavg_proc_show and\n"
	       "   uptime_proc_show: %d refused%s%s\n", modifies, refused,
	       refused ? ", the first with " : "",
	       refused ? strerror(-first_refusal) : "");
	if (waitpid(pid, &status, 0) < 0) {
		perror("waitpid");
		return 2;
	}
	fexit_refused = !WIFEXITED(status) || WEXITSTATUS(status);
	set_delay("0");

	close(other[0]);
	close(other[1]);
	close(fentry);
	if (syscall(__NR_delete_module, MODULE_NAME, O_NONBLOCK))
		perror("delete_module " MODULE_NAME);

	if (fexit_refused || refused) {
		printf("FAIL: %s\n",
		       "BPF trampoline attach refused while another trampoline's update was under way");
		return 1;
	}
	return 0;
}

/*
 * An IPMODIFY ops that grows its filter after it registered: the fexit
 * trampoline already there is asked by a stranger's modify.
 */
static int filter_path(const char *dir, int control)
{
	char buf[256];
	int fexit, fentry, fentry2, fd, redirected;
	ssize_t n;

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

int main(int argc, char **argv)
{
	int mid = argc > 1 && !strcmp(argv[1], "mid-update");
	int control = argc > 1 + mid && !strcmp(argv[1 + mid], "control");
	const char *dir = getenv("MODDIR");
	char here[4096];

	if (!dir) {
		snprintf(here, sizeof(here), "%s", argv[0]);
		dir = strrchr(here, '/') ? (*strrchr(here, '/') = 0, here) : ".";
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	return mid ? mid_update(dir, control) : filter_path(dir, control);
}
