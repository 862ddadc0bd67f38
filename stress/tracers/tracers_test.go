package tracers

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/stress/tracefs/tracefstest"
)

func read(t *testing.T, fs tracefs.FS, f string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fs.Root, f))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFiltered(t *testing.T) {
	fs := tracefstest.New(t)
	f := NewFiltered(fs, tracefs.Function)
	steps := []struct {
		do             func() error
		tracer, filter string
	}{
		// First user: filter written and read back, then the tracer.
		{func() error { return f.Add("vfs_read") }, "function\n", "vfs_read\n"},
		// Second function: appended to the live filter.
		{func() error { return f.Add("do_nanosleep") }, "function\n", "vfs_read\ndo_nanosleep\n"},
		// A second user of the same function changes nothing.
		{func() error { return f.Add("vfs_read") }, "function\n", "vfs_read\ndo_nanosleep\n"},
		{func() error { return f.Remove("vfs_read") }, "function\n", "vfs_read\ndo_nanosleep\n"},
		// Its last user: removed from the live filter, tracer stays on.
		{func() error { return f.Remove("vfs_read") }, "function\n", "vfs_read\ndo_nanosleep\n!vfs_read\n"},
		// The last function: tracer off, then the filter emptied.
		{func() error { return f.Remove("do_nanosleep") }, "nop\n", ""},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := read(t, fs, "current_tracer"); got != s.tracer {
			t.Errorf("step %d: current_tracer = %q, want %q", i, got, s.tracer)
		}
		if got := read(t, fs, "set_ftrace_filter"); got != s.filter {
			t.Errorf("step %d: set_ftrace_filter = %q, want %q", i, got, s.filter)
		}
	}
	if err := f.Remove("vfs_read"); err == nil {
		t.Error("Remove without Add succeeded")
	}
	if err := f.Add("ksys_read"); err != nil {
		t.Fatal(err)
	}
	if a := f.Active(); len(a) != 1 || a[0] != "ksys_read" {
		t.Errorf("Active = %v", a)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if read(t, fs, "current_tracer") != "nop\n" || read(t, fs, "set_ftrace_filter") != "" || len(f.Active()) != 0 {
		t.Error("Close did not reset")
	}
}

func TestFilteredNeverTracesAll(t *testing.T) {
	fs := tracefstest.New(t)
	// set_ftrace_filter that cannot be written: the tracer must stay off.
	if err := os.Remove(filepath.Join(fs.Root, "set_ftrace_filter")); err != nil {
		t.Fatal(err)
	}
	f := NewFiltered(fs, tracefs.Function)
	if err := f.Add("vfs_read"); err == nil {
		t.Fatal("Add succeeded without a filter file")
	}
	if got := read(t, fs, "current_tracer"); got != "" {
		t.Errorf("current_tracer = %q after a failed filter write", got)
	}
}

func TestMixed(t *testing.T) {
	top := tracefstest.New(t)
	inst := tracefstest.New(t)
	rec := tally.New(nil, -1)
	var mem emit.Memory
	m := &Mixed{
		Top: top, Inst: &inst, Group: "fth",
		Pool:     []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"},
		MinPause: time.Microsecond, MaxPause: 10 * time.Microsecond,
		Rec: rec, Emit: &mem,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx, rand.New(rand.NewPCG(7, 7))) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		on, _ := rec.Get("mixed_function_on")
		off, _ := rec.Get("mixed_function_off")
		add, _ := rec.Get("mixed_kprobe_add")
		if on.Succeeded > 2 && off.Succeeded > 2 && add.Succeeded > 2 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		// The temp dir has no events/*/enable files: disarming fails
		// with ENOENT, which cleanup tolerates.
		t.Fatalf("Run = %v", err)
	}
	if got := read(t, inst, "current_tracer"); !strings.HasSuffix(got, "nop\n") {
		t.Errorf("instance tracer at the end = %q", got)
	}
	if got := read(t, inst, "set_ftrace_filter"); got != "" {
		t.Errorf("instance filter at the end = %q", got)
	}
	// Every probe added was removed.
	added, removed := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(read(t, top, "kprobe_events"), "\n") {
		switch {
		case strings.HasPrefix(line, "-:"):
			removed[strings.TrimPrefix(line, "-:")]++
		case line != "":
			p := tracefs.ParseProbes(line)
			if len(p) != 1 || p[0].Group != "fth" || !(strings.HasPrefix(p[0].Event, KprobePrefix) || strings.HasPrefix(p[0].Event, KretprobePrefix)) {
				t.Errorf("unexpected probe line %q", line)
				continue
			}
			added[p[0].Group+"/"+p[0].Event]++
		}
	}
	if len(added) == 0 {
		t.Fatal("no probes added")
	}
	for k, n := range added {
		if removed[k] != n {
			t.Errorf("probe %s added %d times, removed %d", k, n, removed[k])
		}
	}
	for _, p := range rec.Summaries() {
		if strings.HasSuffix(p.Name, "_on") && p.Failed > 0 {
			t.Errorf("%s failed: %+v", p.Name, p)
		}
	}
}

func TestMixedEmptyPool(t *testing.T) {
	if err := (&Mixed{}).Run(context.Background(), rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("Run with an empty pool succeeded")
	}
}
