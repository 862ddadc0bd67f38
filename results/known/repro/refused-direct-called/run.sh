#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: a direct call refused by ftrace_startup() is still taken
# after register_ftrace_direct() has returned the refusal.
#
# Usage: ./run.sh [control]
#
# Loads refused_direct.ko (from $MODDIR, default: this script's
# directory), which puts a plain and an IPMODIFY ftrace_ops on a function
# of its own, calls that function from one kthread per CPU, and tries
# register_ftrace_direct() on it $ATTEMPTS times (default: 50). Every
# attempt is refused; the module counts the calls its trampoline gets
# after a refusal was returned. "control" makes the second ops a plain
# one: every attempt is then accepted, and the callers must reach the
# trampoline through the list function.
#
# Exit status: 0 no call after a refusal (control: the trampoline was
# reached), 1 the bug, 2 the reproducer could not run or judge.
#
# A plain kernel meets the window a few times in 50 attempts. To meet it
# on most attempts, build the kernel with ftrace-race-delay.patch and boot
# it with ftrace_race_delay_ms=20 (or write 20 to
# /sys/module/kernel/parameters/ftrace_race_delay_ms before this script).

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
moddir=${MODDIR:-$here}
ipmodify=1
if [ "$1" = control ]; then
	ipmodify=0
fi

knob=/sys/module/kernel/parameters/ftrace_race_delay_ms
if [ -r $knob ]; then
	echo "ftrace_race_delay_ms=$(cat $knob)"
else
	echo "no ftrace_race_delay_ms in this kernel: the window is not widened"
fi

if ! insmod "$moddir/refused_direct.ko" ipmodify=$ipmodify attempts=${ATTEMPTS:-50}; then
	echo "insmod $moddir/refused_direct.ko failed"
	exit 2
fi
p=/sys/module/refused_direct/parameters
accepted=$(cat $p/accepted)
refused=$(cat $p/refused)
attached=$(cat $p/attached)
during=$(cat $p/during)
stray=$(cat $p/stray)
rmmod refused_direct 2>/dev/null || echo "refused_direct stays loaded: ftrace was disabled (see the kernel log's WARNING)"
echo "register_ftrace_direct(): $accepted accepted, $refused refused; trampoline calls: $attached while registered, $during during a registration, $stray after a refusal"

if [ $ipmodify = 0 ]; then
	if [ "$attached" -eq 0 ]; then
		echo "control: no call reached the direct trampoline; this kernel cannot judge the reproducer"
		exit 2
	fi
	echo "control: the callers reach the direct trampoline through the list function"
	exit 0
fi
if [ "$accepted" -ne 0 ]; then
	echo "a direct ops without ops_func was accepted beside an IPMODIFY ops; nothing to judge"
	exit 2
fi
if [ "$stray" -ne 0 ]; then
	echo "FAIL: direct trampoline called after register_ftrace_direct() returned an error"
	exit 1
fi
echo "no call after a refusal"
exit 0
