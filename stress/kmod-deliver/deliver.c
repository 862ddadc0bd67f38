// SPDX-License-Identifier: GPL-2.0
/*
 * fth_deliver: the delivery oracle's kernel half (ftrace-harness).
 *
 * One caller kthread per CPU (at most FTH_MAX_CALLERS) calls
 * fth_deliver_seq(caller, n) and fth_deliver_other(caller, n) with n = 1,
 * 2, 3... Every user this module can attach to those functions (ftrace_ops
 * in the variants the kernel dispatches differently, a kprobe, a kretprobe,
 * an fprobe) records the sequence numbers it receives, per function and
 * per caller. Calls of one caller are sequential, so a user sees them in
 * order, and a missed call shows as a gap.
 *
 * The rule (the issue's): every call made while a user was fully attached,
 * from its attach returning to its detach starting, must reach it exactly
 * once, whatever else changes the callsite meanwhile. Calls made during the
 * user's own attach or detach may go either way. With started[c] and
 * done[c] the caller's last started and last finished call, the window of
 * caller c is (started[c] read after the attach returned, done[c] read
 * before the detach starts]: every call in it began after the attach and
 * ended before the detach.
 *
 * The module judges its own users at their detach and writes what it found
 * to deliver/findings; BPF users are the agent's, which reads deliver/seq
 * around its own attach and detach. Every transition on the callsite, the
 * module's or the agent's (begin/end in deliver/ctl), is logged to
 * deliver/transitions with the calls it may have overlapped, so that the
 * agent can say which transition a missed call happened during.
 */
#include <linux/delay.h>
#include <linux/debugfs.h>
#include <linux/fprobe.h>
#include <linux/ftrace.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/unaligned.h>
#include <linux/kallsyms.h>

#define FTH_MAX_CALLERS 8
#define FTH_GAPS 8
#define FTH_NAME 48
#define FTH_LOG 1024
#define FTH_FINDINGS (64 * 1024)

static unsigned int burst = 16;
module_param(burst, uint, 0444);
MODULE_PARM_DESC(burst, "calls per caller between sleeps (default 16)");
static unsigned int pause_us = 200;
module_param(pause_us, uint, 0444);
MODULE_PARM_DESC(pause_us, "sleep between bursts, in microseconds (default 200): a TCG guest's vCPUs must still run the agent");

/* The traced functions. */
enum { FN_SEQ, FN_OTHER, FN_COUNT };
static const char *const fn_names[FN_COUNT] = { "fth_deliver_seq", "fth_deliver_other" };

static unsigned long sink;

/*
 * Global and noinline: each keeps its own callsite and BTF entry. They are
 * not static, so they need prototypes; nothing else calls them.
 */
void fth_deliver_seq(unsigned long caller, unsigned long n);
void fth_deliver_other(unsigned long caller, unsigned long n);

noinline void fth_deliver_seq(unsigned long caller, unsigned long n)
{
	WRITE_ONCE(sink, READ_ONCE(sink) + (caller ^ n));
}

noinline void fth_deliver_other(unsigned long caller, unsigned long n)
{
	WRITE_ONCE(sink, READ_ONCE(sink) - (caller ^ n));
}

/*
 * A callsite as a caller saw it just before one call: the patched
 * instructions and, under CALL_OPS, the ops literal ftrace_caller loads.
 * x86_64: the 5-byte call at ip. arm64, riscv64: the two instructions
 * ending at ip (MOV X9, LR / AUIPC; then BL / JALR), the literal at
 * ALIGN_DOWN(ip - 12, 8). ppc64le (out-of-line stubs): the branch at ip
 * and, when it branches, the stub's first three instructions (mflr r0,
 * bl, mtlr r0) and the literal at the stub's start - 8. Each is the
 * arch's own layout (arch/<arch>/kernel/ftrace.c: ftrace_rec_set_ops).
 */
struct fth_site {
	u32 w[4];
	unsigned long literal, stub;
};

/*
 * FTH_SITES: how many of a caller's last calls keep their callsite
 * snapshot, so that a gap seen at the next call can say what the callsite
 * was when the first missed call was made.
 */
#define FTH_SITES 64

/*
 * fn_addr is fn's address. Filters are set by address, not by name: a
 * name is matched against every ftrace record with a kallsyms lookup
 * each, linear in a module's symbols, which with fth_scale.ko's 32,768
 * functions loaded held ftrace_lock for minutes under TCG.
 */
static unsigned long fn_addr(unsigned int fn)
{
	return fn == FN_SEQ ? (unsigned long)fth_deliver_seq : (unsigned long)fth_deliver_other;
}

struct fth_caller {
	struct task_struct *task;
	unsigned long started, done;
	struct fth_site site[2][FTH_SITES];
};

static struct fth_caller callers[FTH_MAX_CALLERS];
static unsigned int ncallers;
static bool running;

/* The callsite addresses ftrace hands ops callbacks, learnt at load. */
static unsigned long fn_ip[FN_COUNT];

/* site_snap reads fn's callsite; it runs before every call, so it is cheap. */
static void site_snap(struct fth_site *s, unsigned int fn)
{
	unsigned long ip = fn_ip[fn];

	if (!ip)
		return;
#if defined(CONFIG_X86)
	memcpy(s->w, (void *)ip, 8);
#elif defined(CONFIG_ARM64) || defined(CONFIG_RISCV)
	s->w[0] = READ_ONCE(*(u32 *)(ip - 4));
	s->w[1] = READ_ONCE(*(u32 *)ip);
	s->literal = READ_ONCE(*(unsigned long *)ALIGN_DOWN(ip - 12, 8));
#elif defined(CONFIG_PPC64)
	s->w[0] = READ_ONCE(*(u32 *)ip);
	s->stub = 0;
	s->literal = 0;
	/* An unconditional branch without link (b): to the OOL stub. */
	if ((s->w[0] >> 26) == 18 && !(s->w[0] & 3)) {
		unsigned long stub = ip + sign_extend64(s->w[0] & 0x03fffffc, 25);

		s->stub = stub;
		s->w[1] = READ_ONCE(*(u32 *)stub);
		s->w[2] = READ_ONCE(*(u32 *)(stub + 4));
		s->w[3] = READ_ONCE(*(u32 *)(stub + 8));
		s->literal = READ_ONCE(*(unsigned long *)(stub - 8));
	}
#endif
}

static void snap_started(unsigned long *out)
{
	unsigned int c;

	smp_mb();
	for (c = 0; c < ncallers; c++)
		out[c] = READ_ONCE(callers[c].started);
}

static void snap_done(unsigned long *out)
{
	unsigned int c;

	smp_mb();
	for (c = 0; c < ncallers; c++)
		out[c] = READ_ONCE(callers[c].done);
}

static int caller_fn(void *arg)
{
	struct fth_caller *c = arg;
	unsigned long id = c - callers, n;
	unsigned int i;

	while (!kthread_should_stop()) {
		if (!READ_ONCE(running)) {
			msleep(20);
			continue;
		}
		for (i = 0; i < burst; i++) {
			n = c->started + 1;
			WRITE_ONCE(c->started, n);
			smp_mb();
			site_snap(&c->site[FN_SEQ][n % FTH_SITES], FN_SEQ);
			fth_deliver_seq(id, n);
			site_snap(&c->site[FN_OTHER][n % FTH_SITES], FN_OTHER);
			fth_deliver_other(id, n);
			smp_mb();
			WRITE_ONCE(c->done, n);
		}
		usleep_range(pause_us, pause_us + pause_us / 2 + 1);
	}
	return 0;
}

/* One user's record of one function's calls from one caller. */
struct fth_track {
	unsigned long first, last, seen, dups, dup_n;
	unsigned int ngaps;
	unsigned long gap_from[FTH_GAPS], gap_to[FTH_GAPS];
	/*
	 * The callsite when a missed call was made (gap_site_n: which one, 0
	 * for none kept), per gap and before the first call seen.
	 */
	struct fth_site gap_site[FTH_GAPS], first_site;
	unsigned long gap_site_n[FTH_GAPS], first_site_n;
	/* What a checkpoint has judged already: gaps, and the first call. */
	unsigned int judged;
	bool first_judged;
};

/*
 * keep_site copies caller's snapshot before call k of fn, if the ring
 * still holds it: track runs on the caller's own thread, inside call n,
 * so calls n - FTH_SITES + 1 .. n are there and final.
 */
static unsigned long keep_site(struct fth_site *dst, unsigned int fn, unsigned long caller,
			       unsigned long k, unsigned long n)
{
	if (!k || n - k >= FTH_SITES)
		return 0;
	*dst = callers[caller].site[fn][k % FTH_SITES];
	return k;
}

static void track(struct fth_track *t, unsigned int fn, unsigned long caller, unsigned long n)
{
	if (t->seen && n <= t->last) {
		t->dups++;
		t->dup_n = n;
		return;
	}
	if (!t->seen) {
		t->first = n;
		t->first_site_n = keep_site(&t->first_site, fn, caller, n - 1, n);
	} else if (n != t->last + 1) {
		if (t->ngaps < FTH_GAPS) {
			unsigned int g = t->ngaps;

			t->gap_from[g] = t->last + 1;
			t->gap_to[g] = n - 1;
			/* The first missed call, or the last when the ring lost it. */
			t->gap_site_n[g] = keep_site(&t->gap_site[g], fn, caller, t->last + 1, n) ?:
					   keep_site(&t->gap_site[g], fn, caller, n - 1, n);
		}
		/* A checkpoint reads a gap only once it is whole. */
		smp_wmb();
		WRITE_ONCE(t->ngaps, t->ngaps + 1);
	}
	t->last = n;
	smp_wmb();
	WRITE_ONCE(t->seen, t->seen + 1);
}

/*
 * K_EXTERNAL: a user another module carries (livepatch: fth_klp.ko, which
 * the agent loads and unloads). The agent brackets its attach and detach
 * with attach-begin/attach-end and detach-begin/detach-end; the user
 * records through fth_deliver_record_livepatch().
 */
enum fth_kind { K_OPS, K_KPROBE, K_KRETPROBE, K_FPROBE, K_DIRECT, K_EXTERNAL };

/* An external user's transition in flight. */
enum fth_phase { P_NONE, P_ATTACHING, P_DETACHING };

struct fth_user {
	const char *name;
	enum fth_kind kind;
	unsigned long ops_flags;
	/* live: set before the attach starts, cleared after the detach ends. */
	bool live;
	/*
	 * refused: the last attach failed. A call that reaches the user
	 * while it is not live counts as late after a detach, as stray after
	 * a refusal: ftrace_startup() lists the ops before the IPMODIFY
	 * handshake that refuses it (docs/findings.md 14).
	 */
	bool refused;
	/* mask: the functions the user is attached to now; window starts. */
	unsigned int mask;
	unsigned long from[FN_COUNT][FTH_MAX_CALLERS];
	struct fth_track t[FN_COUNT][FTH_MAX_CALLERS];
	atomic_long_t foreign, late, stray, dropped, noargs;
	unsigned long foreign_ip;
	unsigned long attaches, checked, failed;
	struct ftrace_ops ops;
	struct kprobe kp;
	struct kretprobe krp;
	struct fprobe fp;
	/*
	 * judging: the functions whose window is open for a checkpoint, set
	 * once the window's start is written, cleared before it closes;
	 * under check_lock.
	 */
	unsigned int judging;
	/* K_DIRECT: the trampoline the direct call reaches now. */
	unsigned long direct_addr;
	/* K_EXTERNAL: the transition in flight, and the detach's window end. */
	enum fth_phase phase;
	unsigned long tid;
	unsigned long done_at[FTH_MAX_CALLERS];
	const char *skip;
};

static unsigned int sabotage_n;
static atomic_long_t sabotage_ctr = ATOMIC_LONG_INIT(0);

static void record(struct fth_user *u, unsigned int fn, unsigned long caller, unsigned long n)
{
	if (!READ_ONCE(u->live)) {
		atomic_long_inc(READ_ONCE(u->refused) ? &u->stray : &u->late);
		return;
	}
	if (caller >= ncallers)
		return;
	if (sabotage_n && atomic_long_inc_return(&sabotage_ctr) % sabotage_n == 0) {
		atomic_long_inc(&u->dropped);
		return;
	}
	track(&u->t[fn][caller], fn, caller, n);
}

/*
 * ops_fn is the traced function an ops callback was called for, or
 * FN_COUNT when it is not one the user traces now (counted as foreign) or
 * comes without arguments.
 */
static unsigned int ops_fn(struct fth_user *u, unsigned long ip, struct ftrace_regs *fregs)
{
	unsigned int fn;

	for (fn = 0; fn < FN_COUNT; fn++)
		if (ip == fn_ip[fn])
			break;
	if (fn == FN_COUNT || !(READ_ONCE(u->mask) & BIT(fn))) {
		/* A call for a function the user does not trace. */
		if (READ_ONCE(u->live)) {
			atomic_long_inc(&u->foreign);
			WRITE_ONCE(u->foreign_ip, ip);
		}
		return FN_COUNT;
	}
	if (!fregs) {
		atomic_long_inc(&u->noargs);
		return FN_COUNT;
	}
	return fn;
}

static void ops_func(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct ftrace_regs *fregs)
{
	struct fth_user *u = container_of(op, struct fth_user, ops);
	unsigned int fn = ops_fn(u, ip, fregs);

	if (fn == FN_COUNT)
		return;
	record(u, fn, ftrace_regs_get_argument(fregs, 0), ftrace_regs_get_argument(fregs, 1));
}

/*
 * ops-ipmodify does what livepatch does: its callback moves the
 * instruction pointer to a replacement of the traced function, and the
 * replacement is what counts the call. A call that reaches the callback
 * but then runs the original (a BPF trampoline calling the original
 * directly beside it, without BPF_TRAMP_F_ORIG_STACK) is a missed call of
 * the patch: the livepatch silently not applied. notrace: the
 * replacements must not be callsites themselves.
 */
static struct fth_user *redirect_user;

notrace noinline void fth_deliver_seq_patched(unsigned long caller, unsigned long n);
notrace noinline void fth_deliver_other_patched(unsigned long caller, unsigned long n);

notrace noinline void fth_deliver_seq_patched(unsigned long caller, unsigned long n)
{
	record(redirect_user, FN_SEQ, caller, n);
	WRITE_ONCE(sink, READ_ONCE(sink) + (caller ^ n));
}

notrace noinline void fth_deliver_other_patched(unsigned long caller, unsigned long n)
{
	record(redirect_user, FN_OTHER, caller, n);
	WRITE_ONCE(sink, READ_ONCE(sink) - (caller ^ n));
}

static void ops_redirect_func(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			      struct ftrace_regs *fregs)
{
	struct fth_user *u = container_of(op, struct fth_user, ops);
	unsigned int fn = ops_fn(u, ip, fregs);

	if (fn == FN_COUNT)
		return;
	ftrace_regs_set_instruction_pointer(fregs, fn == FN_SEQ ?
		(unsigned long)fth_deliver_seq_patched : (unsigned long)fth_deliver_other_patched);
}

static int kp_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct fth_user *u = container_of(p, struct fth_user, kp);

	record(u, FN_SEQ, regs_get_kernel_argument(regs, 0), regs_get_kernel_argument(regs, 1));
	return 0;
}

struct krp_data {
	unsigned long caller, n;
};

static int krp_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct krp_data *d = (struct krp_data *)ri->data;

	d->caller = regs_get_kernel_argument(regs, 0);
	d->n = regs_get_kernel_argument(regs, 1);
	return 0;
}

static int krp_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct fth_user *u = container_of(get_kretprobe(ri), struct fth_user, krp);
	struct krp_data *d = (struct krp_data *)ri->data;

	record(u, FN_SEQ, d->caller, d->n);
	return 0;
}

#ifdef CONFIG_FPROBE
static int fp_entry(struct fprobe *fp, unsigned long entry_ip, unsigned long ret_ip,
		    struct ftrace_regs *fregs, void *data)
{
	struct fth_user *u = container_of(fp, struct fth_user, fp);

	record(u, FN_SEQ, ftrace_regs_get_argument(fregs, 0), ftrace_regs_get_argument(fregs, 1));
	return 0;
}
#endif

/*
 * A direct call of our own (register_ftrace_direct, as samples/ftrace
 * does): two trampolines, so that modify_ftrace_direct() has somewhere to
 * move it, both passing the traced function's two arguments on to
 * fth_direct_func() and preserving them. Only where the asm is written.
 */
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
#if defined(CONFIG_X86_64)
#include <asm/ibt.h>
#include <asm/nospec-branch.h>
#define FTH_DIRECT_TRAMP(name)						\
	"	.type " #name ", @function\n"				\
	"	.globl " #name "\n"					\
	#name ":"							\
	ASM_ENDBR							\
	"	pushq %rbp\n"						\
	"	movq %rsp, %rbp\n"					\
	CALL_DEPTH_ACCOUNT						\
	"	pushq %rdi\n"						\
	"	pushq %rsi\n"						\
	"	call fth_direct_func\n"				\
	"	popq %rsi\n"						\
	"	popq %rdi\n"						\
	"	leave\n"						\
	ASM_RET								\
	"	.size " #name ", .-" #name "\n"
#define FTH_HAVE_DIRECT
#elif defined(CONFIG_ARM64)
#define FTH_DIRECT_TRAMP(name)						\
	"	.type " #name ", @function\n"				\
	"	.globl " #name "\n"					\
	#name ":"							\
	"	hint	34\n"						\
	"	sub	sp, sp, #32\n"					\
	"	stp	x9, x30, [sp]\n"				\
	"	stp	x0, x1, [sp, #16]\n"				\
	"	bl	fth_direct_func\n"				\
	"	ldp	x0, x1, [sp, #16]\n"				\
	"	ldp	x30, x9, [sp]\n"				\
	"	add	sp, sp, #32\n"					\
	"	ret	x9\n"						\
	"	.size " #name ", .-" #name "\n"
#define FTH_HAVE_DIRECT
#elif defined(CONFIG_RISCV)
#include <asm/asm.h>
#define FTH_DIRECT_TRAMP(name)						\
	"	.type " #name ", @function\n"				\
	"	.globl " #name "\n"					\
	#name ":\n"							\
	"	addi	sp,sp,-4*" SZREG "\n"				\
	"	" REG_S "	a0,0*" SZREG "(sp)\n"			\
	"	" REG_S "	a1,1*" SZREG "(sp)\n"			\
	"	" REG_S "	t0,2*" SZREG "(sp)\n"			\
	"	" REG_S "	ra,3*" SZREG "(sp)\n"			\
	"	call	fth_direct_func\n"				\
	"	" REG_L "	a0,0*" SZREG "(sp)\n"			\
	"	" REG_L "	a1,1*" SZREG "(sp)\n"			\
	"	" REG_L "	t0,2*" SZREG "(sp)\n"			\
	"	" REG_L "	ra,3*" SZREG "(sp)\n"			\
	"	addi	sp,sp,4*" SZREG "\n"				\
	"	jr	t0\n"						\
	"	.size " #name ", .-" #name "\n"
#define FTH_HAVE_DIRECT
#elif defined(CONFIG_PPC64) && defined(CONFIG_PPC64_ELF_ABI_V2)
/*
 * samples/ftrace/ftrace-direct.c's powerpc trampoline, keeping both
 * arguments (r3, r4) in its frame: the callsite's LR is in r0 and the
 * traced function's return address in LR (the direct call's convention);
 * out of line (PPC_FTRACE_OUT_OF_LINE) the trampoline returns to the stub
 * with blr, inline it returns to the function through CTR. The TOC is the
 * module's, loaded from a quadword after the code.
 */
#include <asm/ppc_asm.h>
#define FTH_PPC_FRAME "(" __stringify(STACK_FRAME_MIN_SIZE) " + 16)"
#ifndef CONFIG_PPC_KERNEL_PCREL
#define FTH_PPC_TOC_SAVE						\
	"	std	2, 24(1)\n"					\
	"	bcl	20, 31, 1f\n"					\
	"1:	mflr	12\n"						\
	"	ld	2, (99f - 1b)(12)\n"
#define FTH_PPC_TOC_RESTORE "	ld	2, 24(1)\n"
#define FTH_PPC_TOC "	.balign 8\n99:	.quad	.TOC.@tocbase\n"
#else
#define FTH_PPC_TOC_SAVE ""
#define FTH_PPC_TOC_RESTORE ""
#define FTH_PPC_TOC ""
#endif
#ifdef CONFIG_PPC_FTRACE_OUT_OF_LINE
#define FTH_PPC_RESTORE_LR "	ld	0, " __stringify(PPC_LR_STKOFF) "(1)\n	mtlr	0\n"
#define FTH_PPC_RET "	blr\n"
#else
#define FTH_PPC_RESTORE_LR "	ld	0, " __stringify(PPC_LR_STKOFF) "(1)\n	mtctr	0\n"
#define FTH_PPC_RET "	mtlr	0\n	bctr\n"
#endif
#define FTH_DIRECT_TRAMP(name)						\
	"	.type " #name ", @function\n"				\
	"	.globl " #name "\n"					\
	#name ":\n"							\
	"	std	0, " __stringify(PPC_LR_STKOFF) "(1)\n"		\
	"	stdu	1, -" __stringify(STACK_FRAME_MIN_SIZE) "(1)\n"	\
	"	mflr	0\n"						\
	"	std	0, " __stringify(PPC_LR_STKOFF) "(1)\n"		\
	"	stdu	1, -" FTH_PPC_FRAME "(1)\n"			\
	FTH_PPC_TOC_SAVE						\
	"	std	3, " __stringify(STACK_FRAME_MIN_SIZE) "(1)\n"	\
	"	std	4, (" __stringify(STACK_FRAME_MIN_SIZE) " + 8)(1)\n"	\
	"	bl	fth_direct_func\n"				\
	"	ld	3, " __stringify(STACK_FRAME_MIN_SIZE) "(1)\n"	\
	"	ld	4, (" __stringify(STACK_FRAME_MIN_SIZE) " + 8)(1)\n"	\
	FTH_PPC_TOC_RESTORE						\
	"	addi	1, 1, " FTH_PPC_FRAME "\n"			\
	FTH_PPC_RESTORE_LR						\
	"	addi	1, 1, " __stringify(STACK_FRAME_MIN_SIZE) "\n"	\
	"	ld	0, " __stringify(PPC_LR_STKOFF) "(1)\n"		\
	FTH_PPC_RET							\
	FTH_PPC_TOC							\
	"	.size " #name ", .-" #name "\n"
#define FTH_HAVE_DIRECT
#endif
#endif

#ifdef FTH_HAVE_DIRECT
void fth_direct_func(unsigned long caller, unsigned long n);
extern void fth_direct_tramp1(void *);
extern void fth_direct_tramp2(void *);

/*
 * Each trampoline starts 16-byte aligned. Under x86_64's
 * DYNAMIC_FTRACE_WITH_JMP (7.3) bit 0 of a direct address means "jump,
 * don't call": unaligned, the second trampoline started at an odd offset
 * (0xf), and a direct call moved to it jumped to the byte before it, the
 * first one's ret, so the traced function returned at its entry and no
 * call reached the user (docs/findings.md 7; the kernel's own
 * samples/ftrace/ftrace-direct-modify.c has the same flaw, finding 2).
 */
asm(
"	.pushsection	.text, \"ax\", @progbits\n"
"	.balign	16\n"
FTH_DIRECT_TRAMP(fth_direct_tramp1)
"	.balign	16\n"
FTH_DIRECT_TRAMP(fth_direct_tramp2)
"	.popsection\n"
);
#endif

/*
 * The users. The ftrace_ops variants are the ones the kernel dispatches
 * differently: a plain ops (CALL_OPS literal or x86 ops trampoline when
 * alone), SAVE_REGS (ftrace_regs_caller), IPMODIFY (livepatch's path, and
 * the one that must share with a direct call), RECURSION (called through
 * ftrace_ops_assist_func), and one ops on both functions.
 */
static struct fth_user users[] = {
	{ .name = "ops", .kind = K_OPS },
	{ .name = "ops-regs", .kind = K_OPS, .ops_flags = FTRACE_OPS_FL_SAVE_REGS },
	/* Redirects to a replacement, as livepatch does: ops_redirect_func. */
	{ .name = "ops-ipmodify", .kind = K_OPS, .ops_flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY },
	{ .name = "ops-recursion", .kind = K_OPS, .ops_flags = FTRACE_OPS_FL_RECURSION },
	{ .name = "ops-multi", .kind = K_OPS },
	/*
	 * Both functions in its filter and fth_deliver_other in its notrace
	 * hash: it traces fth_deliver_seq alone, and a list function that
	 * calls it for fth_deliver_other (another user's callsite) ignored
	 * the notrace hash (ftrace_ops_test()): a foreign call.
	 */
	{ .name = "ops-notrace", .kind = K_OPS },
	{ .name = "kprobe", .kind = K_KPROBE },
	{ .name = "kretprobe", .kind = K_KRETPROBE },
	{ .name = "fprobe", .kind = K_FPROBE },
	{ .name = "direct", .kind = K_DIRECT },
	/*
	 * A real livepatch (fth_klp.ko) replacing fth_deliver_seq with a copy
	 * that counts: klp's own IPMODIFY ops, its per-task transition, and
	 * the module's load and unload, all on the callsite the others share.
	 */
	{ .name = "livepatch", .kind = K_EXTERNAL },
};

static struct fth_user *livepatch_user;

/*
 * fth_deliver_record_livepatch is fth_klp.ko's replacement of
 * fth_deliver_seq reporting a call. fth_klp gets it with symbol_get(), so
 * it builds alone and holds this module while it is loaded.
 */
void fth_deliver_record_livepatch(unsigned long caller, unsigned long n);

void fth_deliver_record_livepatch(unsigned long caller, unsigned long n)
{
	record(livepatch_user, FN_SEQ, caller, n);
	WRITE_ONCE(sink, READ_ONCE(sink) + (caller ^ n));
}
EXPORT_SYMBOL_GPL(fth_deliver_record_livepatch);

#ifdef FTH_HAVE_DIRECT
static struct fth_user *direct_user;

void fth_direct_func(unsigned long caller, unsigned long n)
{
	record(direct_user, FN_SEQ, caller, n);
}
#endif

static struct fth_user *user_by_name(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(users); i++)
		if (!strcmp(users[i].name, name))
			return &users[i];
	return NULL;
}

static DEFINE_MUTEX(ctl_lock);

/* Findings: text lines the agent reads (and so consumes). */
static DEFINE_SPINLOCK(out_lock);
static char *findings;
static size_t findings_len;
static unsigned long findings_lost;

static __printf(1, 2) void finding(const char *fmt, ...)
{
	va_list ap;
	char line[256];
	int n;

	va_start(ap, fmt);
	n = vscnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	spin_lock(&out_lock);
	if (findings_len + n + 1 < FTH_FINDINGS) {
		memcpy(findings + findings_len, line, n);
		findings_len += n;
		findings[findings_len++] = '\n';
	} else {
		findings_lost++;
	}
	spin_unlock(&out_lock);
}

/* The transition log: a ring the agent drains. */
struct fth_transition {
	unsigned long id;
	char name[FTH_NAME];
	unsigned long begin_done[FTH_MAX_CALLERS], end_started[FTH_MAX_CALLERS];
	bool ended;
};

static struct fth_transition tlog[FTH_LOG];
static unsigned long tlog_next, tlog_read;

static unsigned long transition_begin(const char *name)
{
	unsigned long done[FTH_MAX_CALLERS], id;
	struct fth_transition *t;

	snap_done(done);
	spin_lock(&out_lock);
	id = tlog_next++;
	t = &tlog[id % FTH_LOG];
	t->id = id;
	strscpy(t->name, name, sizeof(t->name));
	memcpy(t->begin_done, done, sizeof(done));
	memset(t->end_started, 0, sizeof(t->end_started));
	t->ended = false;
	spin_unlock(&out_lock);
	return id;
}

static void transition_end_id(unsigned long id)
{
	unsigned long started[FTH_MAX_CALLERS];
	struct fth_transition *t;

	snap_started(started);
	spin_lock(&out_lock);
	t = &tlog[id % FTH_LOG];
	if (t->id == id) {
		memcpy(t->end_started, started, sizeof(started));
		t->ended = true;
	}
	spin_unlock(&out_lock);
}

static int transition_end_name(const char *name)
{
	unsigned long i;
	int ret = -ENOENT;

	spin_lock(&out_lock);
	for (i = tlog_next; i > 0 && tlog_next - i < FTH_LOG; i--) {
		struct fth_transition *t = &tlog[(i - 1) % FTH_LOG];

		if (!t->ended && !strcmp(t->name, name)) {
			ret = 0;
			spin_unlock(&out_lock);
			transition_end_id(i - 1);
			return ret;
		}
	}
	spin_unlock(&out_lock);
	return ret;
}

/*
 * Window start for fn: calls started after now must all arrive. The
 * tracks were reset before the user could record into them (never while a
 * callback may be writing one).
 */
static DEFINE_MUTEX(check_lock);

static void set_judging(struct fth_user *u, unsigned int bits)
{
	mutex_lock(&check_lock);
	u->judging = bits;
	mutex_unlock(&check_lock);
}

static void window_open(struct fth_user *u, unsigned int fn)
{
	snap_started(u->from[fn]);
	set_judging(u, u->judging | BIT(fn));
}

/*
 * window_check judges fn's window of u, closed at done (read before the
 * detach started; the detach has ended since).
 */
/*
 * sym_name names addr as kallsyms does ("sym", "sym+0x1c" inside one, the
 * address when none), without the size and the module suffix.
 */
static void sym_name(char *buf, size_t n, unsigned long addr)
{
	char *end;
	size_t len;

	snprintf(buf, n, "%pS", (void *)addr);
	end = strpbrk(buf, "/ ");
	if (end)
		*end = '\0';
	len = strlen(buf);
	if (len > 4 && !strcmp(buf + len - 4, "+0x0"))
		buf[len - 4] = '\0';
}

/*
 * target_name names what a callsite calls: kallsyms does not look ftrace's
 * per-ops trampolines (x86_64) up by address, so one of this module's
 * users' trampolines is named here, as it is now (a trampoline freed and
 * reallocated since the call would be misnamed).
 */
static void target_name(char *buf, size_t n, unsigned long addr)
{
	unsigned int i;

#if defined(CONFIG_PPC64)
	/* A module's callsites reach ftrace through its own stubs. */
	if (addr == THIS_MODULE->arch.tramp) {
		snprintf(buf, n, "module-stub-to-ftrace_caller");
		return;
	}
	if (addr == THIS_MODULE->arch.tramp_regs) {
		snprintf(buf, n, "module-stub-to-ftrace_regs_caller");
		return;
	}
#endif
	for (i = 0; i < ARRAY_SIZE(users); i++) {
		unsigned long t = READ_ONCE(users[i].ops.trampoline);

		if (t && addr >= t && addr < t + READ_ONCE(users[i].ops.trampoline_size)) {
			snprintf(buf, n, "trampoline-of-fth_deliver:%s", users[i].name);
			return;
		}
	}
	sym_name(buf, n, addr);
}

/* ops_name names an ops literal: one of this module's users, or kallsyms's. */
static void ops_name(char *buf, size_t n, unsigned long ops)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(users); i++)
		if (ops == (unsigned long)&users[i].ops) {
			snprintf(buf, n, "fth_deliver:%s", users[i].name);
			return;
		}
	sym_name(buf, n, ops);
}

/*
 * site_finding follows a miss with the callsite just before call k: its
 * instruction words (x86_64: bytes), what the live instruction calls, and
 * the ops literal ("-" where the arch has none):
 * "site <user> <fn> <caller> <k> <hex> <target> <literal>".
 */
static void site_finding(struct fth_user *u, unsigned int fn, unsigned int c, unsigned long k,
			 const struct fth_site *s)
{
	unsigned long ip = fn_ip[fn], target = 0;
	char hex[48], to[KSYM_NAME_LEN], lit[KSYM_NAME_LEN];
	const char *what = NULL;

	if (!k)
		return;
	strscpy(lit, "-", sizeof(lit));
#if defined(CONFIG_X86)
	{
		const u8 *b = (const u8 *)s->w;
		static const u8 nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

		snprintf(hex, sizeof(hex), "%5phN", b);
		if (b[0] == 0xe8 || b[0] == 0xe9)
			target = ip + 5 + (s32)get_unaligned((const u32 *)(b + 1));
		else if (!memcmp(b, nop5, 5))
			what = "nop";
		else if (b[0] == 0xcc)
			what = "int3";
	}
#elif defined(CONFIG_ARM64) || defined(CONFIG_RISCV)
	snprintf(hex, sizeof(hex), "%08x.%08x", s->w[0], s->w[1]);
	ops_name(lit, sizeof(lit), s->literal);
#if defined(CONFIG_ARM64)
	if (s->w[1] == 0xd503201f)
		what = "nop";
	else if ((s->w[1] & 0xfc000000) == 0x94000000)
		target = ip + sign_extend64((u64)(s->w[1] & 0x03ffffff) << 2, 27);
#else
	if (s->w[1] == 0x00000013)
		what = "nop";
	else if ((s->w[0] & 0x7f) == 0x17 && (s->w[1] & 0x7f) == 0x67)
		target = ip - 4 + (long)(s32)(s->w[0] & 0xfffff000) + sign_extend64(s->w[1] >> 20, 11);
#endif
#elif defined(CONFIG_PPC64)
	if (s->stub) {
		snprintf(hex, sizeof(hex), "%08x>%08x.%08x.%08x", s->w[0], s->w[1], s->w[2], s->w[3]);
		ops_name(lit, sizeof(lit), s->literal);
		/* The stub's second instruction: bl or nop. */
		if (s->w[2] == 0x60000000)
			what = "nop";
		else if ((s->w[2] >> 26) == 18 && (s->w[2] & 3) == 1)
			target = s->stub + 4 + sign_extend64(s->w[2] & 0x03fffffc, 25);
	} else {
		snprintf(hex, sizeof(hex), "%08x", s->w[0]);
		if (s->w[0] == 0x60000000)
			what = "nop";
	}
#else
	strscpy(hex, "-", sizeof(hex));
#endif
	if (target)
		target_name(to, sizeof(to), target);
	else
		strscpy(to, what ?: "?", sizeof(to));
	finding("site %s %s %u %lu %s %s %s", u->name, fn_names[fn], c, k, hex, to, lit);
}

/*
 * judge_gaps reports the gaps of t in the window (a, d] that no earlier
 * judgement reported, and whether the first call came late. A gap is
 * final once recorded (a later call was seen), so a checkpoint can judge
 * it while the user stays attached.
 */
static bool judge_gaps(struct fth_user *u, unsigned int fn, unsigned int c, struct fth_track *t,
		       unsigned long a, unsigned long d)
{
	unsigned int g, n;
	bool bad = false;

	if (READ_ONCE(t->seen) && !t->first_judged) {
		smp_rmb();
		t->first_judged = true;
		if (t->first > a + 1) {
			finding("miss %s %s %u %lu %lu %lu %lu", u->name, fn_names[fn], c, a + 1,
				min(t->first - 1, d), a, d);
			site_finding(u, fn, c, t->first_site_n, &t->first_site);
			bad = true;
		}
	}
	n = min(READ_ONCE(t->ngaps), (unsigned int)FTH_GAPS);
	smp_rmb();
	for (g = t->judged; g < n; g++) {
		unsigned long f = max(t->gap_from[g], a + 1), e = min(t->gap_to[g], d);

		if (f <= e) {
			finding("miss %s %s %u %lu %lu %lu %lu", u->name, fn_names[fn], c, f, e, a, d);
			site_finding(u, fn, c, t->gap_site_n[g], &t->gap_site[g]);
			bad = true;
		}
	}
	t->judged = n;
	return bad;
}

static void user_check_strays(struct fth_user *u);

/*
 * checkpoint judges every attached user's windows so far, so that a miss
 * is reported when it happens rather than at the user's detach.
 */
static void checkpoint(void)
{
	unsigned long done[FTH_MAX_CALLERS];
	unsigned int i, fn, c;

	/*
	 * Not under ctl_lock: a checkpoint must run while an attach waits
	 * for ftrace_lock (seconds, with thousands of trampolines attached).
	 */
	mutex_lock(&check_lock);
	snap_done(done);
	for (i = 0; i < ARRAY_SIZE(users); i++) {
		struct fth_user *u = &users[i];

		/* Calls after a detach or a refusal, reported as they come. */
		if (!READ_ONCE(u->live))
			user_check_strays(u);
		for (fn = 0; fn < FN_COUNT; fn++) {
			if (!(u->judging & BIT(fn)))
				continue;
			for (c = 0; c < ncallers; c++)
				if (done[c] > u->from[fn][c] &&
				    judge_gaps(u, fn, c, &u->t[fn][c], u->from[fn][c], done[c]))
					u->failed++;
		}
	}
	mutex_unlock(&check_lock);
}

static void window_check(struct fth_user *u, unsigned int fn, const unsigned long *done)
{
	unsigned int c;

	for (c = 0; c < ncallers; c++) {
		struct fth_track *t = &u->t[fn][c];
		unsigned long a = u->from[fn][c], d = done[c];
		bool bad = false;

		if (d <= a)
			continue;
		u->checked += d - a;
		if (!t->seen) {
			finding("miss %s %s %u %lu %lu %lu %lu", u->name, fn_names[fn], c, a + 1, d, a, d);
			bad = true;
		} else {
			bad = judge_gaps(u, fn, c, t, a, d);
			if (t->ngaps > FTH_GAPS) {
				finding("gaps %s %s %u %u %lu %lu", u->name, fn_names[fn], c, t->ngaps, a, d);
				bad = true;
			}
			if (t->last < d) {
				finding("miss %s %s %u %lu %lu %lu %lu", u->name, fn_names[fn], c,
					max(t->last + 1, a + 1), d, a, d);
				bad = true;
			}
			if (t->dups) {
				finding("dup %s %s %u %lu %lu %lu %lu", u->name, fn_names[fn], c, t->dup_n, t->dups, a, d);
				bad = true;
			}
		}
		if (bad)
			u->failed++;
	}
}

static void user_check_strays(struct fth_user *u)
{
	long n;

	n = atomic_long_xchg(&u->foreign, 0);
	if (n)
		finding("foreign %s %ld %#lx", u->name, n, READ_ONCE(u->foreign_ip));
	n = atomic_long_xchg(&u->late, 0);
	if (n)
		finding("late %s %ld", u->name, n);
	n = atomic_long_xchg(&u->stray, 0);
	if (n)
		finding("stray %s %ld", u->name, n);
}

static int attach(struct fth_user *u)
{
	int ret = -EOPNOTSUPP;

	switch (u->kind) {
	case K_OPS:
		ret = register_ftrace_function(&u->ops);
		break;
	case K_KPROBE:
		memset(&u->kp, 0, sizeof(u->kp));
		u->kp.symbol_name = fn_names[FN_SEQ];
		u->kp.pre_handler = kp_pre;
		ret = register_kprobe(&u->kp);
		break;
	case K_KRETPROBE:
		memset(&u->krp, 0, sizeof(u->krp));
		u->krp.kp.symbol_name = fn_names[FN_SEQ];
		u->krp.entry_handler = krp_entry;
		u->krp.handler = krp_ret;
		u->krp.data_size = sizeof(struct krp_data);
		u->krp.maxactive = 4 * FTH_MAX_CALLERS;
		ret = register_kretprobe(&u->krp);
		break;
	case K_DIRECT:
#ifdef FTH_HAVE_DIRECT
		/* register_ftrace_direct() wants an ops it never saw. */
		memset(&u->ops, 0, sizeof(u->ops));
		ret = ftrace_set_filter_ip(&u->ops, fn_addr(FN_SEQ), 0, 1);
		if (ret)
			break;
		u->direct_addr = (unsigned long)fth_direct_tramp1;
		/* Bit 0 asks x86_64 7.3 for a jump: see the trampolines. */
		if (WARN_ON_ONCE(((unsigned long)fth_direct_tramp1 | (unsigned long)fth_direct_tramp2) & 1)) {
			ret = -EINVAL;
			ftrace_free_filter(&u->ops);
			break;
		}
		ret = register_ftrace_direct(&u->ops, u->direct_addr);
		if (ret)
			ftrace_free_filter(&u->ops);
#endif
		break;
	case K_FPROBE:
#ifdef CONFIG_FPROBE
		memset(&u->fp, 0, sizeof(u->fp));
		u->fp.entry_handler = fp_entry;
		{
			unsigned long addr = fn_addr(FN_SEQ);

			ret = register_fprobe_ips(&u->fp, &addr, 1);
		}
#endif
		break;
	case K_EXTERNAL:
		/* Its own module attaches it: user_external. */
		break;
	}
	return ret;
}

static void detach(struct fth_user *u)
{
	switch (u->kind) {
	case K_OPS:
		unregister_ftrace_function(&u->ops);
		break;
	case K_KPROBE:
		unregister_kprobe(&u->kp);
		break;
	case K_KRETPROBE:
		unregister_kretprobe(&u->krp);
		break;
	case K_FPROBE:
#ifdef CONFIG_FPROBE
		unregister_fprobe(&u->fp);
#endif
		break;
	case K_DIRECT:
#ifdef FTH_HAVE_DIRECT
		unregister_ftrace_direct(&u->ops, u->direct_addr, true);
#endif
		break;
	case K_EXTERNAL:
		break;
	}
}

/*
 * user_modify moves the direct user to its other trampoline
 * (modify_ftrace_direct): its window stays open, and both trampolines
 * count for it, so no call may be lost meanwhile.
 */
static int user_modify(struct fth_user *u)
{
#ifdef FTH_HAVE_DIRECT
	unsigned long to, id;
	int ret;

	if (u->kind != K_DIRECT)
		return -EOPNOTSUPP;
	if (!u->live)
		return -EINVAL;
	to = u->direct_addr == (unsigned long)fth_direct_tramp1 ?
		(unsigned long)fth_direct_tramp2 : (unsigned long)fth_direct_tramp1;
	id = transition_begin("modify direct");
	ret = modify_ftrace_direct(&u->ops, to);
	transition_end_id(id);
	if (!ret)
		u->direct_addr = to;
	return ret;
#else
	return -EOPNOTSUPP;
#endif
}

/*
 * An attach in two halves, so that an external user's attach (the agent
 * loading a module) can run between them: the window opens at the end.
 */
static int user_on_begin(struct fth_user *u)
{
	char name[FTH_NAME];

	if (u->skip)
		return -EOPNOTSUPP;
	if (u->live)
		return -EBUSY;
	snprintf(name, sizeof(name), "attach %s", u->name);
	memset(u->t, 0, sizeof(u->t));
	WRITE_ONCE(u->refused, false);
	smp_wmb();
	WRITE_ONCE(u->live, true);
	u->tid = transition_begin(name);
	return 0;
}

static void user_on_end(struct fth_user *u, int ret)
{
	unsigned int fn;

	transition_end_id(u->tid);
	if (ret) {
		WRITE_ONCE(u->refused, true);
		smp_wmb();
		WRITE_ONCE(u->live, false);
		return;
	}
	u->attaches++;
	for (fn = 0; fn < FN_COUNT; fn++)
		if (u->mask & BIT(fn))
			window_open(u, fn);
}

static int user_on(struct fth_user *u)
{
	int ret;

	if (u->kind == K_EXTERNAL)
		return -EOPNOTSUPP;
	ret = user_on_begin(u);
	if (ret)
		return ret;
	ret = attach(u);
	user_on_end(u, ret);
	return ret;
}

/* A detach in two halves: the window closes at the beginning. */
static int user_off_begin(struct fth_user *u)
{
	char name[FTH_NAME];

	if (!u->live)
		return -EINVAL;
	snprintf(name, sizeof(name), "detach %s", u->name);
	set_judging(u, 0);
	snap_done(u->done_at);
	u->tid = transition_begin(name);
	return 0;
}

static void user_off_end(struct fth_user *u)
{
	unsigned int fn;

	transition_end_id(u->tid);
	WRITE_ONCE(u->live, false);
	for (fn = 0; fn < FN_COUNT; fn++)
		if (u->mask & BIT(fn))
			window_check(u, fn, u->done_at);
	user_check_strays(u);
}

static int user_off(struct fth_user *u)
{
	int ret;

	if (u->kind == K_EXTERNAL)
		return -EOPNOTSUPP;
	ret = user_off_begin(u);
	if (ret)
		return ret;
	detach(u);
	user_off_end(u);
	return 0;
}

/*
 * user_external runs one half of an external user's attach or detach:
 * "attach-begin", "attach-end" (the attach worked), "attach-abort" (it
 * failed: nothing attached), "detach-begin", "detach-end".
 */
static int user_external(struct fth_user *u, const char *cmd)
{
	int ret;

	if (u->kind != K_EXTERNAL)
		return -EOPNOTSUPP;
	if (!strcmp(cmd, "attach-begin")) {
		if (u->phase != P_NONE)
			return -EBUSY;
		ret = user_on_begin(u);
		if (!ret)
			u->phase = P_ATTACHING;
		return ret;
	}
	if (!strcmp(cmd, "attach-end") || !strcmp(cmd, "attach-abort")) {
		if (u->phase != P_ATTACHING)
			return -EINVAL;
		u->phase = P_NONE;
		user_on_end(u, cmd[7] == 'e' ? 0 : -ECANCELED);
		return 0;
	}
	if (!strcmp(cmd, "detach-begin")) {
		if (u->phase != P_NONE)
			return -EBUSY;
		ret = user_off_begin(u);
		if (!ret)
			u->phase = P_DETACHING;
		return ret;
	}
	if (!strcmp(cmd, "detach-end")) {
		if (u->phase != P_DETACHING)
			return -EINVAL;
		u->phase = P_NONE;
		user_off_end(u);
		return 0;
	}
	return -EINVAL;
}

/*
 * user_filter adds fth_deliver_other to an ftrace_ops user's filter or
 * removes it, while the user may be attached: for fth_deliver_seq that is
 * another user's transition (its window stays open), for
 * fth_deliver_other the user's own attach or detach.
 */
static int user_filter(struct fth_user *u, bool add)
{
	unsigned long done[FTH_MAX_CALLERS], id;
	char name[FTH_NAME];
	int ret;

	if (u->kind != K_OPS || !strcmp(u->name, "ops-notrace"))
		return -EOPNOTSUPP;
	if (add == !!(u->mask & BIT(FN_OTHER)))
		return -EALREADY;
	snprintf(name, sizeof(name), "filter %s %s %s", add ? "add" : "remove", fn_names[FN_OTHER], u->name);
	if (!add)
		set_judging(u, u->judging & ~BIT(FN_OTHER));
	snap_done(done);
	if (add) {
		memset(u->t[FN_OTHER], 0, sizeof(u->t[FN_OTHER]));
		smp_wmb();
		WRITE_ONCE(u->mask, u->mask | BIT(FN_OTHER));
	}
	id = transition_begin(name);
	ret = ftrace_set_filter_ip(&u->ops, fn_addr(FN_OTHER), !add, 0);
	transition_end_id(id);
	if (ret) {
		if (add)
			WRITE_ONCE(u->mask, u->mask & ~BIT(FN_OTHER));
		return ret;
	}
	if (!u->live) {
		if (!add)
			WRITE_ONCE(u->mask, u->mask & ~BIT(FN_OTHER));
		return 0;
	}
	if (add) {
		window_open(u, FN_OTHER);
	} else {
		/* Callbacks still in flight may see the old filter: wait. */
		synchronize_rcu_tasks_rude();
		synchronize_rcu();
		WRITE_ONCE(u->mask, u->mask & ~BIT(FN_OTHER));
		window_check(u, FN_OTHER, done);
	}
	return 0;
}

static ssize_t ctl_write(struct file *file, const char __user *ubuf, size_t count, loff_t *ppos)
{
	char buf[96], cmd[16], arg[FTH_NAME], arg2[FTH_NAME];
	struct fth_user *u;
	unsigned int n;
	int ret, fields;

	if (count >= sizeof(buf))
		return -E2BIG;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = 0;
	arg[0] = arg2[0] = 0;
	fields = sscanf(buf, "%15s %47s %47s", cmd, arg, arg2);
	if (fields < 1)
		return -EINVAL;

	if (!strcmp(cmd, "begin") && fields >= 2) {
		/* The agent's own transitions: the rest of the line is the name. */
		char *name = strim(buf + strlen("begin"));

		transition_begin(name);
		return count;
	}
	if (!strcmp(cmd, "check") && fields == 1) {
		checkpoint();
		return count;
	}
	if (!strcmp(cmd, "end") && fields >= 2) {
		ret = transition_end_name(strim(buf + strlen("end")));
		return ret ? ret : count;
	}

	mutex_lock(&ctl_lock);
	if (!strcmp(cmd, "run") && fields == 2 && !kstrtouint(arg, 10, &n)) {
		WRITE_ONCE(running, !!n);
		ret = 0;
	} else if (!strcmp(cmd, "sabotage") && fields == 2 && !kstrtouint(arg, 10, &n)) {
		sabotage_n = n;
		ret = 0;
	} else if ((!strcmp(cmd, "attach") || !strcmp(cmd, "detach")) && fields == 2) {
		u = user_by_name(arg);
		ret = !u ? -ENOENT : cmd[0] == 'a' ? user_on(u) : user_off(u);
	} else if (!strncmp(cmd, "attach-", 7) || !strncmp(cmd, "detach-", 7)) {
		u = fields == 2 ? user_by_name(arg) : NULL;
		ret = !u ? -ENOENT : user_external(u, cmd);
	} else if (!strcmp(cmd, "modify") && fields == 2) {
		u = user_by_name(arg);
		ret = !u ? -ENOENT : user_modify(u);
	} else if (!strcmp(cmd, "filter") && fields == 3) {
		u = user_by_name(arg2);
		ret = !u ? -ENOENT : user_filter(u, !strcmp(arg, "add"));
	} else {
		ret = -EINVAL;
	}
	mutex_unlock(&ctl_lock);
	return ret ? ret : count;
}

static const struct file_operations ctl_fops = {
	.owner = THIS_MODULE,
	.write = ctl_write,
	.llseek = noop_llseek,
};

/* calls: "<caller> <started> <done>" per caller. */
static int calls_show(struct seq_file *m, void *v)
{
	unsigned long s[FTH_MAX_CALLERS], d[FTH_MAX_CALLERS];
	unsigned int c;

	/* done first: a call it counts is in started too. */
	snap_done(d);
	snap_started(s);
	for (c = 0; c < ncallers; c++)
		seq_printf(m, "%u %lu %lu\n", c, s[c], d[c]);
	return 0;
}

/* users: one line per user with its state and totals. */
static int users_show(struct seq_file *m, void *v)
{
	unsigned int i;

	mutex_lock(&ctl_lock);
	for (i = 0; i < ARRAY_SIZE(users); i++) {
		struct fth_user *u = &users[i];

		seq_printf(m, "%s live=%d external=%d mask=%u attaches=%lu checked=%lu failed=%lu dropped=%ld noargs=%ld skip=%s\n",
			   u->name, u->live, u->kind == K_EXTERNAL, u->mask, u->attaches, u->checked, u->failed,
			   atomic_long_read(&u->dropped), atomic_long_read(&u->noargs),
			   u->skip ? u->skip : "-");
	}
	mutex_unlock(&ctl_lock);
	return 0;
}

/* findings and transitions are drained by reading them whole. */
static ssize_t findings_read(struct file *file, char __user *ubuf, size_t count, loff_t *ppos)
{
	char *out;
	size_t n;
	ssize_t ret;

	out = kvmalloc(FTH_FINDINGS + 64, GFP_KERNEL);
	if (!out)
		return -ENOMEM;
	spin_lock(&out_lock);
	n = min(findings_len, count);
	memcpy(out, findings, n);
	memmove(findings, findings + n, findings_len - n);
	findings_len -= n;
	if (findings_lost && n + 32 < count) {
		n += scnprintf(out + n, 32, "lost %lu\n", findings_lost);
		findings_lost = 0;
	}
	spin_unlock(&out_lock);
	ret = copy_to_user(ubuf, out, n) ? -EFAULT : n;
	kvfree(out);
	return ret;
}

static ssize_t transitions_read(struct file *file, char __user *ubuf, size_t count, loff_t *ppos)
{
	char *out;
	size_t n = 0;
	ssize_t ret;

	out = kvmalloc(count + 1, GFP_KERNEL);
	if (!out)
		return -ENOMEM;
	spin_lock(&out_lock);
	if (tlog_next - tlog_read > FTH_LOG) {
		n += scnprintf(out + n, count - n, "lost %lu\n", tlog_next - tlog_read - FTH_LOG);
		tlog_read = tlog_next - FTH_LOG;
	}
	/* Only ended transitions, in order: the rest waits for a later read. */
	while (tlog_read < tlog_next) {
		struct fth_transition *t = &tlog[tlog_read % FTH_LOG];
		char line[64 + FTH_NAME + 2 * 22 * FTH_MAX_CALLERS];
		unsigned int c, l;

		if (!t->ended)
			break;
		l = scnprintf(line, sizeof(line), "%lu", t->id);
		for (c = 0; c < ncallers; c++)
			l += scnprintf(line + l, sizeof(line) - l, " %lu:%lu", t->begin_done[c], t->end_started[c]);
		l += scnprintf(line + l, sizeof(line) - l, " %s\n", t->name);
		if (n + l > count)
			break;
		memcpy(out + n, line, l);
		n += l;
		tlog_read++;
	}
	spin_unlock(&out_lock);
	ret = copy_to_user(ubuf, out, n) ? -EFAULT : n;
	kvfree(out);
	return ret;
}

static const struct file_operations findings_fops = {
	.owner = THIS_MODULE,
	.read = findings_read,
	.llseek = noop_llseek,
};

static const struct file_operations transitions_fops = {
	.owner = THIS_MODULE,
	.read = transitions_read,
	.llseek = noop_llseek,
};

DEFINE_SHOW_ATTRIBUTE(calls);
DEFINE_SHOW_ATTRIBUTE(users);

static struct dentry *dir;

/* learn_ip finds the address ftrace hands callbacks for fn. */
static unsigned long learnt;

static void learn_func(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		       struct ftrace_regs *fregs)
{
	WRITE_ONCE(learnt, ip);
}

static int learn_ip(unsigned int fn)
{
	struct ftrace_ops ops = { .func = learn_func };
	int ret;

	ret = ftrace_set_filter_ip(&ops, fn_addr(fn), 0, 1);
	if (ret)
		return ret;
	WRITE_ONCE(learnt, 0);
	ret = register_ftrace_function(&ops);
	if (!ret) {
		if (fn == FN_SEQ)
			fth_deliver_seq(FTH_MAX_CALLERS, 0);
		else
			fth_deliver_other(FTH_MAX_CALLERS, 0);
		unregister_ftrace_function(&ops);
	}
	ftrace_free_filter(&ops);
	fn_ip[fn] = READ_ONCE(learnt);
	return ret ? ret : fn_ip[fn] ? 0 : -ENOENT;
}

static void stop_callers(void)
{
	unsigned int c;

	WRITE_ONCE(running, false);
	for (c = 0; c < ncallers; c++)
		if (!IS_ERR_OR_NULL(callers[c].task))
			kthread_stop(callers[c].task);
}

static void detach_all(void)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(users); i++) {
		if (users[i].live) {
			detach(&users[i]);
			WRITE_ONCE(users[i].live, false);
		}
		if (users[i].kind == K_OPS)
			ftrace_free_filter(&users[i].ops);
	}
}

static int __init fth_deliver_init(void)
{
	unsigned int i, fn;
	int cpu, ret;

	findings = kvzalloc(FTH_FINDINGS, GFP_KERNEL);
	if (!findings)
		return -ENOMEM;
	for (fn = 0; fn < FN_COUNT; fn++) {
		ret = learn_ip(fn);
		if (ret) {
			pr_err("fth_deliver: cannot learn %s's callsite: %d\n", fn_names[fn], ret);
			kvfree(findings);
			return ret;
		}
	}
#ifdef FTH_HAVE_DIRECT
	direct_user = user_by_name("direct");
#endif
	livepatch_user = user_by_name("livepatch");
	for (i = 0; i < ARRAY_SIZE(users); i++) {
		struct fth_user *u = &users[i];

		u->mask = BIT(FN_SEQ);
		if (u->kind == K_OPS) {
			u->ops.func = ops_func;
			if (u->ops_flags & FTRACE_OPS_FL_IPMODIFY) {
				u->ops.func = ops_redirect_func;
				redirect_user = u;
			}
			u->ops.flags = u->ops_flags;
			ret = ftrace_set_filter_ip(&u->ops, fn_addr(FN_SEQ), 0, 1);
			if (!ret && !strcmp(u->name, "ops-multi")) {
				ret = ftrace_set_filter_ip(&u->ops, fn_addr(FN_OTHER), 0, 0);
				u->mask |= BIT(FN_OTHER);
			}
			if (!ret && !strcmp(u->name, "ops-notrace")) {
				char other[FTH_NAME];

				/* Its mask stays fth_deliver_seq alone. */
				strscpy(other, fn_names[FN_OTHER], sizeof(other));
				ret = ftrace_set_filter_ip(&u->ops, fn_addr(FN_OTHER), 0, 0);
				if (!ret)
					ret = ftrace_set_notrace(&u->ops, other, strlen(other), 1);
			}
			if (ret)
				u->skip = "ftrace_set_filter failed";
		}
#ifndef CONFIG_DYNAMIC_FTRACE_WITH_REGS
		/*
		 * Livepatch's ops asks for SAVE_REGS only where the arch has no
		 * DYNAMIC_FTRACE_WITH_ARGS: with arguments the callback can move
		 * the instruction pointer anyway, so ops-ipmodify does the same
		 * (arm64, riscv64) rather than be skipped.
		 */
		if (IS_ENABLED(CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS) && (u->ops_flags & FTRACE_OPS_FL_IPMODIFY))
			u->ops.flags &= ~FTRACE_OPS_FL_SAVE_REGS;
		/* register_ftrace_function() refuses SAVE_REGS with -EINVAL. */
		else if (u->ops_flags & FTRACE_OPS_FL_SAVE_REGS)
			u->skip = "no DYNAMIC_FTRACE_WITH_REGS: the arch passes arguments, not pt_regs (SAVE_REGS refused)";
#endif
#ifndef FTH_HAVE_DIRECT
		if (u->kind == K_DIRECT)
			u->skip = IS_ENABLED(CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS) ?
				"no counting direct trampoline written for this arch (x86_64, arm64, riscv64, ppc64le have one)" :
				"no DYNAMIC_FTRACE_WITH_DIRECT_CALLS";
#endif
#ifndef CONFIG_FPROBE
		if (u->kind == K_FPROBE)
			u->skip = "no CONFIG_FPROBE";
#endif
#ifndef CONFIG_KRETPROBES
		if (u->kind == K_KRETPROBE)
			u->skip = "no CONFIG_KRETPROBES";
#endif
#if !defined(CONFIG_HAVE_LIVEPATCH)
		if (u == livepatch_user)
			u->skip = "no livepatch on this arch (no HAVE_LIVEPATCH)";
#elif !defined(CONFIG_LIVEPATCH)
		if (u == livepatch_user)
			u->skip = "no CONFIG_LIVEPATCH in this kernel";
#endif
	}
	for_each_online_cpu(cpu) {
		struct fth_caller *c;

		if (ncallers == FTH_MAX_CALLERS)
			break;
		c = &callers[ncallers];
		/*
		 * Not kthread_create_on_cpu(): a per-CPU kthread stays on its
		 * CPU through a hot-unplug, which then waits for it forever
		 * (the churn takes CPUs offline). An affinity is broken by the
		 * unplug instead, and the caller goes on elsewhere.
		 */
		c->task = kthread_create(caller_fn, c, "fth_deliver/%u", cpu);
		if (!IS_ERR(c->task))
			set_cpus_allowed_ptr(c->task, cpumask_of(cpu));
		if (IS_ERR(c->task)) {
			ret = PTR_ERR(c->task);
			stop_callers();
			detach_all();
			kvfree(findings);
			return ret;
		}
		ncallers++;
		wake_up_process(c->task);
	}
	dir = debugfs_create_dir("fth_deliver", NULL);
	debugfs_create_file("ctl", 0200, dir, NULL, &ctl_fops);
	debugfs_create_file("calls", 0400, dir, NULL, &calls_fops);
	debugfs_create_file("users", 0400, dir, NULL, &users_fops);
	debugfs_create_file("findings", 0400, dir, NULL, &findings_fops);
	debugfs_create_file("transitions", 0400, dir, NULL, &transitions_fops);
	return 0;
}

static void __exit fth_deliver_exit(void)
{
	debugfs_remove_recursive(dir);
	stop_callers();
	detach_all();
	kvfree(findings);
}

module_init(fth_deliver_init);
module_exit(fth_deliver_exit);
MODULE_DESCRIPTION("ftrace-harness delivery oracle: callers numbering their calls, users counting them");
MODULE_LICENSE("GPL");
