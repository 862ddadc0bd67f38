package ssh

import (
	"fmt"
	"sync/atomic"
	"time"
)

// keepAliveRequest is OpenSSH's own keepalive: every sshd answers it (with a
// failure, which is as good as a success here: the board is alive).
const keepAliveRequest = "keepalive@openssh.com"

// keepAliveMissed is how many intervals without a reply mean the board is
// gone; one or two can be lost to a busy board, three are not a hiccup.
const keepAliveMissed = 3

// keepAlive pings the board every interval and closes the connection once no
// reply has come for keepAliveMissed intervals. A dead board sends no RST, so
// without this a soak waiting for output would wait for TCP's retransmission
// timeout, a quarter of an hour.
func (c *Client) keepAlive(interval time.Duration) {
	var lastReply atomic.Int64
	var inFlight atomic.Bool
	lastReply.Store(time.Now().UnixNano())
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		if silent := time.Since(time.Unix(0, lastReply.Load())); silent > keepAliveMissed*interval {
			c.lose(fmt.Errorf("no keepalive reply for %s (interval %s): board dead or network down", silent.Round(time.Millisecond), interval))
			return
		}
		// SendRequest blocks until the reply, possibly forever on a dead
		// board: one request at a time, and the timer above judges it.
		if !inFlight.CompareAndSwap(false, true) {
			continue
		}
		go func() {
			defer inFlight.Store(false)
			if _, _, err := c.conn.SendRequest(keepAliveRequest, true, nil); err == nil {
				lastReply.Store(time.Now().UnixNano())
			}
		}()
	}
}
