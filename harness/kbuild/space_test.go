package kbuild

import (
	"os"
	"path/filepath"
	"testing"
)

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
