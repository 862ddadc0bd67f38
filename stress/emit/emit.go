// Package emit writes agent events to the host: one JSON object per line,
// each line handed to the channel in a single Write so that a line is never
// interleaved with another one on the virtio-serial character device.
package emit

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/wire/event"
)

// Emitter accepts events. Every package of the agent reports through it, so
// that tests can capture events without a channel.
type Emitter interface {
	Emit(e event.Event) error
}

// Writer is an Emitter that encodes events as JSON lines on an io.Writer.
// It is safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
	buf []byte
	// err is the first write error. It is kept so that the agent can say
	// at the end that the host may have missed events, without every
	// caller having to handle a failed log line.
	err error
}

// NewWriter returns a Writer on w that stamps events with the current time.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, now: time.Now}
}

// NewWriterClock is NewWriter with a clock, for deterministic tests.
func NewWriterClock(w io.Writer, now func() time.Time) *Writer {
	return &Writer{w: w, now: now}
}

// Emit encodes e as one line and writes it with a single Write call. A zero
// e.Time is set to the current time.
func (w *Writer) Emit(e event.Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.Time.IsZero() {
		e.Time = w.now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("report: encode %s event: %w", e.Kind, err)
	}
	// Reuse one buffer so the newline is part of the same write: a
	// separate Write for "\n" could interleave with another writer.
	w.buf = append(append(w.buf[:0], b...), '\n')
	if _, err := w.w.Write(w.buf); err != nil {
		err = fmt.Errorf("report: write %s event: %w", e.Kind, err)
		if w.err == nil {
			w.err = err
		}
		return err
	}
	return nil
}

// Err returns the first write error seen, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Logf emits a KindLog event. Errors are dropped: a log line that cannot be
// delivered is no reason to stop a run, and Writer.Err keeps the first one.
func Logf(e Emitter, format string, args ...any) {
	_ = e.Emit(event.Event{Kind: event.KindLog, Log: fmt.Sprintf(format, args...)})
}

// Memory is an Emitter that keeps events in memory, for tests and for callers
// that inspect what a component reported.
type Memory struct {
	mu     sync.Mutex
	events []event.Event
}

// Emit records e.
func (m *Memory) Emit(e event.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
	return nil
}

// Events returns a copy of the recorded events.
func (m *Memory) Events() []event.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]event.Event(nil), m.events...)
}

// OfKind returns the recorded events of kind k.
func (m *Memory) OfKind(k event.Kind) []event.Event {
	var out []event.Event
	for _, e := range m.Events() {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// UnjudgedError is a run that stopped at a limit of the agent's, not at
// anything the kernel did: the host calls the cell an error, not a
// failure.
type UnjudgedError struct{ err error }

// Unjudged marks err as no verdict on the kernel.
func Unjudged(err error) error { return &UnjudgedError{err: err} }

func (e *UnjudgedError) Error() string { return e.err.Error() }

func (e *UnjudgedError) Unwrap() error { return e.err }
