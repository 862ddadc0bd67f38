#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Reproducer: update_ftrace_direct_mod() asks BPF trampolines it does not
# modify to share IPMODIFY.
#
# Usage: ./run.sh [control]
#        ./run.sh mid-update [control]
#
# Runs ipmodify_share (from $MODDIR, default: this script's directory),
# which attaches a BPF fexit program to cmdline_proc_show(), loads
# ipmodify_redirect.ko (an IPMODIFY ftrace_ops on version_proc_show()),
# adds cmdline_proc_show() to that ops' filter after it registered, then
# attaches two fentry programs to version_proc_show(): the second
# modifies that trampoline, and update_ftrace_direct_mod() asks every
# function of the shared direct ops to share IPMODIFY, the fexit
# trampoline of cmdline_proc_show() included. "control" registers the
# ops with both functions in its filter (as livepatch does): the
# registration's handshake rebuilds the fexit trampoline first.
#
# "mid-update" takes the other way in: a fexit program attached to
# cmdline_proc_show(), whose fentry trampoline was registered after the
# IPMODIFY ops, while other trampolines are modified for 3 s; with
# bpf-tramp-race-delay.patch the fexit's update sleeps 2 s after it has
# rebuilt the trampoline's flags. "mid-update control" attaches the
# fentry before the ops registers.
#
# Exit status: 0 no warning, every attach accepted and the redirect
# taken, 1 the bug (a warning, a refused attach or the redirect
# bypassed), 2 the reproducer could not run.

case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
MODDIR=${MODDIR:-$here}
export MODDIR

before=$(dmesg | grep -c 'WARNING:.*bpf_tramp_ftrace_ops_func')
"$MODDIR/ipmodify_share" "$@"
status=$?
after=$(dmesg | grep -c 'WARNING:.*bpf_tramp_ftrace_ops_func')

if [ $status -eq 2 ]; then
	exit 2
fi
if [ "$after" -ne "$before" ]; then
	echo "FAIL: WARNING in bpf_tramp_ftrace_ops_func"
	exit 1
fi
if [ $status -ne 0 ]; then
	exit 1
fi
echo "no warning, every attach accepted, the redirect taken"
exit 0
