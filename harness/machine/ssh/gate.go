package ssh

import (
	"io"
	"sync"
)

// gate passes writes to w until shut. The session's copy goroutines can
// outlive a cancelled or cut-off command; the gate guarantees the caller's
// writers (and Output's buffer) are not touched once the call has returned.
type gate struct {
	mu   sync.Mutex
	w    io.Writer
	shut bool
}

// newGate wraps w; a nil w is a gate to nowhere.
func newGate(w io.Writer) *gate {
	if w == nil {
		w = io.Discard
	}
	return &gate{w: w}
}

// Write passes p on, or drops it once the gate is shut: the session must
// drain the channel, and an error here would only end up ignored.
func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return len(p), nil
	}
	return g.w.Write(p)
}

// close shuts the gate, waiting for a write in progress to finish.
func (g *gate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}
