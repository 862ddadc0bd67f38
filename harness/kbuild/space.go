package kbuild

import (
	"errors"
	"io/fs"
	"path/filepath"
)

// ErrNoSpace: the cache's file system cannot hold what a build is about to
// write, even after evicting what it may (see cacheSpace.makeRoom). A
// patched build is a whole copy of its unpatched build (1.2-1.6 GB): a
// mutation run or a bisection fills a disk quickly, and a build that dies
// half-way through takes the run's VMs and logs down with it.
var ErrNoSpace = errors.New("not enough free space in the kernel cache")

// spaceMargin is left free beyond what the copy needs: the patched build
// and the modules write some more, and the guests' logs go to the same disk.
const spaceMargin = 2 << 30

// treeSize is the bytes of the regular files under dir.
func treeSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}
