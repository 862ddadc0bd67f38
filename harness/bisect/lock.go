package bisect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockName is the lock file in a bisection's place in the cache
// (<cache>/bisect/<tree>/), beside its worktrees.
const LockName = "lock"

// lockPoll is how often Lock tries again while another holds the lock.
const lockPoll = 250 * time.Millisecond

// Lock takes the lock of dir, a bisection's place: two bisections of one
// tree share its worktrees, and one would check revisions out under the
// other's builds. It holds an exclusive flock on dir/LockName, so the
// kernel drops it when the process dies, and writes holder (who holds it:
// the process, the run) into the file for the next one to read. While
// another process holds it, Lock waits, calling waiting once with the
// lock file's path and what its holder wrote, until ctx is done. unlock
// releases it.
func Lock(ctx context.Context, dir, holder string, waiting func(path, heldBy string)) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	fd := int(f.Fd())
	for waited := false; ; waited = true {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !waited && waiting != nil {
			by, _ := os.ReadFile(path)
			waiting(path, strings.TrimSpace(string(by)))
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = unix.Flock(fd, unix.LOCK_UN)
		f.Close()
	}, nil
}
