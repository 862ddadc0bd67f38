// SPDX-License-Identifier: GPL-2.0
/*
 * fth_scale: 32,768 traceable functions, so that a storm or a scaling curve
 * can hold 40,000 trampolines on a kernel whose own attachable functions
 * are fewer (16,161 in the x86_64 minimal config). Each is a real ftrace
 * call site with its own BTF FUNC, attached through the module's BTF
 * exactly as a vmlinux function is; the bodies differ by a constant so
 * that the compiler's identical-code folding cannot merge them.
 *
 * Nothing calls them: what the scale work measures is the cost of
 * attaching and detaching, and the call sites of vmlinux stay busy under
 * the hammer.
 */
#include <linux/module.h>
#include <linux/compiler.h>

#define F(n) noinline int fth_scale_##n(int x); noinline int fth_scale_##n(int x) { return x + 0x##n; }
#define H1(p) F(p##0) F(p##1) F(p##2) F(p##3) F(p##4) F(p##5) F(p##6) F(p##7) \
	F(p##8) F(p##9) F(p##a) F(p##b) F(p##c) F(p##d) F(p##e) F(p##f)
#define H2(p) H1(p##0) H1(p##1) H1(p##2) H1(p##3) H1(p##4) H1(p##5) H1(p##6) H1(p##7) \
	H1(p##8) H1(p##9) H1(p##a) H1(p##b) H1(p##c) H1(p##d) H1(p##e) H1(p##f)
#define H3(p) H2(p##0) H2(p##1) H2(p##2) H2(p##3) H2(p##4) H2(p##5) H2(p##6) H2(p##7) \
	H2(p##8) H2(p##9) H2(p##a) H2(p##b) H2(p##c) H2(p##d) H2(p##e) H2(p##f)

/* fth_scale_0000 ... fth_scale_7fff */
H3(0) H3(1) H3(2) H3(3) H3(4) H3(5) H3(6) H3(7)

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("ftrace-harness: 32,768 traceable functions for scale runs");
