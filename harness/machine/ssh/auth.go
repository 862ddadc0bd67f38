package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// agentDialTimeout bounds connecting to a local agent socket: a stale
// $SSH_AUTH_SOCK from a dead session must not stall a soak's reconnect.
const agentDialTimeout = 2 * time.Second

// defaultIdentities are tried, in this order, when Auth names no files; the
// same keys OpenSSH would try, minus the ones it deprecated.
const defaultIdentities = "id_ed25519 id_ecdsa id_rsa"

// Auth lists auth methods: the ssh-agent at AgentSocket (if set and
// reachable), then the identity files given or, if none given,
// ~/.ssh/id_ed25519, id_ecdsa and id_rsa that exist.
type Auth struct {
	// IdentityFiles are private key files. A named file that is missing,
	// unreadable or encrypted (without an agent) is an error; a default one
	// is skipped.
	IdentityFiles []string
	// AgentSocket is the ssh-agent socket; empty means $SSH_AUTH_SOCK.
	AgentSocket string
}

// Methods returns the auth methods and a Closer for the agent connection,
// which must stay open until the handshake ends; the Closer is never nil.
//
// All keys go into a single public key method: x/crypto skips every method of
// a type that already failed, so separate agent and file methods would never
// get past the first one that the board rejects.
func (a Auth) Methods() ([]ssh.AuthMethod, io.Closer, error) {
	var (
		tried   []string
		signers []ssh.Signer
		closer  io.Closer = nopCloser{}
		ag      agent.ExtendedAgent
	)
	sock := a.AgentSocket
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock == "" {
		tried = append(tried, "ssh-agent ($SSH_AUTH_SOCK unset)")
	} else if conn, err := net.DialTimeout("unix", sock, agentDialTimeout); err != nil {
		tried = append(tried, fmt.Sprintf("ssh-agent at %s (%v)", sock, err))
	} else {
		ag, closer = agent.NewClient(conn), conn
		tried = append(tried, "ssh-agent at "+sock)
	}

	files, explicit := a.IdentityFiles, true
	if len(files) == 0 {
		explicit = false
		if home, err := os.UserHomeDir(); err == nil {
			for _, name := range strings.Fields(defaultIdentities) {
				files = append(files, filepath.Join(home, ".ssh", name))
			}
		}
	}
	for _, f := range files {
		s, err := loadIdentity(f, ag != nil)
		switch {
		case err == nil && s != nil:
			signers = append(signers, s)
			tried = append(tried, f)
		case err == nil:
			tried = append(tried, f+" (encrypted, left to the agent)")
		case !explicit && errors.Is(err, fs.ErrNotExist):
			tried = append(tried, f+" (missing)")
		case !explicit:
			// A broken default key must not block a working agent, but it is
			// still worth naming if nothing else works either.
			tried = append(tried, fmt.Sprintf("%s (%v)", f, err))
		default:
			closer.Close()
			return nil, nopCloser{}, err
		}
	}
	if ag == nil && len(signers) == 0 {
		closer.Close()
		return nil, nopCloser{}, fmt.Errorf("no SSH credentials: tried %s: start ssh-agent and ssh-add a key, or pass an identity file the board's authorized_keys accepts",
			strings.Join(tried, ", "))
	}
	method := ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		if ag == nil {
			return signers, nil
		}
		fromAgent, err := ag.Signers()
		if err != nil {
			// The files may still work; the auth error lists what was offered.
			return signers, nil
		}
		return append(fromAgent, dedupe(signers, fromAgent)...), nil
	})
	return []ssh.AuthMethod{method}, closer, nil
}

// loadIdentity parses a private key file. An encrypted key returns (nil, nil)
// when an agent is there to hold it, since there is no terminal to ask for the
// passphrase during an unattended soak.
func loadIdentity(path string, haveAgent bool) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read identity file: %w: pass a readable private key file", err)
	}
	s, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &missing) && haveAgent:
		return nil, nil
	case errors.As(err, &missing):
		return nil, fmt.Errorf("identity file %s is encrypted and no ssh-agent is reachable to decrypt it: run `eval $(ssh-agent) && ssh-add %s`, or use an unencrypted key reserved for the board", path, path)
	default:
		return nil, fmt.Errorf("identity file %s: %v: pass an OpenSSH or PEM private key", path, err)
	}
}

// dedupe drops the file keys the agent already offers: every offer of the
// same key counts against the server's MaxAuthTries.
func dedupe(files, fromAgent []ssh.Signer) []ssh.Signer {
	var out []ssh.Signer
	for _, f := range files {
		dup := false
		for _, a := range fromAgent {
			if bytes.Equal(f.PublicKey().Marshal(), a.PublicKey().Marshal()) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

// nopCloser lets Methods always return a Closer, so callers need no nil check.
type nopCloser struct{}

// Close does nothing.
func (nopCloser) Close() error { return nil }
