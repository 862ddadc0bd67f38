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
