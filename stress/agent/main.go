// Command agent is the ftrace-harness guest agent. Started by u-root's init
// inside the test VM, it attaches thousands of BPF fentry trampolines while
// threads hammer preemption and migration, and streams JSON-line events (see
// package wire/event) to the host over the virtio-serial port fth.agent.
//
// Options come from fth.<name>=<value> keys on the kernel command line and
// from flags (see package wire/options); run with -h for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], realSystem())
	stop()
	os.Exit(exitCode(err))
}

// exitCode maps run's error to the process exit status.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		return 1
	}
}
