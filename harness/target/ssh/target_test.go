package ssh

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	good := []struct {
		in   string
		want Target
		str  string
	}{
		{"ssh://root@board", Target{"root", "board", 22}, "ssh://root@board:22"},
		{"ssh://root@board:2222", Target{"root", "board", 2222}, "ssh://root@board:2222"},
		{"root@board", Target{"root", "board", 22}, "ssh://root@board:22"},
		{"root@10.0.0.5:2222", Target{"root", "10.0.0.5", 2222}, "ssh://root@10.0.0.5:2222"},
		{"ssh://user@[::1]:22", Target{"user", "::1", 22}, "ssh://user@[::1]:22"},
		{"user@[fe80::1]", Target{"user", "fe80::1", 22}, "ssh://user@[fe80::1]:22"},
		{"SSH://pi@rpi.lan:65535", Target{"pi", "rpi.lan", 65535}, "ssh://pi@rpi.lan:65535"},
	}
	for _, tc := range good {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTarget(tc.in)
			if err != nil {
				t.Fatalf("ParseTarget(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseTarget(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String() = %q, want %q", s, tc.str)
			}
			back, err := ParseTarget(got.String())
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
			got, err := ParseTarget(tc.in)
			if err == nil {
				t.Fatalf("ParseTarget(%q) = %+v, want an error", tc.in, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseTarget(%q) error %q does not contain %q", tc.in, err, tc.want)
			}
			if !strings.Contains(err.Error(), targetForm) {
				t.Errorf("error %q does not show the accepted form", err)
			}
		})
	}
}

func TestTargetAddr(t *testing.T) {
	for _, tc := range []struct {
		t    Target
		want string
	}{
		{Target{"u", "board", 22}, "board:22"},
		{Target{"u", "::1", 2222}, "[::1]:2222"},
	} {
		if got := tc.t.Addr(); got != tc.want {
			t.Errorf("%+v.Addr() = %q, want %q", tc.t, got, tc.want)
		}
	}
}
