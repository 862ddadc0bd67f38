// Package ctxsleep sleeps until a duration passes or a context ends,
// whichever comes first: the pause of every loop that runs until its
// context is cancelled.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d or until ctx ends, and reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
