package toolroot

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRoot lays out the top of a merged-/usr Debian root, as mmdebstrap
// leaves it.
func fakeRoot(t *testing.T) Root {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"usr/bin", "etc", "dev", "proc", "tmp", "var/cache/apt", "var/lib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{completeMarker, ".fth-packages", "usr/bin/qemu-system-x86_64"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpen(t *testing.T) {
	half := t.TempDir()
	for _, tt := range []struct{ name, dir string }{
		{"no path", ""},
		{"no directory", filepath.Join(half, "none")},
		{"no complete marker", half},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.dir)
			if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "run make deps (or bash scripts/toolroot.sh)") {
				t.Errorf("Open(%q) = %v, want ErrMissing saying how to build the root", tt.dir, err)
			}
		})
	}
	r := fakeRoot(t)
	if err := r.Has("qemu-system-x86_64"); err != nil {
		t.Errorf("Has: %v", err)
	}
	if err := r.Has("gcc-14"); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "scripts/toolroot/packages") {
		t.Errorf("Has(gcc-14) = %v, want ErrMissing naming the package list", err)
	}
}

// hasTriple finds "opt a b" in bwrap's arguments.
func hasTriple(args []string, opt, a, b string) bool {
	for i := 0; i+2 < len(args); i++ {
		if args[i] == opt && args[i+1] == a && args[i+2] == b {
			return true
		}
	}
	return false
}

func TestArgs(t *testing.T) {
	r := fakeRoot(t)
	in := func(p string) string { return filepath.Join(r.Dir, p) }
	tests := []struct {
		name   string
		mounts []Mount
		// want are triples that must appear, in this order; absent must not.
		want   [][3]string
		absent [][3]string
	}{
		{
			name: "nothing bound: the root's top level, read-only, symlinks recreated",
			want: [][3]string{
				{"--symlink", "usr/bin", "/bin"},
				{"--ro-bind", in("etc"), "/etc"},
				{"--ro-bind", in("tmp"), "/tmp"},
				{"--ro-bind", in("usr"), "/usr"},
				{"--ro-bind", in("var"), "/var"},
			},
			absent: [][3]string{{"--ro-bind", in(".fth-packages"), "/.fth-packages"}, {"--ro-bind", in("dev"), "/dev"}},
		},
		{
			name:   "a path under a root directory: tmpfs directories on the way, siblings bound one by one",
			mounts: []Mount{{Path: "/var/cache/fth", Mode: RW}},
			want: [][3]string{
				{"--ro-bind", in("var/cache/apt"), "/var/cache/apt"},
				{"--ro-bind", in("var/lib"), "/var/lib"},
				{"--bind", "/var/cache/fth", "/var/cache/fth"},
			},
			absent: [][3]string{{"--ro-bind", in("var"), "/var"}},
		},
		{
			name:   "a path the root lacks: its directories created",
			mounts: []Mount{{Path: "/work/main", Mode: RO}, {Path: "/tmp", Mode: RW}},
			want: [][3]string{
				{"--bind", "/tmp", "/tmp"},
				{"--ro-bind", "/work/main", "/work/main"},
			},
			absent: [][3]string{{"--ro-bind", in("tmp"), "/tmp"}},
		},
		{
			name: "a read-write parent shows its children; a file laid over one is kept",
			mounts: []Mount{
				{Path: "/var/cache/fth/src/linux", Mode: RW},
				{Path: "/var/cache/fth", Mode: RW},
				{Path: "/var/cache/fth/src/linux/kernel/fork.c", Src: "/var/cache/fth/kernels/x/patched/kernel/fork.c", Mode: RO},
				{Path: "/dev/kvm", Mode: DevTry},
			},
			want: [][3]string{
				{"--bind", "/var/cache/fth", "/var/cache/fth"},
				{"--ro-bind", "/var/cache/fth/kernels/x/patched/kernel/fork.c", "/var/cache/fth/src/linux/kernel/fork.c"},
			},
			absent: [][3]string{{"--bind", "/var/cache/fth/src/linux", "/var/cache/fth/src/linux"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := r.Args(tt.mounts)
			if err != nil {
				t.Fatal(err)
			}
			if args[0] != "--die-with-parent" {
				t.Errorf("args start %q, want --die-with-parent", args[0])
			}
			at := 0
			for _, w := range tt.want {
				i := -1
				for j := at; j+2 < len(args); j++ {
					if args[j] == w[0] && args[j+1] == w[1] && args[j+2] == w[2] {
						i = j
						break
					}
				}
				if i < 0 {
					t.Errorf("missing (or out of order) %v in\n%s", w, strings.Join(args, " "))
					continue
				}
				at = i
			}
			for _, a := range tt.absent {
				if hasTriple(args, a[0], a[1], a[2]) {
					t.Errorf("unexpected %v in\n%s", a, strings.Join(args, " "))
				}
			}
			if !hasTriple(args, "--dev", "/dev", "--proc") {
				t.Errorf("no --dev /dev --proc /proc in %v", args)
			}
		})
	}
}

func TestArgsRefuses(t *testing.T) {
	r := fakeRoot(t)
	for _, m := range []Mount{
		{Path: "relative/path"},
		{Path: "/"},
		{Path: "/proc/self"},
		{Path: "/dev/sda", Mode: RO},
		{Path: "/bin/x", Mode: RO}, // through a symlink of the root
	} {
		if _, err := r.Args([]Mount{m}); err == nil {
			t.Errorf("Args(%+v) accepted", m)
		}
	}
}

// The layout really runs, in the machine's toolchain root (skipped
// without one): the root's own files, and a bound host directory at its
// own path, read-write, with the root read-only.
func TestCommandRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bwrap")
	}
	if _, err := exec.LookPath(Bwrap); err != nil {
		t.Skip("no bwrap")
	}
	out, err := exec.Command("bash", "../../scripts/toolroot.sh", "path").Output()
	if err != nil {
		t.Skip(err)
	}
	r, err := Open(strings.TrimSpace(string(out)))
	if err != nil {
		t.Skip(err)
	}
	work := t.TempDir()
	bin, args, err := r.Command([]Mount{{Path: work, Mode: RW}}, work, "sh", "-c", "pwd && echo ok > out && ! touch /usr/fth-must-fail 2>/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != work {
		t.Fatalf("%s %v: %v: %s", bin, args, err, out)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out")); err != nil || string(b) != "ok\n" {
		t.Errorf("the bound directory was not written: %q %v", b, err)
	}
}
