package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptArgs runs a script through scriptArgs with the host's sh, as
// the guest runs it with gosh: its arguments arrive as $1.., quoted, and
// its exit status is the shell's.
func TestScriptArgs(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "it's run.sh")
	if err := os.WriteFile(script, []byte("echo \"$#:$1:$2\"\n[ \"$1\" = control ] && exit 0\nexit 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		out  string
		exit int
	}{
		{nil, "0::", 1},
		{[]string{"control"}, "1:control:", 0},
		{[]string{"a b", "it's"}, "2:a b:it's", 1},
	} {
		out, err := exec.Command("sh", scriptArgs(script, tc.args)...).Output()
		exit := 0
		if ee, ok := err.(*exec.ExitError); ok {
			exit = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(out)); got != tc.out || exit != tc.exit {
			t.Errorf("args %q: printed %q, exit %d; want %q, exit %d", tc.args, got, exit, tc.out, tc.exit)
		}
	}
}
