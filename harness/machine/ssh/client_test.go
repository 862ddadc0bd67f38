package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ftrace-harness/fth/harness/internal/shell"
)

// rig is a test server plus a Config that reaches it.
type rig struct {
	srv *testServer
	cfg Config
	dir string
}

// newRig starts a server and writes the client's key and known_hosts.
func newRig(t *testing.T, silent bool) *rig {
	t.Helper()
	t.Setenv("SSH_AUTH_SOCK", "")
	dir := t.TempDir()
	id, pub := writeIdentity(t, t.TempDir(), "")
	srv := newTestServer(t, pub, silent)
	tgt := srv.addr("tester")
	known := writeKnownHosts(t, t.TempDir(), tgt.HostPort(), srv.hostKey.PublicKey())
	return &rig{srv: srv, dir: dir, cfg: Config{
		Addr:        tgt,
		HostKeys:    HostKeys{KnownHosts: []string{known}},
		Auth:        Auth{IdentityFiles: []string{id}},
		DialTimeout: 5 * time.Second,
		Log:         testLogger(t),
	}}
}

// dial connects with the rig's config and closes the client at the end.
func (r *rig) dial(t *testing.T) *Client {
	t.Helper()
	c, err := Dial(t.Context(), r.cfg)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond for up to 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestDialRefused(t *testing.T) {
	r := newRig(t, false)
	other := writeKnownHosts(t, t.TempDir(), r.cfg.Addr.HostPort(), newSigner(t).PublicKey())
	strangerID, _ := writeIdentity(t, t.TempDir(), "")
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   []string
		hostKy bool
	}{
		{"wrong host key", func(c *Config) { c.HostKeys.KnownHosts = []string{other} },
			[]string{"CHANGED", ssh.FingerprintSHA256(r.srv.hostKey.PublicKey()), other + ":2"}, true},
		{"unknown host", func(c *Config) {
			c.HostKeys.KnownHosts = []string{writeKnownHosts(t, t.TempDir(), "10.9.9.9:22", r.srv.hostKey.PublicKey())}
		},
			[]string{"not in known_hosts", "ssh-keyscan -p"}, true},
		{"key not authorized", func(c *Config) { c.Auth.IdentityFiles = []string{strangerID} },
			[]string{"unable to authenticate", "authorized_keys", r.cfg.Addr.String()}, false},
		{"nothing listening", func(c *Config) { c.Addr.Port = closedPort(t) },
			[]string{"connection refused", "is sshd listening"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := r.cfg
			tc.mutate(&cfg)
			c, err := Dial(t.Context(), cfg)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
			if errors.Is(err, ErrHostKey) != tc.hostKy {
				t.Errorf("errors.Is(err, ErrHostKey) = %v, want %v: %v", !tc.hostKy, tc.hostKy, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// closedPort returns a local port with nothing listening on it.
func closedPort(t *testing.T) int {
	srv := newTestServer(t, newSigner(t).PublicKey(), false)
	port := srv.addr("x").Port
	srv.close()
	return port
}

func TestDialAgent(t *testing.T) {
	r := newRig(t, false)
	sock, keyring := startAgent(t, t.TempDir())
	encrypted, pub := writeIdentity(t, t.TempDir(), "s3cret")
	// Re-create the server so that it accepts the agent's key.
	r.srv = newTestServer(t, pub, false)
	r.cfg.Addr = r.srv.addr("tester")
	r.cfg.HostKeys.KnownHosts = []string{writeKnownHosts(t, t.TempDir(), r.cfg.Addr.HostPort(), r.srv.hostKey.PublicKey())}
	r.cfg.Auth = Auth{IdentityFiles: []string{encrypted}, AgentSocket: sock}

	if _, err := Dial(t.Context(), r.cfg); err == nil {
		t.Fatal("Dial succeeded with an empty agent and an encrypted key")
	}
	raw, err := os.ReadFile(encrypted)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ssh.ParseRawPrivateKeyWithPassphrase(raw, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if err := keyring.Add(agentKey(priv)); err != nil {
		t.Fatal(err)
	}
	c := r.dial(t)
	if out, err := c.Output(t.Context(), "echo via agent"); err != nil || string(out) != "via agent\n" {
		t.Fatalf("Output = %q, %v", out, err)
	}
}

func TestOutput(t *testing.T) {
	c := newRig(t, false).dial(t)
	for _, tc := range []struct {
		name, cmd, out string
		status         int // -1: success
		errHas         []string
	}{
		{"stdout", "echo hello; echo noise >&2", "hello\n", -1, nil},
		{"exit status", "echo partial; echo 'it broke' >&2; exit 3", "partial\n", 3,
			[]string{`"echo partial; echo 'it broke' >&2; exit 3"`, "exit status 3", "it broke"}},
		{"long stderr is cut", "head -c 100000 /dev/zero | tr '\\0' x >&2; echo last words >&2; exit 1", "", 1,
			[]string{"exit status 1", "last words"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.Output(t.Context(), tc.cmd)
			if string(out) != tc.out {
				t.Errorf("stdout = %q, want %q", out, tc.out)
			}
			if tc.status < 0 {
				if err != nil {
					t.Fatalf("Output: %v", err)
				}
				return
			}
			var exit *ExitError
			if !errors.As(err, &exit) || exit.Status != tc.status {
				t.Fatalf("error %v: want an *ExitError with status %d", err, tc.status)
			}
			for _, w := range tc.errHas {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if len(err.Error()) > stderrTail+500 {
				t.Errorf("error is %d bytes long, the stderr tail is not cut", len(err.Error()))
			}
		})
	}
}

func TestOutputCancel(t *testing.T) {
	c := newRig(t, false).dial(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Output(ctx, "sleep 30")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Output error %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Output took %s to give up", d)
	}
	// The connection survives a cancelled command.
	if out, err := c.Output(t.Context(), "echo still here"); err != nil || string(out) != "still here\n" {
		t.Fatalf("Output after cancel = %q, %v", out, err)
	}
}

// lineWriter records output and signals when a line shows up.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newLineWriter(want string) *lineWriter {
	return &lineWriter{want: want, seen: make(chan struct{})}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestStream(t *testing.T) {
	r := newRig(t, false)
	c := r.dial(t)

	t.Run("streams and stops on cancel", func(t *testing.T) {
		out := newLineWriter("ready\n")
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Stream(ctx, "echo ready; sleep 30", nil, out, nil) }()
		select {
		case <-out.seen: // output arrives while the command still runs
		case err := <-done:
			t.Fatalf("Stream returned early: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatalf("no streamed output, got %q", out.String())
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Stream error %v, want Canceled", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Stream did not return promptly after cancel")
		}
	})

	t.Run("stdin and exit", func(t *testing.T) {
		var out, errOut bytes.Buffer
		err := c.Stream(t.Context(), "tr a-z A-Z; echo warn >&2; exit 5", strings.NewReader("shout\n"), &out, &errOut)
		if out.String() != "SHOUT\n" || errOut.String() != "warn\n" {
			t.Errorf("stdout %q stderr %q", out.String(), errOut.String())
		}
		var exit *ExitError
		if !errors.As(err, &exit) || exit.Status != 5 || !strings.Contains(err.Error(), "warn") {
			t.Errorf("error %v: want exit status 5 quoting stderr", err)
		}
	})

	// The remote agent stops itself on stdin EOF; it must get one however
	// the client side goes away.
	for _, end := range []string{"cancel", "close"} {
		t.Run("stdin EOF on "+end, func(t *testing.T) {
			c := r.dial(t)
			got := filepath.Join(r.dir, end+".in")
			marker := filepath.Join(r.dir, end+".eof")
			stdin, feed := io.Pipe() // never closed by the test
			defer feed.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- c.Stream(ctx, "cat > "+shell.Quote(got)+"; touch "+shell.Quote(marker), stdin, io.Discard, io.Discard)
			}()
			if _, err := feed.Write([]byte("agent input\n")); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "stdin to reach the command", func() bool {
				b, _ := os.ReadFile(got)
				return string(b) == "agent input\n"
			})
			if end == "cancel" {
				cancel()
			} else {
				c.Close()
			}
			err := <-done
			if end == "cancel" && !errors.Is(err, context.Canceled) {
				t.Errorf("Stream error %v, want Canceled", err)
			}
			if end == "close" && !errors.Is(err, ErrConnLost) {
				t.Errorf("Stream error %v, want ErrConnLost", err)
			}
			waitFor(t, "the command to see EOF on stdin", func() bool { return exists(marker) })
		})
	}
}

func TestUpload(t *testing.T) {
	r := newRig(t, false)
	c := r.dial(t)
	data := make([]byte, 300<<10)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "local")
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		mode os.FileMode
		src  func() io.Reader
	}{
		{"reader", "agent", 0o755, func() io.Reader { return io.MultiReader(bytes.NewReader(data)) }},
		{"file", "from file", 0o640, func() io.Reader {
			f, err := os.Open(local)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}},
		{"hostile name", `it's $(touch pwned) "x"`, 0o600, func() io.Reader { return bytes.NewReader(data) }},
		{"empty", "empty", 0o644, func() io.Reader { return strings.NewReader("") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(r.dir, tc.path)
			if err := c.Upload(t.Context(), dst, tc.src(), tc.mode); err != nil {
				t.Fatalf("Upload: %v", err)
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			want := data
			if tc.name == "empty" {
				want = nil
			}
			if !bytes.Equal(got, want) {
				t.Errorf("uploaded %d bytes, want %d", len(got), len(want))
			}
			st, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != tc.mode {
				t.Errorf("mode %v, want %v", st.Mode().Perm(), tc.mode)
			}
			if exists(dst + uploadSuffix) {
				t.Errorf("%s left behind", dst+uploadSuffix)
			}
		})
	}
	if exists("pwned") || exists(filepath.Join(r.dir, "pwned")) {
		t.Error("the remote path was run as shell code")
	}

	t.Run("bad directory", func(t *testing.T) {
		dst := filepath.Join(r.dir, "no such dir", "file")
		err := c.Upload(t.Context(), dst, bytes.NewReader(data), 0o644)
		if err == nil || !strings.Contains(err.Error(), "exit status 1") {
			t.Fatalf("Upload into a missing directory: %v", err)
		}
	})
}

// stallReader gives n bytes, then blocks until the test ends: an upload cut
// by a dropped connection.
type stallReader struct {
	n     int
	block <-chan struct{}
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.n == 0 {
		<-s.block
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), s.n)
	clear(p[:k])
	s.n -= k
	return k, nil
}

func TestUploadDropped(t *testing.T) {
	r := newRig(t, false)
	dst := filepath.Join(r.dir, "agent")
	writeFile(t, dst, "previous version")
	for _, end := range []string{"cancel", "drop"} {
		t.Run(end, func(t *testing.T) {
			c := r.dial(t)
			block := make(chan struct{})
			defer close(block)
			// Seek reports a size the reader never delivers.
			src := struct {
				io.Reader
				io.Seeker
			}{&stallReader{n: 64 << 10, block: block}, fixedSize(1 << 20)}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Upload(ctx, dst, src, 0o755) }()
			waitFor(t, "part of the upload to arrive", func() bool {
				st, err := os.Stat(dst + uploadSuffix)
				return err == nil && st.Size() == 64<<10
			})
			if end == "cancel" {
				cancel()
			} else {
				r.srv.dropConns()
			}
			if err := <-done; err == nil {
				t.Fatal("cut upload succeeded")
			}
			waitFor(t, "the temporary file to be removed", func() bool { return !exists(dst + uploadSuffix) })
			if b, _ := os.ReadFile(dst); string(b) != "previous version" {
				t.Fatalf("%s was overwritten by a cut upload: %d bytes", dst, len(b))
			}
		})
	}
}

// fixedSize is a Seeker over a stream of a given size.
type fixedSize int64

func (f fixedSize) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekEnd {
		return int64(f), nil
	}
	return 0, nil
}

func TestBootID(t *testing.T) {
	want, err := os.ReadFile(bootIDPath)
	if err != nil {
		t.Skipf("no %s here: %v", bootIDPath, err)
	}
	c := newRig(t, false).dial(t)
	got, err := c.BootID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.TrimSpace(string(want)) {
		t.Fatalf("BootID = %q, want %q", got, want)
	}
}

func TestIsUUID(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"0F8FAD5B-D9CB-469F-A165-70867728950E", false},
		{"0f8fad5b-d9cb-469f-a165-70867728950", false},
		{"0f8fad5bd-9cb-469f-a165-70867728950e", false},
		{"", false},
		{"cat: /proc/sys/kernel/random/boot_id: N", false},
	} {
		if got := isUUID(tc.s); got != tc.ok {
			t.Errorf("isUUID(%q) = %v, want %v", tc.s, got, tc.ok)
		}
	}
}

func TestDone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		silent bool
		cut    func(*rig, *Client)
		cause  string
	}{
		{"server drops the connection", false, func(r *rig, _ *Client) { r.srv.dropConns() }, ""},
		{"keepalive unanswered", true, func(*rig, *Client) {}, "no keepalive reply"},
		{"Close", false, func(_ *rig, c *Client) { c.Close() }, "closed by the harness"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.silent)
			r.cfg.KeepAlive = 50 * time.Millisecond
			c := r.dial(t)
			if !tc.silent {
				select {
				case <-c.Done():
					t.Fatal("Done closed on a live connection")
				case <-time.After(300 * time.Millisecond): // several keepalives answered
				}
			}
			tc.cut(r, c)
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("Done not closed after the connection ended")
			}
			_, err := c.Output(t.Context(), "true")
			if !errors.Is(err, ErrConnLost) || !strings.Contains(err.Error(), tc.cause) {
				t.Fatalf("Output after the end: %v, want ErrConnLost with %q", err, tc.cause)
			}
		})
	}
}

func TestStreamConnLost(t *testing.T) {
	r := newRig(t, false)
	c := r.dial(t)
	out := newLineWriter("up\n")
	done := make(chan error, 1)
	go func() { done <- c.Stream(t.Context(), "echo up; sleep 30", nil, out, nil) }()
	select {
	case <-out.seen:
	case <-time.After(5 * time.Second):
		t.Fatal("command did not start")
	}
	r.srv.dropConns()
	select {
	case err := <-done:
		if !errors.Is(err, ErrConnLost) {
			t.Fatalf("Stream error %v, want ErrConnLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stream did not return after the connection dropped")
	}
}

func TestWaitBackDial(t *testing.T) {
	r := newRig(t, false)
	c := r.dial(t)
	id, err := c.BootID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r.srv.dropConns()
	<-c.Done()
	back, cb, err := WaitBack(t.Context(), id, Backoff{Initial: time.Millisecond, Tries: 3},
		func(ctx context.Context) (*Client, error) { return Dial(ctx, r.cfg) }, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if cb.Rebooted || cb.BootID != id || cb.Tries != 1 {
		t.Fatalf("Comeback = %+v, want a blip with boot_id %s after 1 try", cb, id)
	}
}

// u-root's sshd (the board VM's) replies to exec only after the command
// ends, and the command first waits for stdin EOF: a client that waits for
// the reply before sending EOF deadlocks. Output and Upload must not.
func TestLateExecReply(t *testing.T) {
	r := newRig(t, false)
	r.srv.lateReply = true
	c := r.dial(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := c.Output(ctx, "cat; echo ok")
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("Output = %q, %v; want ok and no error", out, err)
	}
	if _, err := c.Output(ctx, "exit 3"); err == nil {
		t.Error("exit 3 gave no error")
	}
	dst := filepath.Join(t.TempDir(), "agent")
	if err := c.Upload(ctx, dst, strings.NewReader("binary"), 0o755); err != nil {
		t.Fatalf("Upload: %v", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "binary" {
		t.Errorf("uploaded %q", b)
	}
}
