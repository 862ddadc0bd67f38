/* SPDX-License-Identifier: GPL-2.0 */
#ifndef FTH_TARGET_BUGS_H
#define FTH_TARGET_BUGS_H

struct dentry;

/* fth_bugs_init adds the "bug" file (bugs.c) under dir. */
void fth_bugs_init(struct dentry *dir);

#endif
