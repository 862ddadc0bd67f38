package racer

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Threads the runtime starts while SetProcessCPUs runs must end up pinned
// too: a racer whose writing thread escaped its pinning called from the
// wrong CPU for a whole run.
func TestSetProcessCPUsPinsThreadsStartedMeanwhile(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < 1024 && cpu < 0; i++ {
		if all.IsSet(i) {
			cpu = i
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	t.Cleanup(func() {
		if err := SetProcessCPUs(&all, 0); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	for round := 0; round < 20; round++ {
		// Goroutines that end locked to their thread make the runtime
		// retire it and start others, from whichever thread runs.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					done := make(chan struct{})
					go func() { runtime.LockOSThread(); close(done) }()
					<-done
				}
			}()
		}
		err := SetProcessCPUs(&one, 0)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		tids, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range tids {
			tid, _ := strconv.Atoi(d.Name())
			var got unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &got); err != nil {
				continue // retired since the listing
			}
			if got != one {
				t.Fatalf("round %d: thread %d has %d CPU(s) after SetProcessCPUs, want CPU %d alone", round, tid, got.Count(), cpu)
			}
		}
		if err := SetProcessCPUs(&all, 0); err != nil {
			t.Fatal(err)
		}
	}
}
