// SPDX-License-Identifier: GPL-2.0
/*
 * crash=bug:double-fault (bugs.c's table): a double fault that is not a
 * stack overflow. The stack pointer is made non-canonical, then ud2: the
 * CPU cannot push the #UD frame, nor the #SS frame that follows, and #SS
 * during #SS is a double fault, delivered on its own IST stack, where the
 * kernel prints "PANIC: double fault". objtool rejects the stack switch,
 * so this file is built without it (Kbuild); where objtool runs on the
 * linked module instead (x86_64 with LIVEPATCH selects KLP_BUILD, which
 * delays objtool to the link), the function is marked as non-standard.
 */
#include <linux/errno.h>
#include <linux/compiler.h>
#include <linux/objtool.h>

#include "bugs.h"

noinline int fth_bug_double_fault(void)
{
#ifdef CONFIG_X86_64
	asm volatile("mov %0, %%rsp\n\tud2" : : "r"(0x8000000000000000UL) : "memory");
	unreachable();
#else
	return -EOPNOTSUPP;
#endif
}
STACK_FRAME_NON_STANDARD(fth_bug_double_fault);
