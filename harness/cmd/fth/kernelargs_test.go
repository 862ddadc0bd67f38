package main

import (
	"errors"
	"testing"
)

func TestCheckKernelArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"ftrace=nop"}, true},
		{[]string{"ftrace=nop", "kmemleak=on", "nokaslr"}, true},
		{[]string{""}, false},
		{[]string{"a b"}, false},
		{[]string{"x=\"y\""}, false},
		{[]string{"fth.n=3"}, false},
	} {
		err := checkKernelArgs(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("checkKernelArgs(%q) = %v, want ok %v", tc.args, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errUsage) {
			t.Errorf("checkKernelArgs(%q) = %v, not a usage error", tc.args, err)
		}
	}
}
