package bisect

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
