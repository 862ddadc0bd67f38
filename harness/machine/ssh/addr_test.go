package ssh

import (
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	good := []struct {
		in   string
		want Addr
		str  string
	}{
		{"ssh://root@board", Addr{"root", "board", 22}, "ssh://root@board:22"},
		{"ssh://root@board:2222", Addr{"root", "board", 2222}, "ssh://root@board:2222"},
		{"root@board", Addr{"root", "board", 22}, "ssh://root@board:22"},
		{"root@10.0.0.5:2222", Addr{"root", "10.0.0.5", 2222}, "ssh://root@10.0.0.5:2222"},
		{"ssh://user@[::1]:22", Addr{"user", "::1", 22}, "ssh://user@[::1]:22"},
		{"user@[fe80::1]", Addr{"user", "fe80::1", 22}, "ssh://user@[fe80::1]:22"},
		{"SSH://pi@rpi.lan:65535", Addr{"pi", "rpi.lan", 65535}, "ssh://pi@rpi.lan:65535"},
	}
	for _, tc := range good {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAddr(tc.in)
			if err != nil {
				t.Fatalf("ParseAddr(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseAddr(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String() = %q, want %q", s, tc.str)
			}
			back, err := ParseAddr(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q: %+v, %v", got.String(), back, err)
			}
		})
	}

	bad := []struct {
		in, want string
	}{
		{"", "empty"},
		{"board", "ssh://user@host[:port]: user missing"},
		{"ssh://board:22", "ssh://user@host[:port]: user missing"},
		{"@board", "user missing"},
		{"http://root@board", `scheme "http" not supported`},
		{"ssh://root@", "host missing"},
		{"ssh://root@:22", "host missing"},
		{"root@board:0", `port "0" not in 1-65535`},
		{"root@board:70000", `port "70000" not in 1-65535`},
		{"root@board:abc", "invalid port"},
		{"root@board:", "empty port"},
		{"ssh://root@board/tmp", "paths, queries and fragments are not allowed"},
		{"ssh://root@board?x=1", "paths, queries and fragments are not allowed"},
		{"root:secret@board", "passwords are not accepted"},
		{"root@::1", "IPv6 addresses need brackets"},
		{"root@bo ard", "whitespace"},
		{"ssh:root@board", "missing //"},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.in, func(t *testing.T) {
			got, err := ParseAddr(tc.in)
			if err == nil {
				t.Fatalf("ParseAddr(%q) = %+v, want an error", tc.in, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseAddr(%q) error %q does not contain %q", tc.in, err, tc.want)
			}
			if !strings.Contains(err.Error(), addrForm) {
				t.Errorf("error %q does not show the accepted form", err)
			}
		})
	}
}

func TestAddrHostPort(t *testing.T) {
	for _, tc := range []struct {
		a    Addr
		want string
	}{
		{Addr{"u", "board", 22}, "board:22"},
		{Addr{"u", "::1", 2222}, "[::1]:2222"},
	} {
		if got := tc.a.HostPort(); got != tc.want {
			t.Errorf("%+v.HostPort() = %q, want %q", tc.a, got, tc.want)
		}
	}
}
