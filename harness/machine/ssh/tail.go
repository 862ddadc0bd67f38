package ssh

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// tailBuffer keeps the last max bytes written to it: the end of stderr is
// where the diagnostic is, and a soak command may write megabytes before it.
// It is locked because the session writes while a caller may read it after a
// lost connection.
type tailBuffer struct {
	max int

	mu  sync.Mutex
	buf []byte
}

// Write keeps the tail of p and never fails, so it cannot break the session.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String is the kept tail without surrounding blank space, starting at a
// whole UTF-8 character.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.TrimSpace(string(b))
}
