#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: unregister_ftrace_direct() frees a direct_functions entry
# while tracefs's enabled_functions walks the same bucket to look up
# another direct call.
#
# Usage: ./run.sh [control]
#
# Picks two traceable functions whose ips share a bucket of a
# direct_functions hash of four (hash_long(ip, 2): two direct calls make
# four buckets), starts two readers of enabled_functions, and loads
# direct_cycle.ko (from $MODDIR, default: this script's directory), which
# keeps a direct call on the first function and registers and
# unregisters one on the second, $ROUNDS times (default: 100). The second
# one's entry goes in at the bucket's head, so a lookup of the first walks
# past it. "control" takes two functions of different buckets.
#
# Exit status: 0 the kernel survived; 2 the reproducer could not run. A
# kernel with the bug faults in the walk, best seen with slab_debug=P
# (freed objects poisoned): "general protection fault ...
# 0x6b6b6b6b6b6b6b7b" in t_show() or ftrace_find_rec_direct().
#
# To hit the window on most runs, build with ftrace-race-delay.patch and
# boot with ftrace_race_delay_ms=20 slab_debug=P.

t=/sys/kernel/tracing
if [ ! -e $t/enabled_functions ]; then
	t=/sys/kernel/debug/tracing
fi
if [ ! -e $t/enabled_functions ]; then
	echo "no tracefs: mount -t tracefs nodev /sys/kernel/tracing"
	exit 2
fi
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
moddir=${MODDIR:-$here}
control=0
if [ "$1" = control ]; then
	control=1
fi

# bucket ADDR BITS: hash_long(ADDR, BITS) on a 64-bit kernel, the bucket
# of ftrace_hash_key() in a hash of 1 << BITS.
bucket() {
	hi=$(printf %d 0x${1%????????})
	lo=$(printf %d 0x${1#????????})
	echo $(( ((hi * 4294967296 + lo) * 7046029254386353131 >> (64 - $2)) & ((1 << $2) - 1) ))
}

keep=
cycle=
while read -r a name mod; do
	[ -n "$mod" ] && continue
	case $name in
	*.*|__traceiter_*|__probestub_*) continue ;;
	esac
	b=$(bucket $a 2)
	if [ -z "$keep" ]; then
		keep=$name
		want=$b
		continue
	fi
	if [ $control = 0 ] && [ "$b" = "$want" ]; then
		cycle=$name
		break
	fi
	if [ $control = 1 ] && [ "$b" != "$want" ]; then
		cycle=$name
		break
	fi
done < $t/available_filter_functions_addrs
if [ -z "$cycle" ]; then
	echo "no pair of functions found"
	exit 2
fi
echo "direct calls on $keep (kept) and $cycle (cycled), buckets $want and $b of 4"
knob=/sys/module/kernel/parameters/ftrace_race_delay_ms
if [ -r $knob ]; then
	echo "ftrace_race_delay_ms=$(cat $knob)"
fi

# Two readers in processes of their own, until the stop file appears.
stop=$here/stop
rm -f $stop
shell=/bin/sh
if [ -x /bbin/gosh ]; then
	shell=/bbin/gosh
fi
$shell -c "while [ ! -e $stop ]; do cat $t/enabled_functions > /dev/null; done" &
$shell -c "while [ ! -e $stop ]; do cat $t/enabled_functions > /dev/null; done" &
sleep 1

insmod "$moddir/direct_cycle.ko" keep=$keep cycle=$cycle rounds=${ROUNDS:-100}
err=$?
echo > $stop
if [ $err != 0 ]; then
	echo "insmod $moddir/direct_cycle.ko failed"
	exit 2
fi
rounds=$(cat /sys/module/direct_cycle/parameters/done)
rmmod direct_cycle
echo "$rounds unregistrations on $cycle while enabled_functions was read: the kernel survived"
exit 0
