package bisect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The lock of a bisection's place is exclusive: a second bisection waits,
// told which file and whose, until the first lets go.
func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bisect", "0123456789ab")
	unlock, err := Lock(context.Background(), dir, "fth bisect pid 1 run a", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, LockName)

	ctx, cancel := context.WithTimeout(context.Background(), 3*lockPoll)
	defer cancel()
	var gotPath, gotBy string
	_, err = Lock(ctx, dir, "fth bisect pid 2 run b", func(path, by string) { gotPath, gotBy = path, by })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), path) {
		t.Errorf("a second lock while the first is held: %v, want a deadline naming %s", err, path)
	}
	if gotPath != path || gotBy != "fth bisect pid 1 run a" {
		t.Errorf("waiting told %q held by %q", gotPath, gotBy)
	}

	done := make(chan error, 1)
	go func() {
		unlock3, err := Lock(context.Background(), dir, "fth bisect pid 3 run c", nil)
		if err == nil {
			unlock3()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a third lock was taken while the first is held (%v)", err)
	case <-time.After(2 * lockPoll):
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * lockPoll):
		t.Fatal("the third lock was not taken after the first let go")
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("the lock file keeps %q after its holder let go", b)
	}
}
