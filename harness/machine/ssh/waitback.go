package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults for Backoff: 40 tries capped at 30s apart wait about 19 minutes,
// enough for a board that panics, kdumps and boots a distro again.
const (
	defaultBackoffInitial = 2 * time.Second
	defaultBackoffMax     = 30 * time.Second
	defaultBackoffTries   = 40
)

// Backoff is the reconnect policy after a lost connection: the delay between
// tries starts at Initial and doubles up to Max; Tries dials at most. Zero
// fields take the defaults 2s, 30s and 40.
type Backoff struct {
	Initial, Max time.Duration
	Tries        int
}

// withDefaults fills the zero fields.
func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = defaultBackoffInitial
	}
	if b.Max <= 0 {
		b.Max = defaultBackoffMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.Tries <= 0 {
		b.Tries = defaultBackoffTries
	}
	return b
}

// delay is the wait before try n (counting from 1; the first is immediate):
// Initial doubling up to Max.
func (b Backoff) delay(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := b.Initial
	for i := 2; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Comeback tells how the board came back.
type Comeback struct {
	// Rebooted is true when the boot_id changed: the board crashed or was
	// restarted, not merely unreachable for a while.
	Rebooted bool
	// BootID is the board's boot_id now.
	BootID string
	// Tries is how many dials it took, the successful one included.
	Tries int
	// Waited is the time from the call to the board answering.
	Waited time.Duration
}

// WaitBack redials with backoff until the board answers, then compares its
// boot_id with prevBootID (read by BootID right after the previous Dial): a
// different one means Rebooted (the board crashed or restarted), the same
// one a network blip. It gives up after b.Tries with an error naming the
// tries and the last dial error (which names the address). dial is usually a
// closure over Dial and the soak's Config.
func WaitBack(ctx context.Context, prevBootID string, b Backoff, dial func(context.Context) (*Client, error), log *slog.Logger) (*Client, Comeback, error) {
	c, cb, err := waitBack(ctx, prevBootID, b, func(ctx context.Context) (bootIDer, error) {
		c, err := dial(ctx)
		if err != nil {
			// Not returned as a bootIDer: a nil *Client in an interface
			// would not compare equal to nil.
			return nil, err
		}
		return c, nil
	}, log)
	if err != nil {
		return nil, cb, err
	}
	return c.(*Client), cb, nil
}

// bootIDer is the part of *Client that WaitBack needs, so that the logic can
// be tested against fakes without an SSH server.
type bootIDer interface {
	BootID(context.Context) (string, error)
	Close() error
}

// waitBack is WaitBack over bootIDer.
func waitBack(ctx context.Context, prevBootID string, b Backoff, dial func(context.Context) (bootIDer, error), log *slog.Logger) (bootIDer, Comeback, error) {
	var cb Comeback
	if prevBootID == "" {
		// Without it a reboot and a blip look the same; refusing beats
		// guessing, since a soak files a crash on Rebooted.
		return nil, cb, errors.New("wait for the board: previous boot_id is empty: read it with BootID right after Dial")
	}
	if log == nil {
		log = slog.Default()
	}
	b = b.withDefaults()
	start := time.Now()
	var lastErr error
	for cb.Tries < b.Tries {
		// The first try is immediate: after a blip the board is already
		// there, and a reboot is long enough for the backoff to matter.
		if d := b.delay(cb.Tries + 1); d > 0 {
			timer := time.NewTimer(d)
			select {
			case <-ctx.Done():
				timer.Stop()
				cb.Waited = time.Since(start)
				return nil, cb, fmt.Errorf("wait for the board after %d tries: %w (last error: %v)", cb.Tries, context.Cause(ctx), lastErr)
			case <-timer.C:
			}
		}
		cb.Tries++
		c, err := dial(ctx)
		if err == nil {
			var id string
			id, err = c.BootID(ctx)
			if err == nil {
				cb.BootID, cb.Rebooted, cb.Waited = id, id != prevBootID, time.Since(start)
				log.Info("board is back", "rebooted", cb.Rebooted, "boot_id", id, "prev_boot_id", prevBootID, "tries", cb.Tries, "waited", cb.Waited.Round(time.Millisecond))
				return c, cb, nil
			}
			// sshd can be up before /proc is sane, or the board can go down
			// again between the two calls: try again like a failed dial.
			c.Close()
		}
		lastErr = err
		if ctx.Err() != nil {
			cb.Waited = time.Since(start)
			return nil, cb, fmt.Errorf("wait for the board after %d tries: %w (last error: %v)", cb.Tries, context.Cause(ctx), lastErr)
		}
		log.Debug("board not back yet", "try", cb.Tries, "of", b.Tries, "next_in", b.delay(cb.Tries+1), "err", err)
	}
	cb.Waited = time.Since(start)
	return nil, cb, fmt.Errorf("board did not come back: gave up after %d tries in %s: last error: %w", cb.Tries, cb.Waited.Round(time.Second), lastErr)
}
