package choice

import (
	"errors"
	"testing"
)

type color string

var errColor = errors.New("unknown color")

func TestParse(t *testing.T) {
	all := []color{"red", "green"}
	for _, tc := range []struct {
		in, want, err string
	}{
		{"", "red", ""},
		{"green", "green", ""},
		{"blue", "", `unknown color "blue": choose one of red, green`},
	} {
		got, err := Parse(tc.in, all, "red", errColor)
		switch {
		case tc.err == "" && (err != nil || string(got) != tc.want):
			t.Errorf("Parse(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, errColor)):
			t.Errorf("Parse(%q) error = %v; want %q wrapping errColor", tc.in, err, tc.err)
		}
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		c, row, want color
	}{
		{"default", "", "host"},
		{"default", "green", "green"},
		{"red", "green", "red"},
		{"host", "green", "host"},
	} {
		if got := Resolve(tc.c, "default", string(tc.row), color("host")); got != tc.want {
			t.Errorf("Resolve(%q, row %q) = %q, want %q", tc.c, tc.row, got, tc.want)
		}
	}
}
