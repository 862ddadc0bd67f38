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
	Dir string
	// Version is the tree's VERSION.PATCHLEVEL.SUBLEVEL from its Makefile.
	Version string
	// Identity changes whenever any file in the tree changes.
	Identity string
}

var mkVarRe = regexp.MustCompile(`(?m)^(VERSION|PATCHLEVEL|SUBLEVEL) = (\d+)$`)

// OpenSource checks dir is a kernel tree that can be built out of tree, and
// computes its identity.
func OpenSource(dir string) (Source, error) {
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
	// An in-tree build leaves a .config behind, and then make O= refuses to run.
	if _, err := os.Stat(filepath.Join(abs, ".config")); err == nil {
		return Source{}, fmt.Errorf("%w: %s was configured in place (it has a .config); out-of-tree builds need a clean tree: run make mrproper there", ErrNotKernelTree, abs)
	}
	id, err := treeIdentity(abs)
	if err != nil {
		return Source{}, err
	}
	return Source{Dir: abs, Version: v["VERSION"] + "." + v["PATCHLEVEL"] + "." + v["SUBLEVEL"], Identity: id}, nil
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
