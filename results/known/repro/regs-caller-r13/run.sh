#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer (powerpc64): ftrace_regs_caller restores r13, the paca, from
# pt_regs after a handler that may have been preempted and migrated.
#
# Usage: ./run.sh [control]
#
# Puts kprobes on the entry of vfs_read() and vfs_write(): on a kernel
# with DYNAMIC_FTRACE_WITH_REGS a kprobe at a function's entry is a
# SAVE_REGS ftrace_ops, called through ftrace_regs_caller. Four tasks then
# copy /dev/zero to /dev/null a byte at a time (dd bs=1) for
# $SECONDS_TO_RUN seconds (default: 60), so that timer interrupts preempt
# them in ftrace_regs_caller and the scheduler moves them between CPUs. A task preempted there and moved to another CPU takes the first
# CPU's paca back into r13: "BUG: scheduling while atomic" with a preempt
# count the task never raised, then faults in code that reads the wrong
# CPU's data. "control" uses the function tracer on the same functions
# instead, which ftrace_caller calls without saving r13.
#
# Exit status: 0 the kernel survived; 2 the reproducer could not run.

t=/sys/kernel/tracing
if [ ! -e $t/kprobe_events ]; then
	t=/sys/kernel/debug/tracing
fi
if [ ! -e $t/kprobe_events ]; then
	echo "no tracefs: mount -t tracefs nodev /sys/kernel/tracing"
	exit 2
fi
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
funcs="vfs_read vfs_write"

if [ "$1" = control ]; then
	for f in $funcs; do
		echo $f >> $t/set_ftrace_filter || exit 2
	done
	echo function > $t/current_tracer || exit 2
	echo "function tracer on: $funcs (ftrace_caller, no regs)"
else
	for f in $funcs; do
		if ! echo "p:r13_$f $f" >> $t/kprobe_events; then
			echo "cannot put a kprobe on $f"
			exit 2
		fi
	done
	echo 1 > $t/events/kprobes/enable || exit 2
	echo "kprobes on: $funcs (ftrace_regs_caller)"
fi

stop=$here/stop
rm -f "$stop"
shell=/bin/sh
if [ -x /bbin/gosh ]; then
	shell=/bbin/gosh
fi
if [ -r /sys/kernel/debug/kprobes/list ]; then
	cat /sys/kernel/debug/kprobes/list
fi
i=0
while [ $i -lt 4 ]; do
	$shell -c "while [ ! -e $stop ]; do dd if=/dev/zero of=/dev/null bs=1 count=100000 2> /dev/null; done" &
	i=$((i + 1))
done
sleep "${SECONDS_TO_RUN:-60}"
echo > "$stop"
sleep 2
if [ "$1" != control ]; then
	cat $t/kprobe_profile
fi

if [ "$1" = control ]; then
	echo nop > $t/current_tracer
	echo > $t/set_ftrace_filter
else
	echo 0 > $t/events/kprobes/enable
	echo > $t/kprobe_events
fi
echo "${SECONDS_TO_RUN:-60} s of one-byte reads and writes: the kernel survived"
exit 0
