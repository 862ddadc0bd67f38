// Package toolroot runs programs inside the Debian trixie toolchain root that
// scripts/toolroot.sh builds (QEMU 11.1, gcc-14, clang-21), through bwrap
// (bubblewrap): the root is the sandbox's /, and every host path a program
// needs is bound at the same path, so that command lines, socket paths and
// the paths ccache and kbuild record are the host's.
//
// The root is read-only, and bwrap cannot create a mount point inside a
// read-only bind, so Args lays the root out on bwrap's own tmpfs instead:
// every top-level entry is bound read-only (symlinks recreated), except
// the directories on the way to a host path, which become tmpfs
// directories holding their other entries bound one by one.
package toolroot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrMissing is wrapped when the root, or a program in it, is not there.
var ErrMissing = errors.New("toolchain root missing")

// completeMarker is the file scripts/toolroot.sh writes last.
const completeMarker = ".fth-complete"

// Root is a complete toolchain root.
type Root struct {
	// Dir is the root's directory on the host.
	Dir string
}

// Open checks that dir holds a complete root (scripts/toolroot.sh's
// marker). The error says how to build it.
func Open(dir string) (Root, error) {
	if dir == "" {
		return Root{}, fmt.Errorf("%w: no root path: run make deps (or bash scripts/toolroot.sh)", ErrMissing)
	}
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err != nil {
		return Root{}, fmt.Errorf("%w: %s is not a complete toolchain root: run make deps (or bash scripts/toolroot.sh)", ErrMissing, dir)
	}
	return Root{Dir: dir}, nil
}

// Has checks that the root has the program bin in /usr/bin.
func (r Root) Has(bin string) error {
	if _, err := os.Stat(filepath.Join(r.Dir, "usr/bin", bin)); err != nil {
		return fmt.Errorf("%w: %s has no /usr/bin/%s: add its package to scripts/toolroot/packages and run make deps", ErrMissing, r.Dir, bin)
	}
	return nil
}

// Mode says how a host path is bound.
type Mode int

// Bind modes.
const (
	// RW binds a host path read-write.
	RW Mode = iota
	// RO binds a host path read-only.
	RO
	// DevTry binds a device node if the host has it (/dev/kvm).
	DevTry
)

// Mount is a host path made visible inside the root at the same path.
type Mount struct {
	Path string
	Mode Mode
	// Src, when set, is bound at Path instead of Path itself: a patched
	// copy of one file laid over the tree (kbuild's overlay).
	Src string
}

// source is what m binds.
func (m Mount) source() string {
	if m.Src != "" {
		return m.Src
	}
	return m.Path
}

// Bwrap is the bubblewrap binary.
const Bwrap = "bwrap"

// Command returns the bwrap command line that runs name with args inside
// the root, with mounts bound, in dir (the same path as on the host; "" for
// /). bwrap dies with its parent and takes the program with it
// (--die-with-parent), so a killed harness leaves no process behind.
func (r Root) Command(mounts []Mount, dir, name string, args ...string) (string, []string, error) {
	out, err := r.Args(mounts)
	if err != nil {
		return "", nil, err
	}
	if dir != "" {
		out = append(out, "--chdir", dir)
	}
	out = append(out, "--", name)
	return Bwrap, append(out, args...), nil
}

// Args returns bwrap's options, without the program: the root laid out on
// bwrap's tmpfs, /dev and /proc, and mounts. It reads the root's
// directories on the way to each mount.
func (r Root) Args(mounts []Mount) ([]string, error) {
	ms, err := normalise(mounts)
	if err != nil {
		return nil, err
	}
	args := []string{"--die-with-parent"}
	var targets []string
	for _, m := range ms {
		targets = append(targets, m.Path)
	}
	// /dev and /proc are bwrap's own, never the root's.
	targets = append(targets, "/dev", "/proc")
	if err := r.layout("/", targets, &args); err != nil {
		return nil, err
	}
	args = append(args, "--dev", "/dev", "--proc", "/proc")
	for _, m := range ms {
		switch m.Mode {
		case RW:
			args = append(args, "--bind", m.source(), m.Path)
		case RO:
			args = append(args, "--ro-bind", m.source(), m.Path)
		case DevTry:
			args = append(args, "--dev-bind-try", m.source(), m.Path)
		}
	}
	return args, nil
}

// normalise cleans and sorts mounts (a parent before its children) and
// drops those a read-write parent already shows. Paths must be absolute,
// and none may be /, /dev or /proc themselves.
func normalise(mounts []Mount) ([]Mount, error) {
	var ms []Mount
	for _, m := range mounts {
		if !filepath.IsAbs(m.Path) || (m.Src != "" && !filepath.IsAbs(m.Src)) {
			return nil, fmt.Errorf("toolroot: mount %q is not an absolute path", m.Path)
		}
		m.Path = filepath.Clean(m.Path)
		if m.Path == "/" || m.Path == "/dev" || m.Path == "/proc" {
			return nil, fmt.Errorf("toolroot: cannot bind %s over the root's own", m.Path)
		}
		if under(m.Path, "/proc") || (under(m.Path, "/dev") && m.Mode != DevTry) {
			return nil, fmt.Errorf("toolroot: %s: only device nodes may be bound under /dev, nothing under /proc", m.Path)
		}
		ms = append(ms, m)
	}
	slices.SortStableFunc(ms, func(a, b Mount) int { return strings.Compare(a.Path, b.Path) })
	var out []Mount
	for _, m := range ms {
		covered := false
		for i, o := range out {
			if o.Path == m.Path && o.Src == m.Src {
				// The same path twice: read-write wins.
				if m.Mode == RW {
					out[i].Mode = RW
				}
				covered = true
				break
			}
			if under(m.Path, o.Path) && o.Mode == RW && m.Mode != DevTry && m.Src == "" {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, m)
		}
	}
	// A read-only parent after its read-write child would hide it: keep
	// parents first (sorting did), which bwrap applies in order.
	return out, nil
}

// under reports whether p is strictly inside dir.
func under(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// layout adds the options that show the root's directory dir (a path
// inside the root) with room for targets: an entry with no target inside
// it is bound read-only (a symlink recreated), an entry that is a target is
// left to the target's own mount, and an entry on the way to a target
// becomes a tmpfs directory laid out the same way. A target's ancestors
// that the root lacks are created empty.
func (r Root) layout(dir string, targets []string, args *[]string) error {
	ents, err := os.ReadDir(filepath.Join(r.Dir, dir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("toolroot: %w", err)
	}
	seen := map[string]bool{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		seen[e.Name()] = true
		if dir == "/" && strings.HasPrefix(e.Name(), ".fth-") {
			continue // the script's markers
		}
		if slices.Contains(targets, p) {
			continue
		}
		if !slices.ContainsFunc(targets, func(t string) bool { return under(t, p) }) {
			if e.Type()&os.ModeSymlink != 0 {
				link, err := os.Readlink(filepath.Join(r.Dir, p))
				if err != nil {
					return fmt.Errorf("toolroot: %w", err)
				}
				*args = append(*args, "--symlink", link, p)
				continue
			}
			*args = append(*args, "--ro-bind", filepath.Join(r.Dir, p), p)
			continue
		}
		if !e.IsDir() {
			return fmt.Errorf("toolroot: %s is not a directory in the root %s, so nothing can be bound under it", p, r.Dir)
		}
		*args = append(*args, "--dir", p)
		if err := r.layout(p, targets, args); err != nil {
			return err
		}
	}
	// Ancestors of targets that the root does not have (/work for
	// /work/main): empty directories, laid out the same way below.
	var missing []string
	for _, t := range targets {
		if !under(t, dir) {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(t, dir), "/")
		first, _, _ := strings.Cut(rel, "/")
		if !seen[first] && !slices.Contains(missing, first) {
			missing = append(missing, first)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		p := filepath.Join(dir, name)
		if slices.Contains(targets, p) {
			continue // the bind creates its own mount point
		}
		*args = append(*args, "--dir", p)
		if err := r.layout(p, targets, args); err != nil {
			return err
		}
	}
	return nil
}
