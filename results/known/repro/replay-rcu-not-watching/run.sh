#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: a BPF fentry program on replay_soft_interrupts() runs with
# RCU not watching (powerpc64).
#
# Usage: ./run.sh [control]
#
# Runs fentry_replay (from $MODDIR, default: this script's directory),
# which attaches an empty fentry program to replay_soft_interrupts() and
# keeps two tasks on two CPUs waking each other for 20 s; then looks in
# the kernel log for lockdep's "RCU not watching for tracepoint" (it
# needs CONFIG_LOCKDEP, which CONFIG_DEBUG_LOCK_ALLOC selects). "control"
# attaches to hrtimer_interrupt() instead.
#
# Exit status: 0 no warning (or the attach refused with EOPNOTSUPP: the
# function is not traceable, as with the fix), 1 the bug, 2 the
# reproducer could not run.

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
MODDIR=${MODDIR:-$here}

before=$(dmesg | grep -c 'RCU not watching')
"$MODDIR/fentry_replay" "$@"
status=$?
after=$(dmesg | grep -c 'RCU not watching')

if [ $status -ne 0 ]; then
	exit 2
fi
if [ "$after" -ne "$before" ]; then
	dmesg | grep -A 12 'RCU not watching' | head -40
	echo "FAIL: BPF trampoline entered with RCU not watching"
	exit 1
fi
echo "no warning"
exit 0
