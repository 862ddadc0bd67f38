package bisect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Repo is the developer's git tree (or a bare repository). Nothing here writes to its files or
// moves its HEAD: revisions are checked out in worktrees of its own (git
// worktree add), which git keeps apart under .git/worktrees.
type Repo struct{ Dir string }

// ErrNotGit is wrapped when the tree is not a git work tree.
var ErrNotGit = errors.New("not a git tree")

func (r Repo) git(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", r.Dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Resolve turns rev into a commit's full hash, with its subject.
func (r Repo) Resolve(ctx context.Context, rev string) (Revision, error) {
	if strings.HasPrefix(rev, "-") {
		return Revision{}, fmt.Errorf("%q is not a revision", rev)
	}
	out, err := r.git(ctx, "log", "-1", "--format=%H%x00%s", rev+"^{commit}", "--")
	if err != nil {
		return Revision{}, fmt.Errorf("%q is not a commit of %s: %w", rev, r.Dir, err)
	}
	id, subj, _ := strings.Cut(strings.TrimSpace(string(out)), "\x00")
	return Revision{ID: id, Subject: subj}, nil
}

// Range is the history from good to bad along bad's first parents: good
// first, bad last. A merge on that path stands for its whole branch; the
// culprit may then be a merge, and a bisection of the branch (its second
// parent against the merge's first) goes on from there.
func (r Repo) Range(ctx context.Context, good, bad string) ([]Revision, error) {
	if _, err := r.git(ctx, "rev-parse", "--git-dir"); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNotGit, r.Dir, err)
	}
	g, err := r.Resolve(ctx, good)
	if err != nil {
		return nil, fmt.Errorf("--good: %w", err)
	}
	b, err := r.Resolve(ctx, bad)
	if err != nil {
		return nil, fmt.Errorf("--bad: %w", err)
	}
	if g.ID == b.ID {
		return nil, fmt.Errorf("--good and --bad are the same commit %s", g.Short())
	}
	if _, err := r.git(ctx, "merge-base", "--is-ancestor", g.ID, b.ID); err != nil {
		return nil, fmt.Errorf("--good %s is not an ancestor of --bad %s: a bisection walks from a good commit forward to a bad one", g.Short(), b.Short())
	}
	out, err := r.git(ctx, "log", "--first-parent", "--reverse", "--format=%H%x00%s", g.ID+".."+b.ID, "--")
	if err != nil {
		return nil, err
	}
	revs := []Revision{g}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, subj, _ := strings.Cut(line, "\x00")
		revs = append(revs, Revision{ID: id, Subject: subj})
	}
	if revs[len(revs)-1].ID != b.ID {
		return nil, fmt.Errorf("--good %s is not on the first-parent path of --bad %s (it is reached through a merge): give the merge's first parent as --good, or bisect the merged branch", g.Short(), b.Short())
	}
	return revs, nil
}

// Diff is the change from one revision to another as a unified diff with
// a/ and b/ names, or, with to "", to the worktree's files.
func (r Repo) Diff(ctx context.Context, from, to string) ([]byte, error) {
	args := []string{"diff", "--no-color", "--no-renames", "--no-ext-diff", "--full-index", from}
	if to != "" {
		args = append(args, to)
	}
	return r.git(ctx, append(args, "--")...)
}

// Worktree is a checkout of its own of a Repo's revisions.
type Worktree struct {
	Repo Repo
	Dir  string
}

// AddWorktree checks rev out at dir, reusing a worktree already there (the
// same place every time keeps ccache's paths stable).
func (r Repo) AddWorktree(ctx context.Context, dir, rev string) (*Worktree, error) {
	w := &Worktree{Repo: r, Dir: dir}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		if err := w.Checkout(ctx, rev); err == nil {
			return w, nil
		}
		_, _ = r.git(ctx, "worktree", "remove", "--force", dir)
		_ = os.RemoveAll(dir)
	}
	_, _ = r.git(ctx, "worktree", "prune")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, "worktree", "add", "--detach", "--force", dir, rev); err != nil {
		return nil, err
	}
	return w, nil
}

// Checkout moves the worktree to rev, dropping anything a revert left.
func (w *Worktree) Checkout(ctx context.Context, rev string) error {
	wt := Repo{Dir: w.Dir}
	if _, err := wt.git(ctx, "reset", "--hard", "--quiet"); err != nil {
		return err
	}
	_, err := wt.git(ctx, "checkout", "--detach", "--force", "--quiet", rev)
	return err
}

// Revert applies the reversal of culprit to the worktree's files, without
// committing. ok false (with git's reason) when it does not apply cleanly;
// the worktree is then back as it was.
func (w *Worktree) Revert(ctx context.Context, culprit string) (ok bool, why string, err error) {
	wt := Repo{Dir: w.Dir}
	if _, err := wt.git(ctx, "revert", "--no-commit", "--no-edit", culprit); err != nil {
		_, _ = wt.git(ctx, "revert", "--abort")
		_, _ = wt.git(ctx, "reset", "--hard", "--quiet")
		return false, err.Error(), nil
	}
	return true, "", nil
}

// Remove deletes the worktree and git's record of it.
func (w *Worktree) Remove(ctx context.Context) error {
	_, err := w.Repo.git(ctx, "worktree", "remove", "--force", w.Dir)
	return err
}

// TreeID is the hash of rev's tree: the same files in two repositories
// have the same one.
func (r Repo) TreeID(ctx context.Context, rev string) (string, error) {
	out, err := r.git(ctx, "rev-parse", rev+"^{tree}")
	return strings.TrimSpace(string(out)), err
}

// stampEpoch and stampSpan bound the times Stamp gives: 2^60 ns (36
// years) from 1980-01-01 UTC, all in the past, so make never sees a
// source newer than a build and warns of no clock skew.
const (
	stampEpoch = 315532800 // Unix seconds
	stampSpan  = 1 << 60
)

// stampTime is the modification time Stamp gives a file whose content
// hashes to id (hex): a point in the span chosen by the hash.
func stampTime(id string) (time.Time, error) {
	b, err := hex.DecodeString(id)
	if err != nil || len(b) < 8 {
		return time.Time{}, fmt.Errorf("content hash %q: want hex of 8 bytes or more", id)
	}
	return time.Unix(stampEpoch, int64(binary.BigEndian.Uint64(b)%stampSpan)), nil
}

// Stamp sets the modification time of every file of the worktree (and of
// its .git file) to one chosen by the file's content: the object git
// stores it as, which the index records. Kernel builds are cached by a
// hash of their tree's paths, sizes and modification times (kbuild's
// Source.Identity); a checkout gives each file the time it was written,
// so the same revision checked out again, in a worktree made anew by the
// next bisection, would never hit the cache. Stamped, the identity is a
// function of the revision's content (its tree, or with a revert the
// index's), and a repeated bisection builds nothing it built before.
// Two different contents differ in a stamp unless their hashes agree in
// 60 bits.
//
// The stamps are in the past; each build's outputs are newer, so make
// rebuilds from a stamped tree what a fresh checkout's would. git's own
// stat records are refreshed after.
func (w *Worktree) Stamp(ctx context.Context) error {
	wt := Repo{Dir: w.Dir}
	out, err := wt.git(ctx, "ls-files", "--stage", "-z")
	if err != nil {
		return fmt.Errorf("stamp %s: %w", w.Dir, err)
	}
	for _, entry := range strings.Split(string(out), "\x00") {
		// <mode> <object> <stage>\t<path>
		meta, path, ok := strings.Cut(entry, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 || f[0] == "160000" {
			continue // a submodule is a directory
		}
		if err := stampFile(filepath.Join(w.Dir, path), f[1]); err != nil {
			return fmt.Errorf("stamp %s: %w", w.Dir, err)
		}
	}
	dotgit := filepath.Join(w.Dir, ".git")
	if b, err := os.ReadFile(dotgit); err == nil {
		sum := sha256.Sum256(b)
		if err := stampFile(dotgit, hex.EncodeToString(sum[:])); err != nil {
			return fmt.Errorf("stamp %s: %w", w.Dir, err)
		}
	}
	if _, err := wt.git(ctx, "update-index", "-q", "--refresh"); err != nil {
		return fmt.Errorf("stamp %s: %w", w.Dir, err)
	}
	return nil
}

// stampFile gives path (not a symbolic link's target) the stamp of id.
func stampFile(path, id string) error {
	t, err := stampTime(id)
	if err != nil {
		return err
	}
	if st, err := os.Lstat(path); err == nil && st.ModTime().Equal(t) {
		return nil
	}
	ts := unix.NsecToTimespec(t.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &os.PathError{Op: "utimensat", Path: path, Err: err}
	}
	return nil
}
