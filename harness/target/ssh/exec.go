package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/crypto/ssh"
)

// stderrTail is how much of a command's stderr an error quotes: enough for
// the usual last-line diagnostic, short enough for a log line.
const stderrTail = 2 << 10

// lostGrace is how long a session that ended without an exit status waits to
// learn whether the connection went down with it: the channel is torn down
// just before the connection reports its end.
const lostGrace = time.Second

// Output runs cmd on the board (through the login shell, as sshd does) and returns its stdout. A non-zero
// exit gives an error with the command, the exit status and the tail of
// stderr; the stdout read so far is returned either way. Cancelling ctx closes
// the session after a best-effort SIGKILL.
func (c *Client) Output(ctx context.Context, cmd string) ([]byte, error) {
	var out bytes.Buffer
	tail := &tailBuffer{max: stderrTail}
	err := c.run(ctx, cmd, nil, &out, tail, tail, true)
	return out.Bytes(), err
}

// Stream runs a long-running command (cat /dev/kmsg, the remote agent),
// copying its output as it comes. It returns when the command exits, when the
// connection drops (the error wraps ErrConnLost), or when ctx ends (the
// session is closed, with no signal). stdin may be nil (the command reads EOF
// at once). Closing the session or losing the connection makes the board's
// sshd close the command's stdin, so a remote agent reading stdin sees EOF and
// stops itself, cleanly, instead of outliving the soak; that is why a
// cancelled Stream does not send SIGKILL as Output does. stdout and stderr are
// never written after Stream returns; a write blocked in them delays the
// return, so they must not block for long.
func (c *Client) Stream(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) error {
	tail := &tailBuffer{max: stderrTail}
	var errW io.Writer = tail
	if stderr != nil {
		errW = io.MultiWriter(stderr, tail)
	}
	return c.run(ctx, cmd, stdin, stdout, errW, tail, false)
}

// run runs cmd in a new session; tail holds the stderr to quote on failure.
// kill sends SIGKILL before closing the session when ctx ends.
func (c *Client) run(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer, tail *tailBuffer, kill bool) error {
	sess, err := c.newSession(ctx)
	if err != nil {
		return fmt.Errorf("run %q on %s: %w", cmd, c.target, err)
	}
	outGate, errGate := newGate(stdout), newGate(stderr)
	defer outGate.close()
	defer errGate.close()
	sess.Stdin, sess.Stdout, sess.Stderr = stdin, outGate, errGate
	// Start waits for the board to accept the exec request, and Wait for
	// the command to end; neither takes a context, so both run aside.
	started, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		if err := sess.Start(cmd); err != nil {
			started <- err
			return
		}
		close(started)
		waited <- sess.Wait()
	}()
	select {
	case err := <-started:
		if err != nil {
			sess.Close()
			select {
			case <-c.done:
				return fmt.Errorf("run %q: %w", cmd, c.lostErr())
			default:
				return fmt.Errorf("run %q on %s: start: %w", cmd, c.target, err)
			}
		}
	case <-ctx.Done(): // both handled below, the same as after a start
	case <-c.done:
	}
	select {
	case err := <-waited:
		sess.Close()
		return c.exitError(cmd, err, tail)
	case <-ctx.Done():
		// Both writes can block on a wedged connection, and the caller asked
		// to stop now; the keepalive reaps such a connection later.
		go func() {
			if kill {
				_ = sess.Signal(ssh.SIGKILL)
			}
			sess.Close()
		}()
		return fmt.Errorf("run %q on %s: %w", cmd, c.target, context.Cause(ctx))
	case <-c.done:
		sess.Close()
		return fmt.Errorf("run %q: %w", cmd, c.lostErr())
	}
}

// newSession opens a session, giving up when ctx ends or the connection is
// lost: opening waits for the board's answer, which a dead board never sends.
func (c *Client) newSession(ctx context.Context) (*ssh.Session, error) {
	type opened struct {
		s   *ssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.conn.NewSession()
		ch <- opened{s, err}
	}()
	select {
	case o := <-ch:
		if o.err == nil {
			return o.s, nil
		}
		select {
		case <-c.done:
			return nil, c.lostErr()
		default:
			return nil, fmt.Errorf("open session: %w (sshd's MaxSessions reached?)", o.err)
		}
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, context.Cause(ctx)
	case <-c.done:
		return nil, c.lostErr()
	}
}

// exitError interprets the result of Session.Wait.
func (c *Client) exitError(cmd string, err error, tail *tailBuffer) error {
	if err == nil {
		return nil
	}
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		return &remoteExitError{cmd: cmd, target: c.target, exit: exit, stderr: tail.String()}
	}
	// No exit status: the channel was torn down under the command, which is
	// almost always the connection going away.
	select {
	case <-c.done:
		return fmt.Errorf("run %q: %w", cmd, c.lostErr())
	case <-time.After(lostGrace):
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return fmt.Errorf("run %q on %s: the session ended without an exit status (sshd killed?); stderr: %q", cmd, c.target, tail.String())
	}
	return fmt.Errorf("run %q on %s: %w; stderr: %q", cmd, c.target, err, tail.String())
}

// remoteExitError is a command that ran and failed. It unwraps to
// *ssh.ExitError for callers that need the status.
type remoteExitError struct {
	cmd    string
	target Target
	exit   *ssh.ExitError
	stderr string
}

// Error names the command, the board, how it ended and the end of stderr.
func (e *remoteExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.exit.ExitStatus())
	if sig := e.exit.Signal(); sig != "" {
		how = "killed by signal " + sig
	}
	if e.stderr == "" {
		return fmt.Sprintf("run %q on %s: %s (no stderr)", e.cmd, e.target, how)
	}
	return fmt.Sprintf("run %q on %s: %s; stderr: %q", e.cmd, e.target, how, e.stderr)
}

// Unwrap gives the *ssh.ExitError.
func (e *remoteExitError) Unwrap() error { return e.exit }
