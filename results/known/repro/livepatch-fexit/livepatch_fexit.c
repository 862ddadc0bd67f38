// SPDX-License-Identifier: GPL-2.0
/*
 * Reproducer: a BPF fexit program is not called while a livepatch of its
 * function is applied (powerpc64 with PPC_FTRACE_OUT_OF_LINE).
 *
 * Usage: livepatch_fexit [control|fentry] [reads]
 *
 * The program counts the calls of cmdline_proc_show() in a map, and each
 * step reads /proc/cmdline @reads times (default: 1000) and compares:
 *
 *   1. attach the fexit program alone (every read must be counted);
 *   2. load samples/livepatch/livepatch-sample.ko (from $MODDIR, else the
 *      running kernel's kernel/samples/livepatch), which replaces
 *      cmdline_proc_show(), wait for its transition to end, then
 *      disable and unload it; detach the program;
 *   3. load the livepatch alone;
 *   4. attach the program with the livepatch applied: the other order;
 *   5. disable and unload the livepatch.
 *
 * A kernel that cannot call both may refuse the second of the two (the
 * livepatch's load in step 2, the attach in step 4): that is a pass.
 * "control" does the same without loading the livepatch; "fentry" uses
 * an fentry program instead of fexit.
 *
 * Exit status: 0 every read was counted, or the kernel refused the pair;
 * 1 reads made while both were in place were not counted; 2 the
 * reproducer could not run.
 *
 * Built by the Makefile, or alone: cc -O2 -Wall -static.
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
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define SAMPLE		"livepatch-sample"
#define SAMPLE_MOD	"livepatch_sample"
#define KLP_DIR		"/sys/kernel/livepatch/" SAMPLE_MOD
#define TRACED		"cmdline_proc_show"

/* -ENOTSUPP, the kernel-internal errno some JITs refuse with. */
#define ENOTSUPP_KERNEL	524

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

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

/* An array map of one u64: the calls counted. */
static int counter_map(void)
{
	union bpf_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 8;
	attr.max_entries = 1;
	fd = sys_bpf(BPF_MAP_CREATE, &attr);
	if (fd < 0) {
		perror("BPF_MAP_CREATE");
		exit(2);
	}
	return fd;
}

static unsigned long long counted(int map)
{
	union bpf_attr attr;
	__u32 key = 0;
	__u64 value = 0;

	memset(&attr, 0, sizeof(attr));
	attr.map_fd = map;
	attr.key = (uint64_t)(unsigned long)&key;
	attr.value = (uint64_t)(unsigned long)&value;
	if (sys_bpf(BPF_MAP_LOOKUP_ELEM, &attr)) {
		perror("BPF_MAP_LOOKUP_ELEM");
		exit(2);
	}
	return value;
}

/*
 * Load a program of @type on TRACED that adds one to the map's counter,
 * and attach it; return the link's fd, or -errno of the attach.
 */
static int attach(int map, enum bpf_attach_type type)
{
	struct bpf_insn insns[] = {
		/* *(u32 *)(r10 - 4) = 0: the key */
		{ .code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X,
		  .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 },
		/* r1 = the map */
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1,
		  .src_reg = BPF_PSEUDO_MAP_FD, .imm = map },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_JMP | BPF_JEQ | BPF_K, .dst_reg = BPF_REG_0, .off = 2 },
		/* atomically add 1 to the counter */
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_1, .imm = 1 },
		{ .code = BPF_STX | BPF_DW | BPF_ATOMIC, .dst_reg = BPF_REG_0,
		  .src_reg = BPF_REG_1, .imm = BPF_ADD },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	static char log[4096];
	union bpf_attr attr;
	int prog, link, err;

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_TRACING;
	attr.expected_attach_type = type;
	attr.attach_btf_id = btf_func_id(TRACED);
	attr.insns = (uint64_t)(unsigned long)insns;
	attr.insn_cnt = ARRAY_SIZE(insns);
	attr.license = (uint64_t)(unsigned long)"GPL";
	attr.log_buf = (uint64_t)(unsigned long)log;
	attr.log_size = sizeof(log);
	attr.log_level = 1;
	prog = sys_bpf(BPF_PROG_LOAD, &attr);
	if (prog < 0) {
		fprintf(stderr, "BPF_PROG_LOAD on %s: %s\n%s", TRACED, strerror(errno), log);
		exit(2);
	}
	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = prog;
	attr.link_create.attach_type = type;
	link = sys_bpf(BPF_LINK_CREATE, &attr);
	err = errno;
	close(prog);
	return link < 0 ? -err : link;
}

/* Read /proc/cmdline @n times; return the first line read. */
static const char *read_cmdline(int n, char *buf, size_t size)
{
	ssize_t r = 0;
	int i, fd;

	buf[0] = 0;
	for (i = 0; i < n; i++) {
		fd = open("/proc/cmdline", O_RDONLY);
		if (fd < 0) {
			perror("/proc/cmdline");
			exit(2);
		}
		r = read(fd, buf, size - 1);
		close(fd);
		if (r < 0) {
			perror("/proc/cmdline");
			exit(2);
		}
		buf[r] = 0;
	}
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

/* The first line of a sysfs file, or "" if it cannot be read. */
static const char *sysfs_read(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t r = fd < 0 ? -1 : read(fd, buf, size - 1);

	if (fd >= 0)
		close(fd);
	buf[r > 0 ? r : 0] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

/*
 * Wait up to 60 s for the livepatch's transition to end. A disabled patch
 * is freed once its transition ends, and its directory goes with it.
 */
static int klp_settled(void)
{
	struct timespec tick = { .tv_nsec = 100 * 1000 * 1000 };
	char buf[16];
	int i;

	for (i = 0; i < 600; i++) {
		if (!strcmp(sysfs_read(KLP_DIR "/transition", buf, sizeof(buf)), "0") ||
		    access(KLP_DIR, F_OK))
			return 1;
		nanosleep(&tick, NULL);
	}
	return 0;
}

/* Load the sample livepatch; 0, or -errno of the load. */
static int klp_load(void)
{
	const char *dir = getenv("MODDIR");
	char path[4200], kdir[512];
	struct utsname u;
	int fd, err;

	if (!dir) {
		uname(&u);
		snprintf(kdir, sizeof(kdir), "/lib/modules/%s/kernel/samples/livepatch", u.release);
		dir = kdir;
	}
	snprintf(path, sizeof(path), "%s/%s.ko", dir, SAMPLE);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: %s (CONFIG_SAMPLE_LIVEPATCH=m; set MODDIR)\n",
			path, strerror(errno));
		exit(2);
	}
	err = syscall(__NR_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	if (!err && !klp_settled()) {
		fprintf(stderr, "%s: its transition did not end in 60 s\n", SAMPLE);
		exit(2);
	}
	return err;
}

static void klp_unload(void)
{
	struct timespec tick = { .tv_nsec = 100 * 1000 * 1000 };
	int fd = open(KLP_DIR "/enabled", O_WRONLY);
	int i;

	if (fd < 0 || write(fd, "0", 1) != 1)
		perror(KLP_DIR "/enabled");
	if (fd >= 0)
		close(fd);
	if (!klp_settled())
		fprintf(stderr, "%s: its disabling did not end in 60 s\n", SAMPLE);
	/* The patch lets go of the module a little after the transition. */
	for (i = 0; i < 50; i++) {
		if (!syscall(__NR_delete_module, SAMPLE_MOD, O_NONBLOCK))
			return;
		if (errno != EAGAIN && errno != EBUSY)
			break;
		nanosleep(&tick, NULL);
	}
	perror("delete_module " SAMPLE_MOD);
}

static int refused(int err)
{
	return err == -EOPNOTSUPP || err == -ENOTSUPP_KERNEL || err == -EBUSY;
}

/*
 * Read @reads times with the program attached; say how many were
 * counted. Returns 1 if all were.
 */
static int count_reads(int step, const char *what, int map, int reads)
{
	unsigned long long before = counted(map), n;
	char buf[256];
	const char *line = read_cmdline(reads, buf, sizeof(buf));

	n = counted(map) - before;
	printf("%d. %s: /proc/cmdline read %d times (\"%.60s\"), %llu calls counted\n",
	       step, what, reads, line, n);
	fflush(stdout);
	return n == (unsigned long long)reads;
}

int main(int argc, char **argv)
{
	int control = argc > 1 && !strcmp(argv[1], "control");
	int fentry = argc > 1 && !strcmp(argv[1], "fentry");
	int reads = argc > 2 ? atoi(argv[2]) : 1000;
	enum bpf_attach_type type = fentry ? BPF_TRACE_FENTRY : BPF_TRACE_FEXIT;
	const char *kind = fentry ? "fentry" : "fexit";
	int map = counter_map(), link, err, lost = 0;
	char what[128];

	if (reads <= 0)
		reads = 1000;

	/* The program first, then the livepatch. */
	link = attach(map, type);
	if (link < 0) {
		fprintf(stderr, "BPF_LINK_CREATE %s on %s: %s\n", kind, TRACED, strerror(-link));
		return 2;
	}
	snprintf(what, sizeof(what), "%s on %s alone", kind, TRACED);
	if (!count_reads(1, what, map, reads)) {
		fprintf(stderr, "the %s program misses calls with nothing else on %s\n",
			kind, TRACED);
		return 2;
	}
	if (control) {
		printf("2. (control: no livepatch)\n");
	} else {
		err = klp_load();
		if (err && !refused(err)) {
			fprintf(stderr, "load %s: %s\n", SAMPLE, strerror(-err));
			return 2;
		}
		if (err) {
			printf("2. %s refused beside the %s program: %s\n",
			       SAMPLE, kind, strerror(-err));
		} else {
			snprintf(what, sizeof(what), "%s loaded after the %s program",
				 SAMPLE, kind);
			lost |= !count_reads(2, what, map, reads);
			klp_unload();
		}
	}
	close(link);

	/* The livepatch first, then the program. */
	if (control) {
		printf("3. (control: no livepatch)\n");
	} else {
		err = klp_load();
		if (err) {
			fprintf(stderr, "load %s alone: %s\n", SAMPLE, strerror(-err));
			return 2;
		}
		printf("3. %s loaded alone\n", SAMPLE);
	}
	link = attach(map, type);
	if (link < 0 && (control || !refused(link))) {
		fprintf(stderr, "BPF_LINK_CREATE %s on %s again: %s\n",
			kind, TRACED, strerror(-link));
		return 2;
	}
	if (link < 0) {
		printf("4. %s on %s refused beside %s: %s\n",
		       kind, TRACED, SAMPLE, strerror(-link));
	} else {
		snprintf(what, sizeof(what), "%s attached %s", kind,
			 control ? "again" : "after " SAMPLE);
		lost |= !count_reads(4, what, map, reads);
		close(link);
	}
	if (!control) {
		klp_unload();
		printf("5. %s disabled and unloaded\n", SAMPLE);
	}
	if (lost) {
		printf("FAIL: BPF %s program not called %s\n", kind,
		       "while a livepatch of its function is applied");
		return 1;
	}
	printf("every call counted, or the kernel refused the pair\n");
	return 0;
}
