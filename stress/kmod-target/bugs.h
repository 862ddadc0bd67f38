/* SPDX-License-Identifier: GPL-2.0 */
#ifndef FTH_TARGET_BUGS_H
#define FTH_TARGET_BUGS_H

struct dentry;

/* fth_bugs_init adds the "bug" file (bugs.c) under dir. */
void fth_bugs_init(struct dentry *dir);

/* fth_bug_double_fault is in df.c, which objtool does not check. */
int fth_bug_double_fault(void);

#endif
