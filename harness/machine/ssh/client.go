package ssh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Defaults for Config.
const (
	defaultDialTimeout = 10 * time.Second
	defaultKeepAlive   = 5 * time.Second
)

// ErrConnLost is wrapped by the errors of calls cut short because the
// connection ended (board died, network dropped, keepalive timed out, or
// Close), so a soak can tell "the board went away" from "the command failed"
// and go to WaitBack.
var ErrConnLost = errors.New("connection to the board lost")

// Config says which board to dial and how.
type Config struct {
	Addr     Addr
	HostKeys HostKeys
	Auth     Auth
	// DialTimeout bounds the TCP connect plus the SSH handshake; 0 means 10s.
	DialTimeout time.Duration
	// KeepAlive is the interval of keepalive@openssh.com requests; 0 means
	// 5s, negative disables them. A reply missing for 3 intervals closes the
	// connection, so a board that died is noticed even when no data flows
	// (TCP alone can take a quarter of an hour to give up).
	KeepAlive time.Duration
	// Log receives connection events; nil means slog.Default().
	Log *slog.Logger
}

// Client is a connection to a board. Its methods are safe for concurrent use;
// each command runs in its own SSH session.
type Client struct {
	addr Addr
	conn *ssh.Client
	log  *slog.Logger
	done chan struct{}

	mu     sync.Mutex
	cause  error // why the connection ended; set once
	closed bool  // Close was called, so the end is not worth a warning
}

// Dial connects and authenticates to the board. ctx bounds the dial and the
// handshake only; the connection then lives until Close or until it is lost.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	a := cfg.Addr
	if a.User == "" || a.Host == "" {
		return nil, fmt.Errorf("ssh dial %q: the address needs a user and a host (%s)", a.String(), addrForm)
	}
	if a.Port == 0 {
		a.Port = defaultPort
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("target", a.String())
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = defaultDialTimeout
	}
	keepAlive := cfg.KeepAlive
	if keepAlive == 0 {
		keepAlive = defaultKeepAlive
	}
	hk := cfg.HostKeys
	if hk.Log == nil {
		hk.Log = log
	}
	// A fresh policy per connection, so the insecure warning fires on each.
	policy, err := hk.policy(a)
	if err != nil {
		return nil, fmt.Errorf("ssh dial %s: %w", a, err)
	}
	methods, agentConn, err := cfg.Auth.Methods()
	if err != nil {
		return nil, fmt.Errorf("ssh dial %s: %w", a, err)
	}
	// The agent is only needed to sign during the handshake.
	defer agentConn.Close()

	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := a.HostPort()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh dial %s: %w: is the board up, is sshd listening on port %d, and is the address right?", a, err, a.Port)
	}
	// The handshake takes no context; closing the socket is the only way to
	// abort a board that accepted TCP but hangs in SSH.
	stop := context.AfterFunc(dctx, func() { conn.Close() })
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, &ssh.ClientConfig{
		User:              a.User,
		Auth:              methods,
		HostKeyCallback:   policy.callback,
		HostKeyAlgorithms: policy.algorithms,
		Timeout:           timeout,
	})
	if !stop() {
		if err == nil {
			sc.Close()
		}
		return nil, fmt.Errorf("ssh dial %s: handshake: %w", a, context.Cause(dctx))
	}
	if err != nil {
		conn.Close()
		return nil, explainDialError(a, err)
	}
	c := &Client{addr: a, conn: ssh.NewClient(sc, chans, reqs), log: log, done: make(chan struct{})}
	log.Info("connected to board", "server", string(sc.ServerVersion()))
	go c.watch()
	if keepAlive > 0 {
		go c.keepAlive(keepAlive)
	}
	return c, nil
}

// explainDialError adds the likely fix to a handshake failure.
func explainDialError(a Addr, err error) error {
	switch {
	case errors.Is(err, ErrHostKey):
		return fmt.Errorf("ssh dial %s: %w", a, err)
	case strings.Contains(err.Error(), "unable to authenticate"):
		return fmt.Errorf("ssh dial %s: %w: the board accepted none of the keys offered: add your public key to ~%s/.ssh/authorized_keys on the board, or pass the right identity file", a, err, a.User)
	default:
		return fmt.Errorf("ssh dial %s: %w", a, err)
	}
}

// Addr is the board this client is connected to.
func (c *Client) Addr() Addr { return c.addr }

// Done is closed when the connection is lost or closed: ssh.Client.Wait
// returned, or keepalive replies stopped.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close closes the connection and waits until Done is closed. Closing an
// already lost connection is not an error.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.cause == nil {
		c.cause = errors.New("closed by the harness")
	}
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("close ssh connection to %s: %w", c.addr, err)
	}
	return nil
}

// watch closes done when the connection ends, whatever ended it.
func (c *Client) watch() {
	err := c.conn.Wait()
	c.mu.Lock()
	if c.cause == nil {
		if err == nil {
			err = errors.New("server closed the connection")
		}
		c.cause = err
	}
	cause, closed := c.cause, c.closed
	c.mu.Unlock()
	if !closed {
		c.log.Warn("connection to board lost", "cause", cause)
	}
	close(c.done)
}

// lose ends the connection with a cause, unless it already ended.
func (c *Client) lose(cause error) {
	c.mu.Lock()
	if c.cause == nil {
		c.cause = cause
	}
	c.mu.Unlock()
	c.conn.Close()
}

// lostErr is the error for a call cut short by the end of the connection.
func (c *Client) lostErr() error {
	c.mu.Lock()
	cause := c.cause
	c.mu.Unlock()
	return fmt.Errorf("%w: %s: %v", ErrConnLost, c.addr, cause)
}
