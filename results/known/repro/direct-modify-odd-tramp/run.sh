#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: samples/ftrace/ftrace-direct-modify.ko hangs x86_64 since
# DYNAMIC_FTRACE_WITH_JMP, because its second trampoline, my_tramp2, sits
# at an odd address and bit 0 of a direct-call address means "jmp".
#
# Usage: ./run.sh [control]
#
# Loads the sample (from $MODDIR, else the running kernel's
# kernel/samples/ftrace), leaves it loaded for $HOLD seconds (default: 3,
# past the sample kthread's first modify_ftrace_direct() at 2 s) and
# unloads it, $ROUNDS times (default: 20), while two tasks sleep and wake
# all the time. When the kthread moves schedule()'s direct call to
# my_tramp2, the callsite becomes a jmp to my_tramp2 - 1, which is
# my_tramp1's ret: schedule() returns at its entry and every task that
# waits spins. The kernel locks up (soft lockups, RCU stalls, hung tasks)
# and this script stops printing. "control" cycles ftrace-direct.ko
# instead, whose one trampoline is at offset 0 of its text.
#
# Exit status: 0 the kernel survived; 2 the reproducer could not run.

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
moddir=${MODDIR:-/lib/modules/$(uname -r)/kernel/samples/ftrace}
sample=ftrace-direct-modify
module=ftrace_direct_modify
if [ "$1" = control ]; then
	sample=ftrace-direct
	module=ftrace_direct
fi
ko=$moddir/$sample.ko
if [ ! -e "$ko" ]; then
	echo "$ko: not found (CONFIG_SAMPLE_FTRACE_DIRECT=m; set MODDIR)"
	exit 2
fi

# Two tasks that sleep and wake, until the stop file appears.
stop=$here/stop
rm -f "$stop"
shell=/bin/sh
if [ -x /bbin/gosh ]; then
	shell=/bbin/gosh
fi
$shell -c "while [ ! -e $stop ]; do sleep 0.01; done" &
$shell -c "while [ ! -e $stop ]; do sleep 0.01; done" &

i=0
while [ $i -lt "${ROUNDS:-20}" ]; do
	i=$((i + 1))
	if ! insmod "$ko"; then
		echo > "$stop"
		echo "insmod $ko failed"
		exit 2
	fi
	sleep "${HOLD:-3}"
	if ! rmmod $module; then
		echo > "$stop"
		echo "rmmod $module failed"
		exit 2
	fi
	echo "round $i: $sample loaded for ${HOLD:-3} s and unloaded"
done
echo > "$stop"
echo "$i rounds of $sample: the kernel survived"
exit 0
