package kbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/harness/internal/proc"
	"github.com/ftrace-harness/fth/internal/atomicfile"
)

// snapshotVersion changes when what a snapshot holds changes.
const snapshotVersion = "fth-snapshot-1"

// PrepareSource opens the kernel tree at dir for building. A clean tree is
// built where it is, out of tree, as always. A tree that was configured or
// built in place — most developers' ~/linux — cannot be: kbuild refuses O=
// next to an in-tree .config, and the advice it prints (make mrproper)
// would delete the developer's .config. Such a tree is copied, source files
// only, into a snapshot under cacheDir and built from there; the
// developer's tree is only read. The snapshot's place is keyed by the
// source files' paths, sizes and mtimes, so the same sources land at the
// same path and ccache (which hashes source paths) still hits.
func PrepareSource(ctx context.Context, log *slog.Logger, dir, cacheDir string) (Source, error) {
	src, err := ReadSource(dir)
	if err != nil {
		return Source{}, err
	}
	dirty, why := configuredInPlace(src.Dir)
	if !dirty {
		return OpenSource(dir)
	}
	log.Info("the kernel tree was configured in place; building from a clean snapshot of its source files", "tree", src.Dir, "because", why)
	return snapshot(ctx, log, src, cacheDir)
}

// configuredInPlace applies kbuild's own test (the top Makefile's
// outputmakefile target refuses O= when any of these exist).
func configuredInPlace(dir string) (bool, string) {
	for _, p := range []string{".config", "include/config"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			return true, p + " exists"
		}
	}
	gen, _ := filepath.Glob(filepath.Join(dir, "arch", "*", "include", "generated"))
	if len(gen) > 0 {
		rel, _ := filepath.Rel(dir, gen[0])
		return true, rel + " exists"
	}
	return false, ""
}

// snapshot returns the clean copy of src, making it if needed.
func snapshot(ctx context.Context, log *slog.Logger, src Source, cacheDir string) (Source, error) {
	start := time.Now()
	files, err := sourceFiles(ctx, src.Dir)
	if err != nil {
		return Source{}, fmt.Errorf("snapshot of %s: %w", src.Dir, err)
	}
	key, size, err := filesKey(src.Dir, files)
	if err != nil {
		return Source{}, fmt.Errorf("snapshot of %s: %w", src.Dir, err)
	}
	entry := filepath.Join(cacheDir, "src", "snapshots", key[:16])
	if err := os.MkdirAll(entry, 0o755); err != nil {
		return Source{}, fmt.Errorf("snapshot: %w", err)
	}
	unlock, err := lock(ctx, log, entry)
	if err != nil {
		return Source{}, err
	}
	defer unlock()
	tree := filepath.Join(entry, "tree")
	out := Source{Dir: tree, Version: src.Version, Origin: src.Dir}
	if id, err := os.ReadFile(filepath.Join(entry, "identity")); err == nil && len(id) > 0 {
		out.Identity = string(id)
		markUsed(entry)
		log.Info("kernel snapshot cached", "tree", src.Dir, "snapshot", tree, "files", len(files))
		return out, nil
	}
	if err := os.RemoveAll(tree); err != nil {
		return Source{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := newCacheSpace(log, cacheDir).makeRoom(ctx, size, entry); err != nil {
		return Source{}, fmt.Errorf("snapshot of %s: %w", src.Dir, err)
	}
	bytesCopied, err := copyFiles(ctx, src.Dir, tree, files)
	if err != nil {
		_ = os.RemoveAll(tree)
		return Source{}, fmt.Errorf("snapshot of %s: %w", src.Dir, err)
	}
	// The file list leaves out what kbuild generates as far as names tell;
	// the kernel's own mrproper removes whatever the names missed.
	if err := mrproper(ctx, tree); err != nil {
		_ = os.RemoveAll(tree)
		return Source{}, fmt.Errorf("snapshot of %s: %w", src.Dir, err)
	}
	if out.Identity, err = treeIdentity(tree); err != nil {
		return Source{}, err
	}
	if err := atomicfile.Write(filepath.Join(entry, "identity"), []byte(out.Identity)); err != nil {
		return Source{}, fmt.Errorf("snapshot: %w", err)
	}
	markUsed(entry)
	log.Info("kernel snapshot made", "tree", src.Dir, "snapshot", tree, "files", len(files), "MiB", bytesCopied>>20, "seconds", time.Since(start).Round(100*time.Millisecond).Seconds())
	return out, nil
}

// sourceFiles lists the tree's source files, relative to dir. In a git
// work tree that is git's own answer (tracked and untracked files that no
// .gitignore excludes: upstream's ignore every build output); otherwise
// every file but the build outputs kbuild's clean and mrproper know by
// name, and ELF files (host programs such as scripts/basic/fixdep have no
// suffix). Debian's linux-source tarballs ship a .gitignore that ignores
// everything, so outside git they are not read.
func sourceFiles(ctx context.Context, dir string) ([]string, error) {
	if top, err := gitOutput(ctx, dir, "rev-parse", "--show-toplevel"); err == nil && samePath(strings.TrimSpace(string(top)), dir) {
		out, err := gitOutput(ctx, dir, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
		if err != nil {
			return nil, err
		}
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f == "" {
				continue
			}
			// A tracked file deleted in the work tree is not a source.
			if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
				files = append(files, f)
			}
		}
		sort.Strings(files)
		return slicesCompact(files), nil
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == ".git" || generatedDir(rel) {
				return fs.SkipDir
			}
			return nil
		}
		if buildOutput(rel) {
			return nil
		}
		if d.Type().IsRegular() && isELF(p) {
			return nil
		}
		files = append(files, rel)
		return nil
	})
	return files, err
}

func slicesCompact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

func gitOutput(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(hostEnv(), "GIT_OPTIONAL_LOCKS=0")
	return cmd.Output()
}

// generatedDir reports the directories kbuild writes into a tree built in
// place.
func generatedDir(rel string) bool {
	if rel == "include/config" || rel == "include/generated" {
		return true
	}
	m, _ := path.Match("arch/*/include/generated", rel)
	return m
}

// buildOutput reports the files kbuild's clean and mrproper targets remove
// by name (the top Makefile's CLEAN_FILES, MRPROPER_FILES and the patterns
// of its clean target).
func buildOutput(rel string) bool {
	switch rel {
	case ".config", ".config.old", ".version", "Module.symvers", "System.map", "vmlinux", "vmlinux.o", "vmlinux.a",
		"modules.builtin", "modules.builtin.modinfo", "modules.nsdeps", "vmlinux.symvers", "modules-only.symvers":
		return true
	}
	base := path.Base(rel)
	for _, pat := range []string{"*.[aios]", "*.ko", ".*.cmd", "*.lst", "*.mod.c", "*.mod", "modules.order", "*.symtypes",
		"*.dwo", "*.su", "*.gcno", "*.lto.o", ".*.d", "*.tmp", "*.ll", "*.c.[012]*.*"} {
		if m, _ := path.Match(pat, base); m {
			return true
		}
	}
	return false
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	return n == 4 && bytes.Equal(magic[:], []byte("\x7fELF"))
}

// filesKey hashes the listed files' paths, sizes and modification times,
// as treeIdentity does for a whole tree: an edit changes it; a build in
// place, whose outputs are not listed, does not. It also returns the bytes
// of the regular files, what a copy of them writes: one Lstat serves both.
func filesKey(dir string, files []string) (string, int64, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", snapshotVersion)
	var size int64 // of the regular files: what a copy writes
	for _, f := range files {
		info, err := os.Lstat(filepath.Join(dir, f))
		if err != nil {
			return "", 0, err
		}
		if info.Mode().IsRegular() {
			size += info.Size()
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", f, info.Size(), info.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil)), size, nil
}

// copyFiles copies files from src to dst: content, mode and modification
// time, symlinks as symlinks. Content is copied, never hard-linked, so an
// edit the developer makes in place later cannot change a snapshot that a
// cached kernel was built from.
func copyFiles(ctx context.Context, src, dst string, files []string) (int64, error) {
	var total int64
	madeDirs := map[string]bool{}
	var dirs []string
	for i, f := range files {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return total, err
			}
		}
		from, to := filepath.Join(src, f), filepath.Join(dst, f)
		if d := filepath.Dir(to); !madeDirs[d] {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return total, err
			}
			madeDirs[d] = true
			dirs = append(dirs, d)
		}
		info, err := os.Lstat(from)
		if err != nil {
			return total, err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(from)
			if err != nil {
				return total, err
			}
			if err := os.Symlink(target, to); err != nil {
				return total, err
			}
		case info.Mode().IsRegular():
			n, err := copyFile(from, to, info.Mode().Perm())
			if err != nil {
				return total, err
			}
			total += n
		default:
			continue
		}
		ts := []unix.Timespec{unix.NsecToTimespec(info.ModTime().UnixNano()), unix.NsecToTimespec(info.ModTime().UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, to, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return total, fmt.Errorf("set the time of %s: %w", to, err)
		}
	}
	return total, nil
}

func copyFile(from, to string, perm fs.FileMode) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// mrproper runs the tree's own `make mrproper` with a clean environment.
func mrproper(ctx context.Context, tree string) error {
	cmd := proc.Command(ctx, 10*time.Second, "make", "-s", "-C", tree, "mrproper")
	cmd.Env = hostEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("make mrproper in the snapshot: %w\n%s", err, tail(string(out), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
