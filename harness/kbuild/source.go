package kbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// ErrNotKernelTree is wrapped when a source directory is not a kernel tree.
var ErrNotKernelTree = errors.New("not a kernel source tree")

// Source is a kernel source tree.
type Source struct {
	// Dir is where the tree is built from: the tree itself, or its clean
	// snapshot (see PrepareSource).
	Dir string
	// Origin is the developer's tree a snapshot was taken of; "" when Dir
	// is the tree itself.
	Origin string
	// Version is the tree's VERSION.PATCHLEVEL.SUBLEVEL from its Makefile.
	Version string
	// Identity changes whenever any file in the tree changes.
	Identity string
}

var mkVarRe = regexp.MustCompile(`(?m)^(VERSION|PATCHLEVEL|SUBLEVEL) = (\d+)$`)

// ReadSource checks dir is a kernel tree and reads its version, without
// the identity (a second's walk) or any check that it builds out of tree:
// enough to read its Kconfig.
func ReadSource(dir string) (Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Source{}, err
	}
	mk, err := os.ReadFile(filepath.Join(abs, "Makefile"))
	if err != nil {
		return Source{}, fmt.Errorf("%w: %s has no readable Makefile (%v): point --kernel-src or KERNEL_SRC at a Linux tree, or run make deps for the default one", ErrNotKernelTree, abs, err)
	}
	v := map[string]string{}
	for _, m := range mkVarRe.FindAllStringSubmatch(string(mk), 3) {
		v[m[1]] = m[2]
	}
	if len(v) != 3 {
		return Source{}, fmt.Errorf("%w: %s/Makefile has no VERSION/PATCHLEVEL/SUBLEVEL", ErrNotKernelTree, abs)
	}
	return Source{Dir: abs, Version: v["VERSION"] + "." + v["PATCHLEVEL"] + "." + v["SUBLEVEL"]}, nil
}

// ErrConfiguredInPlace is wrapped by OpenSource for a tree kbuild would not
// build out of tree; PrepareSource builds such a tree from a snapshot.
var ErrConfiguredInPlace = errors.New("configured in place")

// OpenSource checks dir is a clean kernel tree that can be built out of
// tree where it is, and computes its identity.
func OpenSource(dir string) (Source, error) {
	s, err := ReadSource(dir)
	if err != nil {
		return Source{}, err
	}
	if dirty, why := configuredInPlace(s.Dir); dirty {
		return Source{}, fmt.Errorf("%s: %w (%s): kbuild builds it out of tree only from a clean snapshot (see PrepareSource)", s.Dir, ErrConfiguredInPlace, why)
	}
	if s.Identity, err = treeIdentity(s.Dir); err != nil {
		return Source{}, err
	}
	return s, nil
}

// treeIdentity hashes every file's path, size and mtime. Reading content would
// cost a minute on a kernel tree; metadata catches every edit in about a second.
func treeIdentity(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", path[len(dir):], info.Size(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash source tree %s: %w", dir, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
