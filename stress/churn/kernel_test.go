package churn

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/stress/tracefs/tracefstest"
	"github.com/ftrace-harness/fth/stress/tracers"
)

func TestRealTracefsSide(t *testing.T) {
	top := tracefstest.New(t)
	r := NewReal(&oracle.Loader{}, tracers.NewFiltered(top, tracefs.Function), top)

	// No events/fth/vfs_read/enable: arming fails, and the probe just
	// defined is deleted again.
	if err := r.KprobeOn("vfs_read"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("KprobeOn = %v, want ENOENT", err)
	}
	if b, _ := os.ReadFile(filepath.Join(top.Root, "kprobe_events")); string(b) != "p:fth/vfs_read vfs_read\n-:fth/vfs_read\n" {
		t.Errorf("kprobe_events = %q", b)
	}
	enable := filepath.Join(top.Root, "events", "fth", "vfs_read", "enable")
	if err := os.MkdirAll(filepath.Dir(enable), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(enable, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.KprobeOn("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(enable); string(b) != "1\n" {
		t.Errorf("enable after KprobeOn = %q", b)
	}
	if err := r.KprobeOff("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(enable); string(b) != "0\n" {
		t.Errorf("enable after KprobeOff = %q", b)
	}

	if err := r.FtraceOn("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if err := r.KprobeOn("vfs_read"); err != nil {
		t.Fatal(err)
	}
	// Close resets the tracer and deletes every fth probe.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(top.Root, "current_tracer")); string(b) != "nop\n" {
		t.Errorf("current_tracer after Close = %q", b)
	}
	if b, _ := os.ReadFile(enable); string(b) != "0\n" {
		t.Errorf("enable after Close = %q", b)
	}
	// An unchecked loader: Check has nothing to compare.
	if res, err := r.Check("vfs_read"); err != nil || res != nil {
		t.Errorf("Check = %v, %v", res, err)
	}
	if _, err := r.Link(Prog{Func: "x"}); err == nil {
		t.Error("Link of a Prog without a program succeeded")
	}
}
