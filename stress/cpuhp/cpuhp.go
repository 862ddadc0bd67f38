// Package cpuhp takes CPUs offline and back online while the churn runs.
// Offlining a CPU runs stop_machine and migrates every task off it, while
// text patching must still reach it: another way to widen the windows the
// harness looks for.
package cpuhp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/wire/event"
)

// DefaultDir is where the CPU devices are.
const DefaultDir = "/sys/devices/system/cpu"

// Transition names.
const (
	OpOffline = "cpu_offline"
	OpOnline  = "cpu_online"
)

// Hotpluggable lists the CPUs under dir that have an online file: the
// kernel gives none to CPUs it cannot unplug (usually CPU 0), and none at
// all without CONFIG_HOTPLUG_CPU.
func Hotpluggable(dir string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), "cpu")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "online")); err == nil {
			out = append(out, id)
		}
	}
	sort.Ints(out)
	return out
}

// Feature reports whether CPU hotplug is available under dir.
func Feature(dir string) event.Feature {
	cpus := Hotpluggable(dir)
	f := event.Feature{Name: "cpu_hotplug", Supported: len(cpus) > 0}
	if f.Supported {
		f.Msg = fmt.Sprintf("cpus with an online file: %v", cpus)
	} else {
		f.Msg = "no cpuN/online file (CONFIG_HOTPLUG_CPU off, or only unpluggable CPUs)"
	}
	return f
}

// Toggler offlines one CPU at a time and brings it back.
type Toggler struct {
	Dir  string
	CPUs []int
	Rec  *tally.Recorder
}

func (t *Toggler) set(cpu int, online bool) error {
	p := filepath.Join(t.Dir, fmt.Sprintf("cpu%d", cpu), "online")
	v := "0\n"
	if online {
		v = "1\n"
	}
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cpuhp: open %s: %w", p, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(v)); err != nil {
		return fmt.Errorf("cpuhp: write %q to %s: %w", strings.TrimSpace(v), p, err)
	}
	return nil
}

// Run offlines a random CPU for half of every, brings it back online for
// the other half, and repeats until ctx is done. Only one CPU is ever
// offline, and it is back online when Run returns.
func (t *Toggler) Run(ctx context.Context, every time.Duration, rng *rand.Rand) {
	if len(t.CPUs) == 0 || every <= 0 {
		return
	}
	half := every / 2
	for {
		if !ctxsleep.Sleep(ctx, half) {
			return
		}
		cpu := t.CPUs[rng.IntN(len(t.CPUs))]
		if err := t.Rec.Time(OpOffline, strconv.Itoa(cpu), func() error { return t.set(cpu, false) }); err != nil {
			continue
		}
		ctxsleep.Sleep(ctx, half)
		// Back online even when ctx is done: a CPU left offline would
		// change every later run on this boot.
		_ = t.Rec.Time(OpOnline, strconv.Itoa(cpu), func() error { return t.set(cpu, true) })
		if ctx.Err() != nil {
			return
		}
	}
}
