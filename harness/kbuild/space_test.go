package kbuild

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	if err := checkSpace(dir, 1); err != nil {
		t.Skipf("this machine's %s has no %d bytes to spare: %v", dir, spaceMargin, err)
	}
	err := checkSpace(dir, 1<<60)
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("checkSpace(an exabyte) = %v, want ErrNoSpace", err)
	}
	if err := checkSpace(filepath.Join(dir, "missing"), 1); err == nil || errors.Is(err, ErrNoSpace) {
		t.Errorf("checkSpace(missing dir) = %v, want the statfs error", err)
	}
}

func TestTreeSize(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, n := range map[string]int{"x": 10, "a/y": 20, "a/b/z": 30} {
		if err := os.WriteFile(filepath.Join(dir, p), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("x", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if n, err := treeSize(dir); err != nil || n != 60 {
		t.Errorf("treeSize = %d, %v; want 60", n, err)
	}
}
