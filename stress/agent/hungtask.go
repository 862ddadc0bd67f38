package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/wire/options"
)

const (
	hungTaskTimeoutPath = "/proc/sys/kernel/hung_task_timeout_secs"
	dsleepPath          = "/sys/kernel/debug/fth_target/dsleep"
	// dsleepMS outlasts any cell that reaches it: the host, not the sleep,
	// must end the cell.
	dsleepMS = 20 * 60 * 1000
)

// injectHungTask is crash=hung-task: it leaves one agent thread asleep in D
// state inside fth_target, with the hung task timeout lowered so that the
// kernel reports it within seconds, and returns at once so that the rest of
// the agent goes on talking to the host.
func injectHungTask(modDir string) error {
	if err := os.WriteFile(hungTaskTimeoutPath, []byte(strconv.Itoa(options.HungTaskTimeout)), 0); err != nil {
		return fmt.Errorf("lower the hung task timeout: %w (the kernel needs CONFIG_DETECT_HUNG_TASK)", err)
	}
	if err := fthtarget.Load(modDir, ""); err != nil {
		return fmt.Errorf("load %s, which holds the file to sleep in: %w (the kernel needs CONFIG_MODULES)", filepath.Join(modDir, fthtarget.Module+".ko"), err)
	}
	f, err := os.OpenFile(dsleepPath, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("%w (an fth_target.ko older than crash=hung-task, or debugfs not mounted?)", err)
	}
	go func() {
		// The write returns only when the sleep ends; by then the host has
		// long ended the cell. The runtime gives the blocked thread's work
		// to another one meanwhile.
		_, _ = f.WriteString(strconv.Itoa(dsleepMS))
		f.Close()
	}()
	return nil
}
