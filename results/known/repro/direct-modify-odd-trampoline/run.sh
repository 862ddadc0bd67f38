#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: samples/ftrace/ftrace-direct-modify.ko hangs an x86_64
# kernel with DYNAMIC_FTRACE_WITH_JMP: its second trampoline starts at an
# odd address, which the kernel takes as "jump, don't call".
#
# Usage: ./run.sh [control]
#
# Loads ftrace-direct-modify.ko from $MODDIR (default: this script's
# directory; the module is built with the kernel, samples/ftrace/), waits
# 20 seconds while the sample's kthread moves the direct call on
# schedule() between its two trampolines every 2 seconds, and unloads it.
# "control" loads ftrace-direct.ko instead, whose one trampoline is at
# the start of its text.
#
# Exit status: 0 the module came and went; 2 it could not be loaded. A
# kernel with the bug does not get that far: schedule() returns at its
# entry and the machine locks up within seconds (soft lockups, workqueue
# lockups, "rcu_preempt kthread starved").

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
moddir=${MODDIR:-$here}
mod=ftrace-direct-modify
if [ "$1" = control ]; then
	mod=ftrace-direct
fi

if ! insmod "$moddir/$mod.ko"; then
	echo "insmod $moddir/$mod.ko failed"
	exit 2
fi
echo "$mod loaded; waiting 20 s"
sleep 20
if [ $mod = ftrace-direct-modify ]; then
	rmmod ftrace_direct_modify
else
	rmmod ftrace_direct
fi
echo "$mod loaded for 20 s and unloaded: no hang"
exit 0
