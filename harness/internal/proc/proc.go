// Package proc starts child processes that cannot outlive the harness's
// interest in them: each gets its own process group, and cancelling the context
// kills the whole group (make's compiler children, or QEMU).
package proc

import (
	"context"
	"os/exec"
	"syscall"
	"time"
)

// Command is exec.CommandContext, except that cancellation signals the whole
// process group, SIGTERM first and SIGKILL after grace, and the child dies with
// the harness even if the harness is killed with SIGKILL (Pdeathsig).
func Command(ctx context.Context, grace time.Duration, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	cmd.WaitDelay = grace
	return cmd
}

// KillGroup sends SIGKILL to the process group led by cmd, if it started.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
