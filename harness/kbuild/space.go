package kbuild

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrNoSpace: the cache's file system cannot hold what a build is about to
// write. The kernel cache evicts nothing, and a patched build is a whole
// copy of its unpatched build (1.2-1.6 GB): a mutation run or a bisection
// fills a disk quietly, and a build that dies half-way through takes the
// run's VMs and logs down with it.
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

// checkSpace fails with ErrNoSpace, before any byte is written, when dir's
// file system has less than need bytes and the margin free.
func checkSpace(dir string, need int64) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("kbuild: free space of %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= need+spaceMargin {
		return nil
	}
	return fmt.Errorf("%w: %s has %.1f GB free, a patched build needs %.1f GB and %.0f GB to spare: remove kernel entries under %s that no configuration uses any more (each is a whole build; fth evicts nothing)",
		ErrNoSpace, dir, float64(free)/1e9, float64(need)/1e9, float64(spaceMargin)/(1<<30), dir)
}
