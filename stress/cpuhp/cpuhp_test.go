package cpuhp

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/stress/tally"
)

func fakeCPUs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []string{"cpu0", "cpu1", "cpu2", "cpufreq", "cpuidle"} {
		if err := os.Mkdir(filepath.Join(dir, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"cpu1", "cpu2"} {
		if err := os.WriteFile(filepath.Join(dir, c, "online"), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHotpluggable(t *testing.T) {
	dir := fakeCPUs(t)
	if got := Hotpluggable(dir); !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("Hotpluggable = %v", got)
	}
	if f := Feature(dir); !f.Supported || f.Name != "cpu_hotplug" {
		t.Errorf("Feature = %+v", f)
	}
	if f := Feature(filepath.Join(dir, "none")); f.Supported {
		t.Errorf("Feature of a missing dir = %+v", f)
	}
}

func TestToggler(t *testing.T) {
	dir := fakeCPUs(t)
	rec := tally.New(nil, -1)
	tg := &Toggler{Dir: dir, CPUs: []int{1, 2}, Rec: rec}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tg.Run(ctx, 4*time.Millisecond, rand.New(rand.NewPCG(1, 1)))
	off, _ := rec.Get(OpOffline)
	on, _ := rec.Get(OpOnline)
	if off.Succeeded == 0 || off.Succeeded != on.Succeeded {
		t.Errorf("offline %+v, online %+v", off, on)
	}
	for _, c := range []string{"cpu1", "cpu2"} {
		if b, _ := os.ReadFile(filepath.Join(dir, c, "online")); string(b) != "1\n" {
			t.Errorf("%s left %q", c, b)
		}
	}
}
