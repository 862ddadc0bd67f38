package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// orphanGrace bounds the clean-up after the session is gone (links
// released, modules unloaded, tracers reset). Past it the agent exits
// anyway: the kernel drops its BPF links with its file descriptors, and a
// stress left running on a board nobody watches is worse than a tracer
// left on.
const orphanGrace = 90 * time.Second

// sessionWriter passes writes to a goroutine, so that none blocks once the
// session is gone. Some sshds (u-root's) keep a dropped session's output
// pipe open until the command exits; nobody reads it, it fills, and a
// plain write would block the agent, holding the event writer's lock,
// before it ever got to clean up and exit.
type sessionWriter struct {
	w    io.Writer
	ch   chan []byte
	gone <-chan struct{}
	done chan struct{}

	mu     sync.RWMutex
	closed bool
	err    error // the first write error, returned by the next Write
}

// newSessionWriter starts the goroutine writing to w. After gone is closed
// every Write succeeds at once and its data is dropped.
func newSessionWriter(w io.Writer, gone <-chan struct{}) *sessionWriter {
	s := &sessionWriter{w: w, ch: make(chan []byte), gone: gone, done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sessionWriter) loop() {
	defer close(s.done)
	for b := range s.ch {
		if _, err := s.w.Write(b); err != nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
		}
	}
}

// Write hands p to the writing goroutine, or drops it if the session is
// gone. It returns an earlier write's error, if any.
func (s *sessionWriter) Write(p []byte) (int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, errors.New("session writer closed")
	}
	if s.err != nil {
		return 0, s.err
	}
	b := append([]byte(nil), p...)
	select {
	case s.ch <- b:
	case <-s.gone:
	}
	return len(p), nil
}

// Close waits until the last write is out, unless the session is gone.
func (s *sessionWriter) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-s.gone:
	}
	return nil
}

// watchStdin returns a context cancelled when stdin reaches EOF (the SSH
// session dropped), and a channel closed at that moment.
func watchStdin(ctx context.Context, stdin io.Reader) (context.Context, context.CancelFunc, <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(gone)
		cancel()
	}()
	return ctx, cancel, gone
}

// streamKmsg copies the kernel log, one record per line as /dev/kmsg gives
// it (the backlog first), to out until ctx ends. It returns at once when
// ctx ends, even with a read or a write pending: the process exits next.
func streamKmsg(ctx context.Context, path string, out io.Writer) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	errc := make(chan error, 1)
	go func() {
		defer unix.Close(fd)
		// One read is one record; records stay under 8 KiB.
		buf := make([]byte, 8192)
		for {
			n, err := unix.Read(fd, buf)
			switch {
			case errors.Is(err, unix.EPIPE), errors.Is(err, unix.EINTR):
				// EPIPE: records were overwritten before we read
				// them; the next read goes on from the oldest left.
				continue
			case err != nil:
				errc <- fmt.Errorf("read %s: %w", path, err)
				return
			case n == 0:
				errc <- fmt.Errorf("read %s: end of file", path)
				return
			}
			if _, err := out.Write(buf[:n]); err != nil {
				errc <- fmt.Errorf("write the kernel log: %w", err)
				return
			}
		}
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}
