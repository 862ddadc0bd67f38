package tracefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// available is available_filter_functions as 7.3 prints it: vmlinux's
// records first (a weak function's leftover among them, and a static
// function whose name two records share), then a module's.
const available = `do_one_initcall
__ftrace_invalid_address___64
vfs_read
cleanup_module
cleanup_module
do_nanosleep
fth_target_counted [fth_target]
fth_scale_0000 [fth_scale]
vfs_write
`

func TestReadFuncIndex(t *testing.T) {
	f := fakeRoot(t)
	if err := os.WriteFile(filepath.Join(f.Root, fileAvailable), []byte(available), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := ReadFuncIndex(f.Root)
	if err != nil {
		t.Fatal(err)
	}
	// vmlinux's four names, the invalid record counted but not named, and
	// nothing from the first module's line on (vfs_write there is not
	// vmlinux's: its index would move as modules come and go).
	if x.Len() != 4 {
		t.Errorf("Len = %d, want 4: %v", x.Len(), x.byName)
	}
	f.Index = x
	inst, err := f.Instance("fth-x")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Index != x {
		t.Fatal("an instance does not share its parent's index")
	}
	for _, fn := range []string{fileFilter} {
		if err := os.WriteFile(filepath.Join(inst.Root, fn), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		write func() error
		want  string
	}{
		{"set", func() error { return inst.SetFilter("vfs_read", "do_nanosleep") }, "3 6\n"},
		{"every record of a shared name", func() error { return inst.AddFilter("cleanup_module") }, "3 6\n4 5\n"},
		{"a module's function keeps its name", func() error { return inst.AddFilter("fth_target_counted") }, "3 6\n4 5\nfth_target_counted\n"},
		{"remove", func() error { return inst.RemoveFilter("cleanup_module") }, "3 6\n4 5\nfth_target_counted\n!4 !5\n"},
		{"a glob and a command stay", func() error { return inst.SetFilter("fth_target_*:mod:fth_target", "vfs_*") }, "fth_target_*:mod:fth_target vfs_*\n"},
		{"clear", func() error { return inst.SetFilter() }, ""},
	}
	for _, tt := range tests {
		if err := tt.write(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := content(t, inst, fileFilter); got != tt.want {
			t.Errorf("%s: set_ftrace_filter = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNoIndexWritesNames(t *testing.T) {
	f := fakeRoot(t)
	if err := f.SetFilter("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveFilter("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if got := content(t, f, fileFilter); !strings.HasPrefix(got, "vfs_read\n") || !strings.HasSuffix(got, "!vfs_read\n") {
		t.Errorf("set_ftrace_filter = %q", got)
	}
}
