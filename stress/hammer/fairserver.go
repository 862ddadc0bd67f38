package hammer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/options"
)

// FairServerDir is where Linux (6.12 and later) exposes each CPU's fair
// server: the deadline server that runs SCHED_OTHER tasks for runtime out
// of every period while real-time tasks would otherwise keep the CPU.
const FairServerDir = "/sys/kernel/debug/sched/fair_server"

// DefaultFairShare is the share of each CPU the hammer reserves for
// SCHED_OTHER tasks while its real-time threads run: the options'
// default, whose doc says why it is larger than the kernel's.
const DefaultFairShare = options.DefaultRTReserve / 100.0

// fairReserve raises every CPU's fair server runtime to share of its
// period and returns a function that puts the old values back. A kernel
// without fair servers (before 6.12) has RT throttling instead, which the
// hammer leaves alone: the error says so and the caller records it.
func fairReserve(dir string, share float64) (restore func(), err error) {
	cpus, err := filepath.Glob(filepath.Join(dir, "cpu*"))
	if err != nil || len(cpus) == 0 {
		return func() {}, fmt.Errorf("no fair servers under %s (a kernel before 6.12 throttles RT tasks instead)", dir)
	}
	type old struct {
		path string
		val  string
	}
	var saved []old
	restore = func() {
		for _, o := range saved {
			_ = os.WriteFile(o.path, []byte(o.val), 0)
		}
	}
	for _, c := range cpus {
		period, err := readNs(filepath.Join(c, "period"))
		if err != nil {
			restore()
			return func() {}, err
		}
		rt := filepath.Join(c, "runtime")
		cur, err := os.ReadFile(rt)
		if err != nil {
			restore()
			return func() {}, err
		}
		want := time.Duration(float64(period) * share)
		if err := os.WriteFile(rt, []byte(strconv.FormatInt(int64(want), 10)), 0); err != nil {
			restore()
			return func() {}, fmt.Errorf("fair server %s: runtime %s: %w", filepath.Base(c), want, err)
		}
		saved = append(saved, old{rt, strings.TrimSpace(string(cur))})
	}
	return restore, nil
}

func readNs(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return time.Duration(n), nil
}

// FairServerOff sets the fair server runtime of cpu to zero and returns a
// function that puts the old value back: the race scenario's preemptor
// must keep its CPU for the whole window, or the fair server would run the
// preempted SCHED_OTHER task beside it within a tick (measured: the task
// ran on 150 ms into a 400 ms window on 7.3.4). A kernel without fair
// servers has nothing to turn off.
func FairServerOff(dir string, cpu int) (restore func(), err error) {
	rt := filepath.Join(dir, fmt.Sprintf("cpu%d", cpu), "runtime")
	cur, err := os.ReadFile(rt)
	if err != nil {
		return func() {}, fmt.Errorf("no fair server for cpu %d (%w): a kernel before 6.12 throttles RT tasks instead", cpu, err)
	}
	if err := os.WriteFile(rt, []byte("0"), 0); err != nil {
		return func() {}, fmt.Errorf("fair server cpu%d: runtime 0: %w", cpu, err)
	}
	return func() { _ = os.WriteFile(rt, []byte(strings.TrimSpace(string(cur))), 0) }, nil
}
