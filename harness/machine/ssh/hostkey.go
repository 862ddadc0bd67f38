package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ftrace-harness/fth/harness/internal/shell"
)

// ErrHostKey is wrapped by every host key refusal (changed, unknown or
// revoked key), so callers can tell it from a network failure with errors.Is
// and never retry it: retrying cannot fix a key, and silently retrying a
// possibly intercepted connection is the wrong reflex.
var ErrHostKey = errors.New("host key rejected")

// HostKeys is the host key policy.
type HostKeys struct {
	// KnownHosts are known_hosts files; the ones that do not exist are
	// skipped. Empty means ~/.ssh/known_hosts.
	KnownHosts []string
	// Insecure accepts any host key. Set it only from an explicit
	// --insecure-host-key flag: it is logged as a warning on every connection.
	Insecure bool
	// Log receives the insecure warning; nil means slog.Default().
	Log *slog.Logger
}

// Callback returns the host key callback for ssh.ClientConfig. With Insecure,
// the callback warns once, on its first use: take a fresh callback per
// connection (Dial does) so that every connection is warned about.
func (h HostKeys) Callback() (ssh.HostKeyCallback, error) {
	p, err := h.policy(Addr{})
	if err != nil {
		return nil, err
	}
	return p.callback, nil
}

// hostKeyPolicy is a ready callback plus what Dial needs beyond it.
type hostKeyPolicy struct {
	callback ssh.HostKeyCallback
	// algorithms are the host key algorithms to ask the server for, from the
	// key types known_hosts holds for the address; nil means the library's
	// default list.
	algorithms []string
}

// policy builds the callback. a, when known, makes the "no known_hosts"
// message name the real host and port instead of placeholders.
func (h HostKeys) policy(a Addr) (hostKeyPolicy, error) {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	if h.Insecure {
		var once sync.Once
		return hostKeyPolicy{callback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			// The callback also runs on every re-key of a long soak; one
			// warning per connection is enough to be seen without flooding.
			once.Do(func() {
				log.Warn("host key NOT verified (--insecure-host-key)",
					"host", hostname, "remote", remote.String(),
					"key_type", key.Type(), "fingerprint", ssh.FingerprintSHA256(key))
			})
			return nil
		}}, nil
	}
	files := h.KnownHosts
	if len(files) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return hostKeyPolicy{}, fmt.Errorf("%w: cannot find ~/.ssh/known_hosts (%v): pass --known-hosts FILE", ErrHostKey, err)
		}
		files = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	var existing []string
	for _, f := range files {
		_, err := os.Stat(f)
		switch {
		case err == nil:
			existing = append(existing, f)
		case errors.Is(err, fs.ErrNotExist):
			log.Debug("known_hosts file does not exist, skipped", "file", f)
		default:
			return hostKeyPolicy{}, fmt.Errorf("%w: known_hosts file %s: %v", ErrHostKey, f, err)
		}
	}
	if len(existing) == 0 {
		return hostKeyPolicy{}, fmt.Errorf("%w: no known_hosts file found (tried %s): record the board's key with `%s`, or pass --known-hosts FILE, or --insecure-host-key to skip verification",
			ErrHostKey, strings.Join(files, ", "), keyscanFix(a.Host, a.Port))
	}
	db, err := knownhosts.New(existing...)
	if err != nil {
		return hostKeyPolicy{}, fmt.Errorf("%w: reading known_hosts %s: %v: fix or remove the bad line", ErrHostKey, strings.Join(existing, ", "), err)
	}
	p := hostKeyPolicy{callback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		return explainHostKeyError(db(hostname, remote, key), hostname, key, existing)
	}}
	if a.Host != "" {
		p.algorithms = knownAlgorithms(db, a.HostPort())
	}
	return p, nil
}

// explainHostKeyError turns knownhosts' terse errors into ones that say what
// happened and what to do about it.
func explainHostKeyError(err error, hostname string, key ssh.PublicKey, files []string) error {
	if err == nil {
		return nil
	}
	host, port := splitHostPort(hostname)
	offered := key.Type() + " " + ssh.FingerprintSHA256(key)
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.As(err, &keyErr) && len(keyErr.Want) > 0:
		var known []string
		for _, w := range keyErr.Want {
			known = append(known, fmt.Sprintf("%s:%d has %s %s", w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key)))
		}
		return fmt.Errorf("%w: host key for %s CHANGED: the board offered %s, but %s. "+
			"If the board was reinstalled, delete the old key (ssh-keygen -R %s -f %s) and re-run `%s`; otherwise someone may be intercepting the connection",
			ErrHostKey, hostname, offered, strings.Join(known, "; "), shell.Quote(knownhosts.Normalize(hostname)), keyErr.Want[0].Filename, keyscanFix(host, port))
	case errors.As(err, &keyErr):
		return fmt.Errorf("%w: %s is not in known_hosts (%s); it offered %s: check that fingerprint on the board's console (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then run `%s`, or pass --known-hosts FILE, or --insecure-host-key",
			ErrHostKey, hostname, strings.Join(files, ", "), offered, keyscanFix(host, port))
	case errors.As(err, &revoked):
		return fmt.Errorf("%w: host key %s of %s is marked @revoked at %s:%d", ErrHostKey, offered, hostname, revoked.Revoked.Filename, revoked.Revoked.Line)
	default:
		return fmt.Errorf("%w: %s: %v", ErrHostKey, hostname, err)
	}
}

// knownAlgorithms returns the host key algorithms for the key types known_hosts
// holds for addr. Without it the server may pick a type we have no line for
// (ed25519 when only the RSA key was recorded), which knownhosts reports as a
// changed key: a false alarm that would teach users to ignore the real one.
func knownAlgorithms(db ssh.HostKeyCallback, addr string) []string {
	// Asking with a throwaway key makes knownhosts list every known key of
	// the host in the KeyError; there is no other API for that.
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil
	}
	probe, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil
	}
	var keyErr *knownhosts.KeyError
	if !errors.As(db(addr, &net.TCPAddr{IP: net.IPv4zero}, probe), &keyErr) {
		return nil
	}
	types := map[string]bool{}
	for _, w := range keyErr.Want {
		types[w.Key.Type()] = true
	}
	// knownhosts lists the keys in map order; a fixed order keeps the
	// negotiated key, and so any error message, the same from run to run.
	var algos []string
	for _, t := range []string{ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521} {
		if types[t] {
			algos = append(algos, t)
			delete(types, t)
		}
	}
	rest := slices.Sorted(maps.Keys(types))
	for _, t := range rest {
		if t == ssh.KeyAlgoRSA {
			// An RSA key signs with SHA-2 on any sshd of the last decade;
			// ssh-rsa (SHA-1) stays last for the ancient ones.
			algos = append(algos, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
			continue
		}
		algos = append(algos, t)
	}
	return algos
}

// keyscanFix is the command that records a board's host key.
func keyscanFix(host string, port int) string {
	if host == "" {
		return "ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts"
	}
	if port == 0 {
		port = defaultPort
	}
	return fmt.Sprintf("ssh-keyscan -p %d %s >> ~/.ssh/known_hosts", port, host)
}

// splitHostPort splits the address the callback is given; a bare host means
// port 22.
func splitHostPort(hostport string) (string, int) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return hostport, defaultPort
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return host, defaultPort
	}
	return host, port
}
