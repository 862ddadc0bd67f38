package ssh

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
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

// Stream runs a long-running command (the remote agent, its kernel log stream),
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
//
// It drives the session channel itself rather than through ssh.Session:
// Session.Start sends "exec" with want-reply and starts copying stdin only
// after the reply, but minimal sshds (u-root's, which the board VM runs)
// reply only after the command ends, and the command waits for stdin EOF:
// a deadlock. Like OpenSSH, run sends exec without waiting, then stdin.
func (c *Client) run(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer, tail *tailBuffer, kill bool) error {
	ch, reqs, err := c.openSession(ctx)
	if err != nil {
		return fmt.Errorf("run %q on %s: %w", cmd, c.addr, err)
	}
	outGate, errGate := newGate(stdout), newGate(stderr)
	defer outGate.close()
	defer errGate.close()
	if _, err := ch.SendRequest("exec", false, ssh.Marshal(struct{ Command string }{cmd})); err != nil {
		ch.Close()
		select {
		case <-c.done:
			return fmt.Errorf("run %q: %w", cmd, c.lostErr())
		default:
			return fmt.Errorf("run %q on %s: exec: %w", cmd, c.addr, err)
		}
	}
	go func() {
		if stdin != nil {
			_, _ = io.Copy(ch, stdin)
		}
		_ = ch.CloseWrite()
	}()
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); _, _ = io.Copy(outGate, ch) }()
	go func() { defer copies.Done(); _, _ = io.Copy(errGate, ch.Stderr()) }()
	waited := make(chan exitStatus, 1)
	go func() {
		st := exitStatus{status: -1}
		for r := range reqs {
			switch r.Type {
			case "exit-status":
				var p struct{ Status uint32 }
				if ssh.Unmarshal(r.Payload, &p) == nil {
					st.status = int(p.Status)
				}
			case "exit-signal":
				var p struct {
					Signal     string
					CoreDumped bool
					Error      string
					Lang       string
				}
				if ssh.Unmarshal(r.Payload, &p) == nil {
					st.signal = p.Signal
				}
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
		// The channel is closed; what it carried has been delivered.
		copies.Wait()
		waited <- st
	}()
	select {
	case st := <-waited:
		ch.Close()
		return c.exitError(cmd, st, tail)
	case <-ctx.Done():
		// Both writes can block on a wedged connection, and the caller asked
		// to stop now; the keepalive reaps such a connection later.
		go func() {
			if kill {
				_, _ = ch.SendRequest("signal", false, ssh.Marshal(struct{ Signal string }{string(ssh.SIGKILL)}))
			}
			ch.Close()
		}()
		return fmt.Errorf("run %q on %s: %w", cmd, c.addr, context.Cause(ctx))
	case <-c.done:
		ch.Close()
		return fmt.Errorf("run %q: %w", cmd, c.lostErr())
	}
}

// exitStatus is how a remote command ended: status -1 when the board sent
// none (signal set if it sent exit-signal instead).
type exitStatus struct {
	status int
	signal string
}

// openSession opens a session channel, giving up when ctx ends or the
// connection is lost: opening waits for the board's answer, which a dead
// board never sends.
func (c *Client) openSession(ctx context.Context) (ssh.Channel, <-chan *ssh.Request, error) {
	type opened struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
		err  error
	}
	done := make(chan opened, 1)
	go func() {
		ch, reqs, err := c.conn.OpenChannel("session", nil)
		done <- opened{ch, reqs, err}
	}()
	select {
	case o := <-done:
		if o.err == nil {
			return o.ch, o.reqs, nil
		}
		select {
		case <-c.done:
			return nil, nil, c.lostErr()
		default:
			return nil, nil, fmt.Errorf("open session: %w (sshd's MaxSessions reached?)", o.err)
		}
	case <-ctx.Done():
		go func() {
			if o := <-done; o.ch != nil {
				o.ch.Close()
			}
		}()
		return nil, nil, context.Cause(ctx)
	case <-c.done:
		return nil, nil, c.lostErr()
	}
}

// exitError interprets how the command ended.
func (c *Client) exitError(cmd string, st exitStatus, tail *tailBuffer) error {
	if st.status == 0 && st.signal == "" {
		return nil
	}
	if st.status > 0 || st.signal != "" {
		return &ExitError{Cmd: cmd, Addr: c.addr, Status: st.status, Signal: st.signal, Stderr: tail.String()}
	}
	// No exit status: the channel was torn down under the command, which is
	// almost always the connection going away.
	select {
	case <-c.done:
		return fmt.Errorf("run %q: %w", cmd, c.lostErr())
	case <-time.After(lostGrace):
	}
	return fmt.Errorf("run %q on %s: the session ended without an exit status (sshd killed?); stderr: %q", cmd, c.addr, tail.String())
}

// ExitError is a command that ran on the board and failed.
type ExitError struct {
	Cmd  string
	Addr Addr
	// Status is the exit status, -1 when the command was killed by Signal.
	Status int
	Signal string
	Stderr string
}

// Error names the command, the board, how it ended and the end of stderr.
func (e *ExitError) Error() string {
	how := fmt.Sprintf("exit status %d", e.Status)
	if e.Signal != "" {
		how = "killed by signal " + e.Signal
	}
	if e.Stderr == "" {
		return fmt.Sprintf("run %q on %s: %s (no stderr)", e.Cmd, e.Addr, how)
	}
	return fmt.Sprintf("run %q on %s: %s; stderr: %q", e.Cmd, e.Addr, how, e.Stderr)
}
