#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: a BPF fentry program on rcu_read_unlock_special() recurses
# until the stack overflows.
#
# Usage: ./run.sh [control]
#
# Runs fentry_rcu_unlock (from $MODDIR, default: this script's
# directory), which attaches an empty fentry program to
# rcu_read_unlock_special() and keeps tasks blocking and waking for 10 s.
# On a CONFIG_PREEMPT_RCU kernel the first reader that leaves its
# critical section with special state set enters the trampoline, whose
# exit path calls rcu_read_unlock() and so rcu_read_unlock_special()
# again: the kernel crashes within a second and this script never
# returns. "control" attaches to rcu_note_context_switch() instead.
#
# Exit status: 0 the kernel survived (or rejected the program), 2 the
# reproducer could not run.

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
MODDIR=${MODDIR:-$here}

"$MODDIR/fentry_rcu_unlock" $1
