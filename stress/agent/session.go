package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// orphanGrace bounds the clean-up after the session is gone (links
// released, modules unloaded, tracers reset). Past it the agent exits
// anyway: the kernel drops its BPF links with its file descriptors, and a
// stress left running on a board nobody watches is worse than a tracer
// left on.
const orphanGrace = 90 * time.Second

// stopPatience is how long a write may wait once the agent was asked to
// stop (SIGTERM, say after a blip, when the session may be half open and
// its pipe full): past it, output is dropped so that the clean-up goes on.
const stopPatience = 2 * time.Second

// sessionWriter passes writes to a goroutine, so that none blocks once the
// session is gone. Some sshds (u-root's) keep a dropped session's output
// pipe open until the command exits; nobody reads it, it fills, and a
// plain write would block the agent, holding the event writer's lock,
// before it ever got to clean up and exit.
type sessionWriter struct {
	w    io.Writer
	ch   chan []byte
	gone <-chan struct{} // the session dropped: drop everything
	stop <-chan struct{} // asked to stop: wait stopPatience at most
	done chan struct{}

	mu     sync.RWMutex // guards closed against a send on a closed ch
	closed bool
	dead   atomic.Bool           // gave up on a blocked write
	err    atomic.Pointer[error] // the first write error
}

// newSessionWriter starts the goroutine writing to w. After gone is closed
// every Write succeeds at once and its data is dropped; after stop is
// closed a Write waits stopPatience at most.
func newSessionWriter(w io.Writer, gone, stop <-chan struct{}) *sessionWriter {
	s := &sessionWriter{w: w, ch: make(chan []byte), gone: gone, stop: stop, done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sessionWriter) loop() {
	defer close(s.done)
	for b := range s.ch {
		if s.dropping() {
			continue
		}
		if _, err := s.w.Write(b); err != nil {
			s.err.CompareAndSwap(nil, &err)
		}
	}
}

func (s *sessionWriter) dropping() bool {
	if s.dead.Load() {
		return true
	}
	select {
	case <-s.gone:
		return true
	default:
		return false
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
	if err := s.err.Load(); err != nil {
		return 0, *err
	}
	if s.dropping() {
		return len(p), nil
	}
	s.wait(s.ch, append([]byte(nil), p...), nil)
	return len(p), nil
}

// wait sends b on send (if not nil) or waits for done (if not nil), and
// gives up when the session goes or stopPatience after stop.
func (s *sessionWriter) wait(send chan<- []byte, b []byte, done <-chan struct{}) {
	stop := s.stop
	var patience <-chan time.Time
	for {
		select {
		case send <- b:
			return
		case <-done:
			return
		case <-s.gone:
			return
		case <-stop:
			stop = nil
			t := time.NewTimer(stopPatience)
			defer t.Stop()
			patience = t.C
		case <-patience:
			s.dead.Store(true)
			return
		}
	}
}

// Close waits until the last write is out, unless the session is gone or
// the writer gave up.
func (s *sessionWriter) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
	s.mu.Unlock()
	if !s.dead.Load() {
		s.wait(nil, nil, s.done)
	}
	return nil
}

// startSession ties the run to the SSH session on stdin: ctx ends when
// stdin does, sys's output no longer blocks once the session is gone (or
// 2 s after a signal), and an orphan guard ends the process orphanGrace
// after either. end undoes it, last output flushed, when run returns.
func startSession(ctx context.Context, sys system) (context.Context, system, func()) {
	// A write to a pipe the sshd closed (OpenSSH does, on a dropped
	// session) must fail with EPIPE, not kill the agent with SIGPIPE
	// before it has released its links.
	signal.Ignore(syscall.SIGPIPE)
	stop := ctx.Done() // a signal (SIGTERM after a blip)
	ctx, cancel, gone := watchStdin(ctx, sys.stdin)
	stdout, stderr := newSessionWriter(sys.stdout, gone, stop), newSessionWriter(sys.stderr, gone, stop)
	sys.stdout, sys.stderr = stdout, stderr
	finished := make(chan struct{})
	go func() {
		why := "the harness's SSH session is gone (stdin closed)"
		select {
		case <-gone:
		case <-stop:
			why = "asked to stop"
		case <-finished:
			return
		}
		// Nobody may read stderr any more: the board's own log is where
		// its operator will look.
		sys.kmsg(fmt.Sprintf("fth-agent[%d]: %s; stopping, exit within %s", sys.pid, why, orphanGrace))
		sys.sleep(orphanGrace)
		sys.exit(3)
	}()
	return ctx, sys, func() {
		close(finished)
		stdout.Close()
		stderr.Close()
		cancel()
	}
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
