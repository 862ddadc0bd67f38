#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: removing a function probe from one function frees that
# function's ftrace_func_mapper entry at once, while the probe's callback
# for another function may be walking the same bucket.
#
# Usage: ./run.sh [control]
#
# Puts an enable_event probe (set_ftrace_filter's
# func:enable_event:sched:sched_switch) on vfs_write, which a loop of
# writes calls all the time, then on the first traceable function whose
# ip falls in vfs_write's bucket of the probe's mapper (hash_long(ip, 10)):
# its entry goes in at the bucket's head, so that every vfs_write call
# walks past it. It then removes the probe from that function and puts it
# back, $ROUNDS times (default: 30), while the writes go on. "control"
# uses a function of another bucket instead.
#
# Exit status: 0 the kernel survived; 2 the reproducer could not run. A
# kernel with the bug faults in the walk, best seen with slab_debug=P
# (freed objects poisoned): "general protection fault ... 0x6b6b6b6b6b6b6b7b"
# in ftrace_lookup_ip() or, with the debug patch, ftrace_func_mapper_find_ip().
#
# The window is the free after synchronize_rcu(). To hit it on most runs,
# build with ftrace-race-delay.patch and boot with ftrace_race_delay_ms=20
# slab_debug=P.

t=/sys/kernel/tracing
if [ ! -e $t/set_ftrace_filter ]; then
	t=/sys/kernel/debug/tracing
fi
if [ ! -e $t/set_ftrace_filter ]; then
	echo "no tracefs: mount -t tracefs nodev /sys/kernel/tracing"
	exit 2
fi
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
control=0
if [ "$1" = control ]; then
	control=1
fi
reader=vfs_write
probe=enable_event:sched:sched_switch

# bucket ADDR: hash_long(ADDR, 10) on a 64-bit kernel, the bucket of
# ftrace_hash_key() in a mapper's hash of 1024 (FTRACE_HASH_DEFAULT_BITS).
bucket() {
	hi=$(printf %d 0x${1%????????})
	lo=$(printf %d 0x${1#????????})
	echo $(( ((hi * 4294967296 + lo) * 7046029254386353131 >> 54) & 1023 ))
}

addr=
while read -r a name mod; do
	if [ "$name" = $reader ] && [ -z "$mod" ]; then
		addr=$a
		break
	fi
done < $t/available_filter_functions_addrs
if [ -z "$addr" ]; then
	echo "$reader is not traceable here"
	exit 2
fi
want=$(bucket $addr)
other=
n=0
while read -r a name mod; do
	n=$((n + 1))
	[ -n "$mod" ] && continue
	[ "$name" = $reader ] && continue
	case $name in
	*.*) continue ;;
	esac
	b=$(bucket $a)
	if [ $control = 0 ] && [ "$b" = "$want" ]; then
		other=$name
		break
	fi
	if [ $control = 1 ] && [ "$b" != "$want" ]; then
		other=$name
		break
	fi
done < $t/available_filter_functions_addrs
if [ -z "$other" ]; then
	echo "no other function found"
	exit 2
fi
echo "$reader at $addr, bucket $want; the other function: $other (bucket $(bucket $a), line $n)"
knob=/sys/module/kernel/parameters/ftrace_race_delay_ms
if [ -r $knob ]; then
	echo "ftrace_race_delay_ms=$(cat $knob)"
fi

# Two writers in processes of their own, until the stop file appears.
stop=$here/stop
rm -f $stop
shell=/bin/sh
if [ -x /bbin/gosh ]; then
	shell=/bbin/gosh
fi
$shell -c "while [ ! -e $stop ]; do echo x > /dev/null; done" &
$shell -c "while [ ! -e $stop ]; do echo x > /dev/null; done" &
sleep 1

if ! echo "$reader:$probe" >> $t/set_ftrace_filter; then
	echo > $stop
	echo "cannot set a probe on $reader"
	exit 2
fi
i=0
while [ $i -lt ${ROUNDS:-30} ]; do
	echo "$other:$probe" >> $t/set_ftrace_filter
	echo "!$other:$probe" >> $t/set_ftrace_filter
	i=$((i + 1))
done
echo "!$reader:$probe" >> $t/set_ftrace_filter
echo > $stop
echo "$i removals of the probe from $other while $reader was called: the kernel survived"
exit 0
