package modload

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"/lib/modules/fth/ftrace-direct-modify.ko": "ftrace_direct_modify",
		"fth_target.ko": "fth_target",
		"ftrace-ops":    "ftrace_ops",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.ko", "a.ko", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.ko"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a.ko"), filepath.Join(dir, "b.ko")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if got, err := List(filepath.Join(dir, "missing")); err != nil || got != nil {
		t.Errorf("List(missing) = %v, %v; want nothing and no error", got, err)
	}
}
