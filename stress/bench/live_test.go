package bench

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests below run the measuring loops for real, briefly: they need no
// VM, only a Linux host, and skip what the host does not allow.

func TestTimeSyscall(t *testing.T) {
	runs, err := timeSyscall(benchCPU(), 2000, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	for _, ns := range runs {
		if ns <= 0 || ns > 1e7 {
			t.Errorf("%v ns per getppid is not a measurement", ns)
		}
	}
}

func TestMeasureWakeup(t *testing.T) {
	t0 := time.Now()
	s, err := measureWakeup(context.Background(), benchCPU(), 50*time.Millisecond)
	elapsed := time.Since(t0)
	if errors.Is(err, unix.EPERM) {
		t.Skipf("no SCHED_FIFO here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// At least the 50 periods asked for, minus a few at the edges; never
	// more periods than really elapsed (a loaded host wakes late at the
	// end, and those overruns count too).
	if n := s.Samples + s.Overruns; n < 45 || n > int64(elapsed/time.Millisecond)+1 {
		t.Errorf("%d samples + %d overruns in %v of 1 ms periods (asked for 50 ms)", s.Samples, s.Overruns, elapsed)
	}
	if s.Min < 0 || s.Max < s.P50 || s.P50 < s.Min {
		t.Errorf("percentiles out of order: %+v", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := measureWakeup(ctx, benchCPU(), time.Second); !errors.Is(err, context.Canceled) && !errors.Is(err, unix.EPERM) {
		t.Errorf("canceled: err = %v", err)
	}
}

func TestKmsgReader(t *testing.T) {
	k, err := openKmsg(DefaultKmsg)
	if err != nil {
		t.Skipf("no readable %s: %v", DefaultKmsg, err)
	}
	defer k.close()
	// Nothing is expected: after SEEK_END only new records come, and
	// the reader must give up at the deadline rather than block.
	t0 := time.Now()
	if _, err := k.until(time.Now().Add(50*time.Millisecond), func([]string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("until blocked for %v", d)
	}
	if _, err := openKmsg("/nonexistent/kmsg"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing device: err = %v", err)
	}
}
