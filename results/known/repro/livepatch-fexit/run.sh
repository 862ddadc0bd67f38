#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: on powerpc64 a BPF fexit program is not called while a
# livepatch of its function is applied.
#
# Usage: ./run.sh [control|fentry]
#
# Runs livepatch_fexit (from $MODDIR, default: this script's directory),
# which counts the calls of cmdline_proc_show() with a BPF fexit program
# while /proc/cmdline is read, alone, then with
# samples/livepatch/livepatch-sample.ko applied in both orders: loaded
# after the program, and loaded alone before the program is attached.
# "control" leaves the livepatch out; "fentry" counts with an fentry
# program instead.
#
# Exit status: 0 every read counted, or the kernel refused the pair; 1
# reads made with both in place were not counted; 2 the reproducer could
# not run.

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
MODDIR=${MODDIR:-$here}
export MODDIR

exec "$MODDIR/livepatch_fexit" $1
