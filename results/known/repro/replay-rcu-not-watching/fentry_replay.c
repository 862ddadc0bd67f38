// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: powerpc64's interrupt return replays soft-masked interrupts
 * through replay_soft_interrupts(), which is traceable, from the notrace
 * interrupt_exit_kernel_prepare(); returning to the idle loop, RCU is not
 * watching there, so a BPF fentry program on it runs with RCU not
 * watching.
 *
 * Usage: fentry_replay [control] [seconds]
 *
 * Attaches an empty fentry program to replay_soft_interrupts() (control:
 * to hrtimer_interrupt(), which every timer interrupt calls with RCU
 * watching), then keeps two tasks on two CPUs waking each other and
 * sleeping for @seconds (default: 20), so that idle CPUs take interrupts
 * with others pending, and detaches. With CONFIG_LOCKDEP the first call
 * warns: "RCU not watching for tracepoint" from lock_acquire() under
 * __bpf_prog_enter_recur().
 *
 * Exit status: 0 the program ran and was detached, or the kernel refused
 * the attach with EOPNOTSUPP because the function is not traceable (as
 * with the fix), 2 the reproducer could not run. run.sh reads the kernel
 * log for the warning.
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

/*
 * Two tasks, one per CPU, wake each other through pipes and sleep between
 * rounds: each wakeup of a task on an idle CPU is an interrupt there, and
 * one that comes while another is being handled is replayed on its way
 * out.
 */
static void pingpong(int seconds)
{
	int ab[2], ba[2], cpu;
	pid_t pids[2];
	char c = 0;

	if (pipe(ab) || pipe(ba)) {
		perror("pipe");
		exit(2);
	}
	for (cpu = 0; cpu < 2; cpu++) {
		pids[cpu] = fork();
		if (pids[cpu] == 0) {
			int in = cpu ? ab[0] : ba[0], out = cpu ? ba[1] : ab[1];
			time_t end = time(NULL) + seconds;
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			sched_setaffinity(0, sizeof(set), &set);
			if (cpu == 0 && write(out, &c, 1) != 1)
				_exit(2);
			while (time(NULL) < end) {
				if (read(in, &c, 1) != 1)
					_exit(0);
				usleep(200);
				if (write(out, &c, 1) != 1)
					_exit(0);
			}
			_exit(0);
		}
	}
	close(ab[0]);
	close(ab[1]);
	close(ba[0]);
	close(ba[1]);
	while (wait(NULL) > 0)
		;
}

int main(int argc, char **argv)
{
	int control = argc > 1 && !strcmp(argv[1], "control");
	const char *func = control ? "hrtimer_interrupt" : "replay_soft_interrupts";
	int seconds = argc > 1 + control ? atoi(argv[1 + control]) : 20;
	int link;

	link = attach(func, BPF_TRACE_FENTRY);
	if (link == -EOPNOTSUPP && !control) {
		/* No ftrace record for it: the function is notrace (the fix). */
		printf("fentry on %s refused: %s (the function is not traceable)\n",
		       func, strerror(-link));
		return 0;
	}
	if (link < 0) {
		printf("fentry on %s: %s\n%s", func, strerror(-link), log);
		return 2;
	}
	printf("fentry on %s attached; running for %d s\n", func, seconds);
	fflush(stdout);
	pingpong(seconds);
	close(link);
	printf("fentry on %s detached\n", func);
	return 0;
}
