package kbuild

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestOutputs: what a finished external build leaves that the guest gets:
// at most one module, and the executables kbuild's userprogs built, not
// the objects, command files or sources beside them.
func TestOutputs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]os.FileMode
		module  string
		progs   []string
		wantErr string
	}{
		{
			name: "module and program",
			files: map[string]os.FileMode{"repro.ko": 0o644, "repro.o": 0o644, ".repro.o.cmd": 0o644,
				"attach": 0o755, "attach.c": 0o644, "Makefile": 0o644, "modules.order": 0o644},
			module: "repro.ko", progs: []string{"attach"},
		},
		{name: "module only", files: map[string]os.FileMode{"repro.ko": 0o644, "Module.symvers": 0o644}, module: "repro.ko"},
		{name: "programs only", files: map[string]os.FileMode{"b": 0o755, "a": 0o755, "a.c": 0o644}, progs: []string{"a", "b"}},
		{name: "nothing", files: map[string]os.FileMode{"a.c": 0o644, "Makefile": 0o644}, wantErr: "no .ko and no program"},
		{name: "two modules", files: map[string]os.FileMode{"a.ko": 0o644, "b.ko": 0o644}, wantErr: "2 .ko files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, m := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), nil, m); err != nil {
					t.Fatal(err)
				}
			}
			ext, err := outputs(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("outputs = %+v, %v; want an error with %q", ext, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantMod := ""
			if tc.module != "" {
				wantMod = filepath.Join(dir, tc.module)
			}
			var wantProgs []string
			for _, p := range tc.progs {
				wantProgs = append(wantProgs, filepath.Join(dir, p))
			}
			if ext.Module != wantMod || !slices.Equal(ext.Programs, wantProgs) {
				t.Errorf("outputs = %+v, want module %q programs %q", ext, wantMod, wantProgs)
			}
		})
	}
}
