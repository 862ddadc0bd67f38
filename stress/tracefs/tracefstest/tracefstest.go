// Package tracefstest gives tests a directory that stands in for
// /sys/kernel/tracing, so tracer code runs without a kernel.
package tracefstest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ftrace-harness/fth/stress/tracefs"
)

// New returns a temporary tracing directory holding the control files the
// agent writes (current_tracer, set_ftrace_filter, kprobe_events), empty.
func New(t testing.TB) tracefs.FS {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{"current_tracer", "set_ftrace_filter", "kprobe_events"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tracefs.New(root)
}
