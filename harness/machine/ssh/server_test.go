package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// testServer is an in-process sshd on 127.0.0.1 that behaves like OpenSSH
// where the client relies on it: exec runs /bin/sh -c, exit-status is sent,
// "signal" kills the process, and closing the channel closes the process's
// stdin.
type testServer struct {
	t       *testing.T
	ln      net.Listener
	hostKey ssh.Signer
	// silent makes the server swallow global requests without replying, like
	// a board that died with the TCP connection still open.
	silent bool
	// lateReply answers exec only once the command has exited, and its
	// command waits for stdin EOF first: u-root's sshd, which the board VM
	// runs, does both.
	lateReply bool

	mu    sync.Mutex
	conns []net.Conn
	procs map[*exec.Cmd]bool
	wg    sync.WaitGroup
}

// newTestServer starts a server that accepts only clientKey.
func newTestServer(t *testing.T, clientKey ssh.PublicKey, silent bool) *testServer {
	t.Helper()
	hostKey := newSigner(t)
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), clientKey.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, hostKey: hostKey, silent: silent, procs: map[*exec.Cmd]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(nc, cfg)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

// addr is the server's address for user.
func (s *testServer) addr(user string) Addr {
	a := s.ln.Addr().(*net.TCPAddr)
	return Addr{User: user, Host: a.IP.String(), Port: a.Port}
}

// dropConns closes every client connection, as a board that rebooted would.
func (s *testServer) dropConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
}

// close stops the server and kills what it still runs.
func (s *testServer) close() {
	s.ln.Close()
	s.dropConns()
	s.mu.Lock()
	for cmd := range s.procs {
		killGroup(cmd)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *testServer) serveConn(nc net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		nc.Close()
		return
	}
	defer sc.Close()
	go func() {
		for r := range reqs {
			if !s.silent {
				r.Reply(false, nil)
			}
		}
	}()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveSession(ch, creqs)
		}()
	}
}

func (s *testServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	exited := make(chan int, 1)
	for {
		select {
		case status := <-exited:
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
			return
		case r, ok := <-reqs:
			if !ok {
				// The client closed the channel: the process keeps running
				// with its stdin closed, as under OpenSSH.
				if cmd != nil {
					<-exited
				}
				return
			}
			switch r.Type {
			case "exec":
				var p struct{ Command string }
				if cmd != nil || ssh.Unmarshal(r.Payload, &p) != nil {
					r.Reply(false, nil)
					continue
				}
				if s.lateReply {
					// Like u-root: run to completion (stdin EOF included), reply, close.
					c := exec.Command("/bin/sh", "-c", p.Command)
					c.Stdin, c.Stdout, c.Stderr = ch, ch, ch.Stderr()
					err := c.Run()
					status := 0
					if err != nil {
						status = c.ProcessState.ExitCode()
					}
					ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
					r.Reply(true, nil)
					return
				}
				cmd = s.start(p.Command, ch, exited)
				r.Reply(cmd != nil, nil)
			case "signal":
				if cmd != nil {
					killGroup(cmd)
				}
				if r.WantReply {
					r.Reply(true, nil)
				}
			default:
				if r.WantReply {
					r.Reply(false, nil)
				}
			}
		}
	}
}

// start runs command wired to ch and sends its status to exited.
func (s *testServer) start(command string, ch ssh.Channel, exited chan<- int) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	cmd.WaitDelay = 5 * time.Second
	// Own process group, so that a kill also reaches the children of sh,
	// which would otherwise hold stdout open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil
	}
	if err := cmd.Start(); err != nil {
		return nil
	}
	s.mu.Lock()
	s.procs[cmd] = true
	s.mu.Unlock()
	go func() {
		// EOF or close from the client ends the copy: the process then reads EOF.
		io.Copy(stdin, ch)
		stdin.Close()
	}()
	go func() {
		cmd.Wait()
		s.mu.Lock()
		delete(s.procs, cmd)
		s.mu.Unlock()
		status := cmd.ProcessState.ExitCode()
		if status < 0 {
			status = 128 + int(syscall.SIGKILL)
		}
		exited <- status
	}()
	return cmd
}

// killGroup SIGKILLs the process group of cmd.
func killGroup(cmd *exec.Cmd) {
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// newSigner makes a fresh ed25519 key.
func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeIdentity writes a fresh ed25519 private key file (encrypted when
// passphrase is set) and returns its path and public key.
func writeIdentity(t *testing.T, dir, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return path, sshPub
}

// writeKnownHosts writes a known_hosts file with one line per key for addr.
func writeKnownHosts(t *testing.T, dir, addr string, keys ...ssh.PublicKey) string {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# test known_hosts\n")
	for _, k := range keys {
		b.WriteString(knownhosts.Line([]string{knownhosts.Normalize(addr)}, k) + "\n")
	}
	path := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
