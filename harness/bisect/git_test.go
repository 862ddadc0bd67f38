package bisect

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/harness/kbuild"
)

// history makes a git tree of five commits: a adds f1.c to f4.c, b, c
// and d change f1.c, adds new.c and changes f3.c, and e changes f3.c's
// line again (so d does not revert on e, and b does).
func history(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		p := filepath.Join(dir, "kernel/trace", name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	var ids []string
	for i, change := range []func(){
		func() {
			for _, f := range []string{"f1.c", "f2.c", "f3.c", "f4.c"} {
				write(f, "int x;\n")
			}
		},
		func() { write("f1.c", "int b;\n") },
		func() { write("new.c", "int c;\n") },
		func() { write("f3.c", "int d;\n") },
		func() { write("f3.c", "int e;\n") },
	} {
		change()
		git("add", "-A")
		git("commit", "-q", "-m", "commit "+string(rune('a'+i)))
		ids = append(ids, git("rev-parse", "HEAD"))
	}
	return dir, ids
}

func TestRepo(t *testing.T) {
	ctx := context.Background()
	dir, ids := history(t)
	r := Repo{Dir: dir}
	revs, err := r.Range(ctx, ids[0][:10], "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if len(revs) != 5 || revs[0].ID != ids[0] || revs[4].ID != ids[4] || revs[1].Subject != "commit b" {
		t.Fatalf("range %+v", revs)
	}
	for _, bad := range []struct{ good, bad, want string }{
		{ids[3], ids[1], "is not an ancestor"},
		{ids[1], ids[1], "the same commit"},
		{"nosuch", ids[1], "is not a commit"},
		{"--all", ids[1], "is not a revision"},
	} {
		if _, err := r.Range(ctx, bad.good, bad.bad); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Range(%s, %s): %v, want %q", bad.good, bad.bad, err, bad.want)
		}
	}

	diff, err := r.Diff(ctx, ids[0], ids[1])
	if err != nil || !strings.Contains(string(diff), "+++ b/kernel/trace/f1.c") || !strings.Contains(string(diff), "+int b;") {
		t.Errorf("diff: %v\n%s", err, diff)
	}

	// Worktrees: the developer's tree stays where it was.
	w, err := r.AddWorktree(ctx, filepath.Join(t.TempDir(), "wt"), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir, "kernel/trace/new.c")); err == nil {
		t.Error("the worktree at commit b has commit c's file")
	}
	if err := w.Checkout(ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	if ok, why, err := w.Revert(ctx, ids[3]); err != nil || ok || why == "" {
		t.Errorf("revert of d on e, whose line e changed again: ok %v (%q), %v; want a conflict with git's reason", ok, why, err)
	}
	ok, why, err := w.Revert(ctx, ids[1])
	if err != nil || !ok {
		t.Fatalf("revert of b on e: %v %s", err, why)
	}
	got, _ := os.ReadFile(filepath.Join(w.Dir, "kernel/trace/f1.c"))
	if string(got) != "int x;\n" {
		t.Errorf("f1.c after the revert of b: %q", got)
	}
	if d, err := (Repo{Dir: w.Dir}).Diff(ctx, ids[0], ""); err != nil || strings.Contains(string(d), "f1.c") || !strings.Contains(string(d), "new.c") {
		t.Errorf("the reverted worktree against a: %v\n%s", err, d)
	}
	// The next checkout drops the revert.
	if err := w.Checkout(ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(w.Dir, "kernel/trace/f1.c")); string(got) != "int b;\n" {
		t.Errorf("checkout kept the revert: f1.c %q", got)
	}
	// Reused in place the next time.
	if w2, err := r.AddWorktree(ctx, w.Dir, ids[0]); err != nil || w2.Dir != w.Dir {
		t.Fatalf("reuse: %v", err)
	}
	head, _ := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
	if strings.TrimSpace(string(head)) != ids[4] {
		t.Errorf("the developer's HEAD moved to %s", head)
	}
	if st, _ := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); len(st) != 0 {
		t.Errorf("the developer's tree changed:\n%s", st)
	}
	if err := w.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Dir); err == nil {
		t.Error("the worktree is still there")
	}
}

// kernelHistory makes a git tree that kbuild takes for a kernel tree: a
// Makefile with a version, a source file, and a symbolic link; the
// second commit changes the file's content but not its size, which only
// the stamp (not the path or size) can tell from the first.
func kernelHistory(t *testing.T) (string, []string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte("VERSION = 7\nPATCHLEVEL = 3\nSUBLEVEL = 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("Makefile", filepath.Join(dir, "GNUmakefile")); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, text := range []string{"int a;\n", "int b;\n"} {
		if err := os.WriteFile(filepath.Join(dir, "ftrace.c"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", text)
		ids = append(ids, git("rev-parse", "HEAD"))
	}
	return dir, ids
}

// buildKey is the kernel cache key kbuild gives the tree at dir.
func buildKey(t *testing.T, dir string) string {
	t.Helper()
	src, err := kbuild.OpenSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	return kbuild.Key(src, "x86_64", nil, kbuild.Toolchain{})
}

// A stamped worktree's build key is its content's: the same revision
// checked out anew (new modification times) keys the same kernel, and a
// change of content keys another, even at the same size.
func TestStampKeysByContent(t *testing.T) {
	ctx := context.Background()
	dir, ids := kernelHistory(t)
	r := Repo{Dir: dir}
	place := filepath.Join(t.TempDir(), "bisect", "0123456789ab", "base")
	w, err := r.AddWorktree(ctx, place, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	first := buildKey(t, w.Dir)

	// The next bisection: the worktree made again, its files written at
	// another time.
	if err := w.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if w, err = r.AddWorktree(ctx, place, ids[0]); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, f := range []string{"Makefile", "ftrace.c", ".git"} {
		if err := os.Chtimes(filepath.Join(w.Dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if buildKey(t, w.Dir) == first {
		t.Fatal("unstamped, the key did not change with the times: the test shows nothing")
	}
	if err := w.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := buildKey(t, w.Dir); got != first {
		t.Errorf("the same revision with other modification times keys %s, first %s", got[:12], first[:12])
	}

	if err := w.Checkout(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := w.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if buildKey(t, w.Dir) == first {
		t.Error("another content of the same size keys the same kernel")
	}
	if err := w.Checkout(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := buildKey(t, w.Dir); got != first {
		t.Errorf("back at the first revision: key %s, first %s", got[:12], first[:12])
	}
	if st, _ := exec.Command("git", "-C", w.Dir, "status", "--porcelain").Output(); len(st) != 0 {
		t.Errorf("the stamped worktree is not clean:\n%s", st)
	}
	if err := w.Remove(ctx); err != nil {
		t.Fatal(err)
	}
}
