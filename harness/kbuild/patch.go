package kbuild

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/internal/proc"
)

// Patch is a change to the kernel source, in unified diff form (patch -p1),
// applied to a scratch copy of the files it touches: the tree itself is
// never written to.
type Patch struct {
	// Name identifies the patch in logs, cache keys and manifests.
	Name string
	// Text is the diff. Text before the first "--- " line is ignored, as
	// patch(1) ignores it.
	Text []byte
}

// ErrBadPatch is wrapped when a patch cannot be read or applied.
var ErrBadPatch = errors.New("bad kernel patch")

// ErrPatchNoop is wrapped (with ErrBadPatch) when a patch builds an image
// identical to the unpatched one: a mistake for a mutant, and for a
// bisection a revision whose kernel is its good end's.
var ErrPatchNoop = fmt.Errorf("%w: it changes nothing in the image", ErrBadPatch)

// PatchedFiles lists the files a unified diff changes, relative to the tree
// (the "+++ b/<path>" names). Creating or deleting files is refused: a
// patched build overlays changed files on the tree and cannot add or hide one.
func PatchedFiles(text []byte) ([]string, error) {
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var from string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--- "):
			from = diffPath(line[4:])
		case strings.HasPrefix(line, "+++ "):
			to := diffPath(line[4:])
			if from == "/dev/null" || to == "/dev/null" {
				return nil, fmt.Errorf("%w: it creates or deletes %s: only changes to existing files can be overlaid", ErrBadPatch, strings.TrimPrefix(to+from, "/dev/null"))
			}
			rel, ok := strings.CutPrefix(to, "b/")
			if !ok || rel == "" || filepath.IsAbs(rel) || slices.Contains(strings.Split(rel, "/"), "..") {
				return nil, fmt.Errorf("%w: %q is not a b/<path> inside the tree (make it with diff -u a/ b/ or git diff)", ErrBadPatch, to)
			}
			if !slices.Contains(files, rel) {
				files = append(files, rel)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadPatch, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no +++ b/<path> line: not a unified diff", ErrBadPatch)
	}
	slices.Sort(files)
	return files, nil
}

// diffPath is a diff header's path, without the timestamp diff -u appends.
func diffPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// overlay is the scratch copy of the files a request's patches change, and
// where each is bound over the tree while kbuild runs.
type overlay struct {
	dir   string
	files []string
}

// prepareOverlay copies every file the patches touch from the source tree
// into dir and applies the patches there, in order, with patch(1).
func prepareOverlay(ctx context.Context, src string, patches []Patch, dir string) (overlay, error) {
	_ = os.RemoveAll(dir)
	var files []string
	for _, p := range patches {
		fs, err := PatchedFiles(p.Text)
		if err != nil {
			return overlay{}, fmt.Errorf("patch %s: %w", p.Name, err)
		}
		for _, f := range fs {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	slices.Sort(files)
	for _, f := range files {
		if strings.ContainsAny(f, "'\n") {
			return overlay{}, fmt.Errorf("%w: file name %q", ErrBadPatch, f)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			return overlay{}, err
		}
		if _, err := copyFile(filepath.Join(src, f), filepath.Join(dir, f), 0o644); err != nil {
			return overlay{}, fmt.Errorf("%w: %s is not in the tree %s: %v", ErrBadPatch, f, src, err)
		}
	}
	for _, p := range patches {
		cmd := proc.Command(ctx, 5*time.Second, "patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-", "-d", dir)
		cmd.Stdin = bytes.NewReader(p.Text)
		if out, err := cmd.CombinedOutput(); err != nil {
			return overlay{}, fmt.Errorf("%w: %s does not apply to %s: %v\n%s", ErrBadPatch, p.Name, src, err, tail(string(out), 10))
		}
	}
	// patch(1) keeps the time stamps of the copies it rewrites only with -Z
	// or -T; make them newer than anything in a copied build directory
	// regardless, so kbuild recompiles exactly these files.
	now := time.Now()
	for _, f := range files {
		if err := os.Chtimes(filepath.Join(dir, f), now, now); err != nil {
			return overlay{}, err
		}
	}
	return overlay{dir: dir, files: files}, nil
}

// wrap returns the command that runs name with args with every overlaid
// file bound over its place in the tree src, in a private mount namespace
// that dies with the command: the tree keeps its path, so kbuild's command
// lines (and ccache's hashes) are those of the unpatched build, and only
// the patched files and what depends on them are rebuilt. Root binds in a
// namespace of its own; anyone else in a user namespace that maps them to
// root.
func (o overlay) wrap(src, name string, args []string) (string, []string) {
	if len(o.files) == 0 {
		return name, args
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, f := range o.files {
		fmt.Fprintf(&script, "mount --bind '%s' '%s'\n", filepath.Join(o.dir, f), filepath.Join(src, f))
	}
	script.WriteString(`exec "$@"` + "\n")
	ns := []string{"--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		ns = append([]string{"--user", "--map-root-user"}, ns...)
	}
	out := append(ns, "--", "sh", "-c", script.String(), "sh", name)
	return "unshare", append(out, args...)
}

// copyTree copies a finished build directory with cp -a, keeping every
// time stamp, so that make in the copy rebuilds only what changed since.
func copyTree(ctx context.Context, from, to string) error {
	_ = os.RemoveAll(to)
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	cmd := proc.Command(ctx, 10*time.Second, "cp", "-a", "--reflink=auto", from, to)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("copy build directory %s: %v: %s", from, err, tail(string(out), 5))
	}
	return repath(filepath.Join(to, "tools"), from, to)
}

// repath rewrites the build directory's absolute path in the dependency
// records under dir (.cmd and .d files), keeping their time stamps. The
// kernel's own objects name the output tree relatively, but the host
// tools built under tools/ (objtool, resolve_btfids) record it
// absolutely: in a copy their commands would differ from the records,
// make would rebuild them, and a new objtool would make every object it
// checks rebuild too (1,400 steps instead of a handful).
func repath(dir, from, to string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		name := d.Name()
		if d.IsDir() || !(strings.HasSuffix(name, ".cmd") || strings.HasSuffix(name, ".d")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte(from)) {
			return err
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(from), []byte(to)), st.Mode()); err != nil {
			return err
		}
		return os.Chtimes(path, st.ModTime(), st.ModTime())
	})
}

// buildPatched builds req (which has patches) from the unpatched kernel's
// finished build directory: a copy of it, with the patched files bound over
// the tree, so a one-file patch costs a one-file rebuild and a relink.
func buildPatched(ctx context.Context, log *slog.Logger, req Request) (Kernel, error) {
	base := req
	base.Patches = nil
	// build, not Build: the BTF check is the patched kernel's, once.
	bk, err := build(ctx, log, base)
	if err != nil {
		return Kernel{}, fmt.Errorf("the unpatched kernel: %w", err)
	}
	frags, _, err := LoadForVersion(req.KconfigDir, req.Fragments, req.Source.Version)
	if err != nil {
		return Kernel{}, err
	}
	key := Key(req.Source, req.Arch.Name, frags, req.Toolchain, req.Patches...)
	entry, unlock, err := openEntry(ctx, log, req, key)
	if err != nil {
		return Kernel{}, err
	}
	defer unlock()
	if k, err := loadManifest(entry); err == nil {
		k.Cached = true
		markUsed(entry)
		log.Info("patched kernel cached", "arch", req.Arch.Name, "patches", patchNames(req.Patches), "entry", entry)
		return k, nil
	}
	_ = os.Remove(filepath.Join(entry, manifestName))

	start := time.Now()
	ov, err := prepareOverlay(ctx, req.Source.Dir, req.Patches, filepath.Join(entry, "patched"))
	if err != nil {
		return Kernel{}, err
	}
	out := filepath.Join(entry, "build")
	size, err := treeSize(bk.BuildDir)
	if err != nil {
		return Kernel{}, fmt.Errorf("kbuild: size of the unpatched build: %w", err)
	}
	if err := newCacheSpace(log, req.CacheDir).makeRoom(ctx, size, entry, filepath.Dir(bk.BuildDir)); err != nil {
		return Kernel{}, err
	}
	log.Info("copying the unpatched build", "from", bk.BuildDir, "to", out)
	if err := copyTree(ctx, bk.BuildDir, out); err != nil {
		return Kernel{}, err
	}
	b := &builder{req: req, out: out, log: log, ov: ov, prevSteps: map[string]int{}, steps: map[string]int{}}
	log.Info("building patched kernel", "arch", req.Arch.Name, "patches", patchNames(req.Patches), "files", strings.Join(ov.files, " "))
	if err := b.make(ctx, req.Arch.MakeTarget); err != nil {
		return Kernel{}, err
	}
	if bk.Modules != nil {
		if err := b.make(ctx, "modules"); err != nil {
			return Kernel{}, err
		}
	}
	k := bk
	k.Key = key
	k.Image = filepath.Join(out, req.Arch.Image)
	k.Vmlinux = filepath.Join(out, "vmlinux")
	k.BuildDir = out
	k.Patches = patchNames(req.Patches)
	k.PatchDir, k.PatchedFiles = ov.dir, ov.files
	k.BaseKey = bk.Key
	if bk.Modules != nil {
		if k.Modules, err = findModules(out); err != nil {
			return Kernel{}, fmt.Errorf("built modules: %w", err)
		}
	}
	k.BuiltAt, k.BuildTime, k.BuildSteps, k.Cached = time.Now().UTC(), time.Since(start).Seconds(), b.steps, false
	if err := k.recordArtifacts(); err != nil {
		return Kernel{}, err
	}
	if k.ImageSHA256 == bk.ImageSHA256 {
		// A patch to a module alone (a sample's fix) leaves the image as
		// it was: a changed module is a change too.
		changed, err := modulesDiffer(bk.Modules, k.Modules)
		if err != nil {
			return Kernel{}, err
		}
		if !changed {
			return Kernel{}, fmt.Errorf("%w: %s (is the patched code configured in?)", ErrPatchNoop, strings.Join(k.Patches, "+"))
		}
	}
	if err := writeManifest(entry, k); err != nil {
		return Kernel{}, fmt.Errorf("write kernel manifest: %w", err)
	}
	markUsed(entry)
	log.Info("patched kernel built", "arch", req.Arch.Name, "patches", strings.Join(k.Patches, "+"), "seconds", int(k.BuildTime), "steps", b.steps, "entry", entry)
	return k, nil
}

// modulesDiffer reports whether any module of after differs from the
// module of the same name in before, or is not in it.
func modulesDiffer(before, after map[string]string) (bool, error) {
	for name, path := range after {
		old, ok := before[name]
		if !ok {
			return true, nil
		}
		a, err := os.ReadFile(old)
		if err != nil {
			return false, fmt.Errorf("compare module %s: %w", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return false, fmt.Errorf("compare module %s: %w", name, err)
		}
		if !bytes.Equal(a, b) {
			return true, nil
		}
	}
	return false, nil
}

// changesKconfig reports whether a patch touches a Kconfig file, which a
// patched copy of an already configured build cannot honour.
func changesKconfig(ps []Patch) bool {
	for _, p := range ps {
		files, err := PatchedFiles(p.Text)
		if err != nil {
			return false // buildPatched reports the bad patch
		}
		for _, f := range files {
			if strings.HasPrefix(filepath.Base(f), "Kconfig") {
				return true
			}
		}
	}
	return false
}

func patchNames(ps []Patch) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
