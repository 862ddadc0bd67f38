package ssh

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// addrForm is the accepted syntax, quoted in every parse error so the user
// sees what to type instead.
const addrForm = "ssh://user@host[:port]"

// defaultPort is the SSH port used when the address names none.
const defaultPort = 22

// Addr is a board's SSH address: who to log in as, and where.
type Addr struct {
	User string
	Host string // a name or an IP; IPv6 without brackets
	Port int
}

// ParseAddr parses "ssh://user@host[:port]" or "user@host[:port]"; IPv6
// hosts go in brackets ("ssh://user@[::1]:22"). The port defaults to 22. The
// user is required: guessing the local user name gives confusing auth
// failures on boards that only have root.
func ParseAddr(s string) (Addr, error) {
	fail := func(why string) (Addr, error) {
		return Addr{}, fmt.Errorf("ssh address %q: %s: %s", s, addrForm, why)
	}
	if s == "" {
		return fail("empty")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return fail("contains whitespace")
	}
	raw := s
	if i := strings.Index(s, "://"); i >= 0 {
		if scheme := s[:i]; !strings.EqualFold(scheme, "ssh") {
			return fail(fmt.Sprintf("scheme %q not supported, only ssh://", scheme))
		}
	} else if strings.HasPrefix(strings.ToLower(s), "ssh:") {
		return fail("missing // after ssh:")
	} else {
		raw = "ssh://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's message already quotes the bad part (e.g. an invalid port).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fail(err.Error())
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fail("paths, queries and fragments are not allowed")
	}
	if u.User == nil || u.User.Username() == "" {
		return fail("user missing")
	}
	if _, has := u.User.Password(); has {
		// A password on the command line ends up in shell history and ps.
		return fail("passwords are not accepted; use a key or ssh-agent")
	}
	host := u.Hostname()
	if host == "" {
		return fail("host missing")
	}
	if !strings.HasPrefix(u.Host, "[") && strings.Contains(host, ":") {
		return fail("IPv6 addresses need brackets, e.g. ssh://user@[::1]:22")
	}
	if strings.HasPrefix(u.Host, "[") && net.ParseIP(host) == nil {
		return fail(fmt.Sprintf("%q in brackets is not an IPv6 address", host))
	}
	port := defaultPort
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fail(fmt.Sprintf("port %q not in 1-65535", p))
		}
		port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return fail("empty port")
	}
	return Addr{User: u.User.Username(), Host: host, Port: port}, nil
}

// String formats the address as ssh://user@host:port, the form ParseAddr
// reads back, with IPv6 hosts in brackets.
func (a Addr) String() string {
	return "ssh://" + url.User(a.User).String() + "@" + a.HostPort()
}

// HostPort is host:port for net.Dial, and also the name known_hosts is
// checked against (knownhosts turns a non-22 port into "[host]:port").
func (a Addr) HostPort() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(a.Port))
}
