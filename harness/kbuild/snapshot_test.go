package kbuild

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fakeTree writes a tiny kernel tree: a Makefile with a version and an
// mrproper target (the real one removes far more), two sources and a
// symlink, then what configuring and building in place leave behind.
func fakeTree(t *testing.T, configured bool) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Makefile", "VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 4\nmrproper:\n\trm -rf .config include/config\n")
	write("kernel/fork.c", "int fork;\n")
	write("arch/x86/Kconfig", "config X86\n\tdef_bool y\n")
	if err := os.Symlink("../kernel/fork.c", filepath.Join(dir, "arch", "fork-link.c")); err != nil {
		t.Fatal(err)
	}
	if configured {
		write(".config", "CONFIG_X86=y\n")
		write("include/config/auto.conf", "CONFIG_X86=y\n")
		write("arch/x86/include/generated/asm/x.h", "/* generated */\n")
		write("kernel/fork.o", "object")
		write("kernel/.fork.o.cmd", "cmd")
		elf, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		write("scripts/basic/fixdep", string(elf))
	}
	return dir
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func TestPrepareSourceSnapshotsATreeConfiguredInPlace(t *testing.T) {
	tree := fakeTree(t, true)
	before, err := treeIdentity(tree)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	s, err := PrepareSource(t.Context(), quietLog(), tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if s.Origin == "" || s.Dir == tree || s.Version != "7.3.4" {
		t.Fatalf("source = %+v, want a snapshot of %s", s, tree)
	}
	want := []string{"Makefile", "arch/fork-link.c", "arch/x86/Kconfig", "kernel/fork.c"}
	if got := listTree(t, s.Dir); !slices.Equal(got, want) {
		t.Errorf("snapshot holds %q, want the sources only %q", got, want)
	}
	if target, err := os.Readlink(filepath.Join(s.Dir, "arch/fork-link.c")); err != nil || target != "../kernel/fork.c" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	fi, _ := os.Stat(filepath.Join(tree, "kernel/fork.c"))
	si, _ := os.Stat(filepath.Join(s.Dir, "kernel/fork.c"))
	if !fi.ModTime().Equal(si.ModTime()) {
		t.Errorf("mtime not kept: %v vs %v", si.ModTime(), fi.ModTime())
	}
	after, _ := treeIdentity(tree)
	if after != before {
		t.Error("the developer's tree changed")
	}
	if _, err := os.Stat(filepath.Join(tree, ".config")); err != nil {
		t.Error("the developer's .config is gone")
	}

	// The same sources map to the same snapshot, even after more building
	// in place: ccache sees the same paths.
	if err := os.WriteFile(filepath.Join(tree, "kernel/exit.o"), []byte("more output"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := PrepareSource(t.Context(), quietLog(), tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir != s.Dir || again.Identity != s.Identity {
		t.Errorf("unchanged sources: snapshot %s (%s), want %s (%s)", again.Dir, again.Identity, s.Dir, s.Identity)
	}
	// An edit is a new snapshot.
	future := time.Now().Add(time.Hour)
	os.WriteFile(filepath.Join(tree, "kernel/fork.c"), []byte("int fork2;\n"), 0o644)
	os.Chtimes(filepath.Join(tree, "kernel/fork.c"), future, future)
	edited, err := PrepareSource(t.Context(), quietLog(), tree, cache)
	if err != nil {
		t.Fatal(err)
	}
	if edited.Dir == s.Dir || edited.Identity == s.Identity {
		t.Error("an edited source reused the old snapshot")
	}
}

// A clean tree is built where it is, with the identity it always had (the
// kernel cache is keyed by it).
func TestPrepareSourceUsesACleanTreeAsItIs(t *testing.T) {
	tree := fakeTree(t, false)
	s, err := PrepareSource(t.Context(), quietLog(), tree, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := treeIdentity(tree)
	if s.Dir != tree || s.Origin != "" || s.Identity != id {
		t.Errorf("source = %+v, want the tree itself with identity %s", s, id)
	}
	if _, err := OpenSource(fakeTree(t, true)); err == nil {
		t.Error("OpenSource accepted a tree configured in place")
	}
}

// In a git work tree, git says what is a source: tracked and untracked
// files, not what .gitignore excludes, not tracked files deleted.
func TestPrepareSourceListsAGitTreeThroughGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	tree := fakeTree(t, false)
	os.WriteFile(filepath.Join(tree, ".gitignore"), []byte("*.o\n.config\ninclude/config/\n/scripts/basic/fixdep\nbuilt-by-hand\n"), 0o644)
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", tree, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "x")
	os.WriteFile(filepath.Join(tree, "kernel/new.c"), []byte("int n;\n"), 0o644) // untracked source
	os.WriteFile(filepath.Join(tree, "built-by-hand"), []byte("ignored"), 0o644)
	os.Remove(filepath.Join(tree, "arch/x86/Kconfig")) // deleted, still tracked
	os.WriteFile(filepath.Join(tree, ".config"), []byte("CONFIG_X86=y\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "kernel/fork.o"), []byte("o"), 0o644)
	s, err := PrepareSource(t.Context(), quietLog(), tree, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "Makefile", "arch/fork-link.c", "kernel/fork.c", "kernel/new.c"}
	if got := listTree(t, s.Dir); !slices.Equal(got, want) {
		t.Errorf("snapshot holds %q, want %q", got, want)
	}
}
