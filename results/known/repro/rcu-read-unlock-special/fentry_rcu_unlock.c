// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: a BPF fentry program on rcu_read_unlock_special() recurses
 * until the stack overflows (CONFIG_PREEMPT_RCU).
 *
 * Usage: fentry_rcu_unlock [control] [seconds]
 *
 * Attaches an empty fentry program to rcu_read_unlock_special() (control:
 * to rcu_note_context_switch(), called as often and not on the
 * trampoline's way out), then keeps this task and the others busy for
 * @seconds (default: 10), blocking inside RCU read-side critical
 * sections the way any task does, and detaches.
 *
 * Exit status: 0 the kernel is still running (or its verifier rejects
 * the program),
 * 2 the reproducer could not run. The bug does not let it exit: the
 * kernel crashes (a stack overflow or a double fault) within a second.
 *
 * Built by the Makefile, or alone: cc -O2 -Wall -static.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The verifier's log of the last load. */
static char log[4096];

static int sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

/*
 * Load an empty fentry or fexit program on @func and attach it; return
 * the link's fd, or -errno of the load (the verifier's log in log[]) or
 * of the attach.
 */
static int attach(const char *func, enum bpf_attach_type type)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
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
	if (prog < 0)
		return -errno;
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog;
	attr.link_create.attach_type = type;
	link = sys_bpf(BPF_LINK_CREATE, &attr);
	if (link < 0)
		return -errno;
	return link;
}

/* Work that blocks and wakes, so that readers get preempted or blocked. */
static void churn(int seconds)
{
	time_t end = time(NULL) + seconds;
	char buf[4096];
	int i;

	while (time(NULL) < end) {
		for (i = 0; i < 4; i++) {
			pid_t pid = fork();

			if (pid == 0) {
				int fd = open("/proc/self/maps", O_RDONLY);

				if (fd >= 0) {
					while (read(fd, buf, sizeof(buf)) > 0)
						;
					close(fd);
				}
				_exit(0);
			}
		}
		while (wait(NULL) > 0)
			;
		sched_yield();
	}
}

int main(int argc, char **argv)
{
	int control = argc > 1 && !strcmp(argv[1], "control");
	const char *func = control ? "rcu_note_context_switch" : "rcu_read_unlock_special";
	int seconds = argc > 1 + control ? atoi(argv[1 + control]) : 10;
	int link;

	link = attach(func, BPF_TRACE_FENTRY);
	if (link < 0 && strstr(log, "is rejected")) {
		printf("fentry on %s refused by the verifier: %s", func, log);
		return 0;
	}
	if (link < 0) {
		printf("fentry on %s: %s\n%s", func, strerror(-link), log);
		return 2;
	}
	printf("fentry on %s attached; running for %d s\n", func, seconds);
	fflush(stdout);
	churn(seconds);
	close(link);
	printf("fentry on %s detached; the kernel is still running\n", func);
	return 0;
}
