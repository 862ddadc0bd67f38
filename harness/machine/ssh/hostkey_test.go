package ssh

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestHostKeyCallback(t *testing.T) {
	const addr = "127.0.0.1:2222"
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	right := newSigner(t).PublicKey()
	wrong := newSigner(t).PublicKey()

	for _, tc := range []struct {
		name    string
		known   []ssh.PublicKey // nil: no known_hosts file
		host    string          // dialed address; addr if empty
		offered ssh.PublicKey
		wantErr []string // nil: accepted
	}{
		{name: "right key", known: []ssh.PublicKey{right}, offered: right},
		{name: "changed key", known: []ssh.PublicKey{right}, offered: wrong,
			wantErr: []string{"CHANGED", ssh.FingerprintSHA256(wrong), ssh.FingerprintSHA256(right), "known_hosts:2", "ssh-keyscan -p 2222 127.0.0.1"}},
		{name: "unknown host", known: []ssh.PublicKey{right}, host: "127.0.0.2:22", offered: right,
			wantErr: []string{"127.0.0.2:22 is not in known_hosts", "ssh-keyscan -p 22 127.0.0.2 >> ~/.ssh/known_hosts", ssh.FingerprintSHA256(right)}},
		{name: "same host other port", known: []ssh.PublicKey{right}, host: "127.0.0.1:22", offered: right,
			wantErr: []string{"not in known_hosts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeKnownHosts(t, t.TempDir(), addr, tc.known...)
			cb, err := HostKeys{KnownHosts: []string{file, filepath.Join(t.TempDir(), "absent")}}.Callback()
			if err != nil {
				t.Fatal(err)
			}
			host := tc.host
			if host == "" {
				host = addr
			}
			err = cb(host, remote, tc.offered)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("right key refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrHostKey) {
				t.Fatalf("error %v does not wrap ErrHostKey", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestHostKeysNoFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "known_hosts")
	_, err := HostKeys{KnownHosts: []string{missing}}.Callback()
	if !errors.Is(err, ErrHostKey) {
		t.Fatalf("error %v does not wrap ErrHostKey", err)
	}
	for _, w := range []string{missing, "ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts", "--known-hosts", "--insecure-host-key"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
	// Dial knows the address, so its message has the real command.
	_, err = HostKeys{KnownHosts: []string{missing}}.policy(Addr{"root", "board", 2200})
	if err == nil || !strings.Contains(err.Error(), "ssh-keyscan -p 2200 board >> ~/.ssh/known_hosts") {
		t.Errorf("policy error %v does not give the keyscan command for the address", err)
	}
}

func TestHostKeysInsecure(t *testing.T) {
	var logs bytes.Buffer
	cb, err := HostKeys{Insecure: true, Log: slog.New(slog.NewTextHandler(&logs, nil))}.Callback()
	if err != nil {
		t.Fatal(err)
	}
	key := newSigner(t).PublicKey()
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	for range 3 { // the handshake and two re-keys
		if err := cb("board:22", remote, key); err != nil {
			t.Fatalf("insecure policy refused a key: %v", err)
		}
	}
	out := logs.String()
	if n := strings.Count(out, "host key NOT verified (--insecure-host-key)"); n != 1 {
		t.Errorf("want one warning per connection, got %d:\n%s", n, out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, ssh.FingerprintSHA256(key)) {
		t.Errorf("warning lacks the level or the fingerprint:\n%s", out)
	}
}

func TestKnownAlgorithms(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, err := ssh.NewPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ed := newSigner(t).PublicKey()
	for _, tc := range []struct {
		name  string
		known []ssh.PublicKey
		want  []string
	}{
		{"none", nil, nil},
		{"ed25519", []ssh.PublicKey{ed}, []string{ssh.KeyAlgoED25519}},
		{"rsa and ed25519", []ssh.PublicKey{rsaPub, ed}, []string{ssh.KeyAlgoED25519, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := writeKnownHosts(t, dir, "board:2222", tc.known...)
			p, err := HostKeys{KnownHosts: []string{file}}.policy(Addr{"root", "board", 2222})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.algorithms, tc.want) {
				t.Errorf("algorithms = %v, want %v", p.algorithms, tc.want)
			}
		})
	}
}
