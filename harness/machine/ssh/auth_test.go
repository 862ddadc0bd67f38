package ssh

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/agent"
)

// startAgent serves an in-memory ssh-agent on a unix socket in dir.
func startAgent(t *testing.T, dir string) (string, agent.Agent) {
	t.Helper()
	sock := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return sock, keyring
}

func TestAuthMethods(t *testing.T) {
	dir := t.TempDir()
	plain, _ := writeIdentity(t, t.TempDir(), "")
	encrypted, _ := writeIdentity(t, t.TempDir(), "s3cret")
	agentSock, _ := startAgent(t, t.TempDir())
	garbage := filepath.Join(dir, "garbage")
	writeFile(t, garbage, "not a key")

	for _, tc := range []struct {
		name    string
		auth    Auth
		wantErr []string // nil: methods returned
	}{
		{name: "plain key", auth: Auth{IdentityFiles: []string{plain}}},
		{name: "agent only", auth: Auth{AgentSocket: agentSock}},
		{name: "encrypted key with agent", auth: Auth{IdentityFiles: []string{encrypted}, AgentSocket: agentSock}},
		{name: "nothing",
			wantErr: []string{"no SSH credentials", "$SSH_AUTH_SOCK unset", "id_ed25519 (missing)", "id_ecdsa (missing)", "id_rsa (missing)"}},
		{name: "encrypted key without agent", auth: Auth{IdentityFiles: []string{encrypted}},
			wantErr: []string{encrypted, "encrypted", "ssh-add " + encrypted}},
		{name: "missing key", auth: Auth{IdentityFiles: []string{filepath.Join(dir, "nope")}},
			wantErr: []string{filepath.Join(dir, "nope"), "no such file"}},
		{name: "not a key", auth: Auth{IdentityFiles: []string{garbage}},
			wantErr: []string{garbage, "private key"}},
		{name: "dead agent socket", auth: Auth{AgentSocket: filepath.Join(dir, "dead.sock")},
			wantErr: []string{"no SSH credentials", "ssh-agent at " + filepath.Join(dir, "dead.sock")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Keep the developer's own agent and keys out of the test.
			t.Setenv("HOME", t.TempDir())
			t.Setenv("SSH_AUTH_SOCK", "")
			methods, closer, err := tc.auth.Methods()
			if closer == nil {
				t.Fatal("Methods returned a nil Closer")
			}
			defer closer.Close()
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Methods: %v", err)
				}
				if len(methods) != 1 {
					t.Fatalf("want a single public key method, got %d", len(methods))
				}
				return
			}
			if err == nil {
				t.Fatalf("Methods succeeded, want an error with %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if errors.Is(err, ErrHostKey) {
				t.Errorf("auth error %v wraps ErrHostKey", err)
			}
		})
	}
}

// agentKey wraps a parsed private key for agent.Keyring.Add.
func agentKey(priv any) agent.AddedKey { return agent.AddedKey{PrivateKey: priv} }
