package kbuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// usedName is an entry's last-use stamp (its mtime), set on every build and
// cache hit: the cache evicts the least recently used entries first.
const usedName = "used"

// evictGrace keeps an entry used this recently: another fth process may
// be booting it, or about to read its vmlinux for a report.
const evictGrace = 10 * time.Minute

// fullBuildNeed is what a build from scratch writes (1.2-1.6 GB measured
// per arch; the margin covers the rest).
const fullBuildNeed = 1700 << 20

// markUsed stamps entry as used now. A failure costs only eviction order.
func markUsed(entry string) {
	p := filepath.Join(entry, usedName)
	now := time.Now()
	if err := os.Chtimes(p, now, now); errors.Is(err, os.ErrNotExist) {
		if f, err := os.Create(p); err == nil {
			f.Close()
		}
	}
}

// evictable is a complete cache entry eviction may take.
type evictable struct {
	dir  string
	rank int // what a rebuild costs: lower goes first
	used time.Time
}

// Rebuild costs, cheapest first: a patched kernel recompiles a few files
// of a copy (about a minute); a snapshot copies a tree; a kernel from
// scratch takes 10-20 minutes.
const (
	rankPatched = iota
	rankSnapshot
	rankKernel
)

// cacheSpace makes room in a kernel cache.
type cacheSpace struct {
	cacheDir string
	log      *slog.Logger
	// free is the bytes free to an unprivileged writer in dir's file system.
	free func(dir string) (int64, error)
	now  time.Time
}

func newCacheSpace(log *slog.Logger, cacheDir string) *cacheSpace {
	return &cacheSpace{cacheDir: cacheDir, log: log, free: statfsFree, now: time.Now()}
}

func statfsFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("kbuild: free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// makeRoom evicts cache entries until the cache's file system has need
// bytes and spaceMargin free, cheapest to rebuild and then least recently
// used first. It never takes an entry in keep, one a build holds, or one
// used in the last evictGrace. When that cannot free enough it fails with
// ErrNoSpace, before the caller writes a byte.
func (c *cacheSpace) makeRoom(ctx context.Context, need int64, keep ...string) error {
	free, err := c.free(c.cacheDir)
	if err != nil {
		return err
	}
	if free >= need+spaceMargin {
		return nil
	}
	cands, err := c.candidates(keep)
	if err != nil {
		return err
	}
	var freed int64
	for _, e := range cands {
		if free >= need+spaceMargin {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Sized only when taken: walking every candidate's tree would
		// stat millions of files to evict one or two.
		size, err := treeSize(e.dir)
		if err != nil {
			return fmt.Errorf("kbuild: size of %s: %w", e.dir, err)
		}
		ok, err := evict(e.dir)
		if err != nil {
			return fmt.Errorf("kbuild: evict %s: %w", e.dir, err)
		}
		if !ok {
			continue // a build holds it
		}
		c.log.Info("kernel cache: evicted an entry to make room", "entry", e.dir, "GB", fmt.Sprintf("%.1f", float64(size)/1e9), "last_used", e.used.UTC().Format(time.RFC3339))
		freed += size
		if free, err = c.free(c.cacheDir); err != nil {
			return err
		}
	}
	if free >= need+spaceMargin {
		return nil
	}
	return fmt.Errorf("%w: %s has %.1f GB free after evicting %.1f GB, this step writes %.1f GB and leaves %.0f GB to spare; entries used in the last %s or being built are kept: free space on that disk or point --cache elsewhere",
		ErrNoSpace, c.cacheDir, float64(free)/1e9, float64(freed)/1e9, float64(need)/1e9, float64(spaceMargin)/(1<<30), evictGrace)
}

// candidates lists the complete entries eviction may take, in order.
func (c *cacheSpace) candidates(keep []string) ([]evictable, error) {
	kept := map[string]bool{}
	for _, k := range keep {
		kept[filepath.Clean(k)] = true
	}
	var out []evictable
	add := func(pattern, complete string, rank func(dir string) int) error {
		dirs, err := filepath.Glob(filepath.Join(c.cacheDir, pattern))
		if err != nil {
			return err
		}
		for _, d := range dirs {
			st, err := os.Stat(filepath.Join(d, complete))
			if err != nil || kept[filepath.Clean(d)] {
				continue
			}
			used := st.ModTime()
			if u, err := os.Stat(filepath.Join(d, usedName)); err == nil {
				used = u.ModTime()
			}
			if c.now.Sub(used) < evictGrace {
				continue
			}
			out = append(out, evictable{dir: d, rank: rank(d), used: used})
		}
		return nil
	}
	kernelRank := func(d string) int {
		// The manifest alone, not loadManifest: its checksum of the image
		// is a read of every candidate's image for one field.
		var k Kernel
		b, err := os.ReadFile(filepath.Join(d, manifestName))
		if err == nil {
			err = json.Unmarshal(b, &k)
		}
		if err != nil || len(k.Patches) > 0 {
			return rankPatched // a corrupt entry is rebuilt anyway
		}
		return rankKernel
	}
	if err := add(filepath.Join("kernels", "*"), manifestName, kernelRank); err != nil {
		return nil, err
	}
	if err := add(filepath.Join("src", "snapshots", "*"), "identity", func(string) int { return rankSnapshot }); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].rank != out[j].rank {
			return out[i].rank < out[j].rank
		}
		return out[i].used.Before(out[j].used)
	})
	return out, nil
}

// evict empties entry under its build lock, taken without waiting: false
// if a build holds it. The mark of completeness goes first, so a reader
// never sees a half-removed entry as complete. The lock file stays: a
// process waiting on it must find an empty entry to build into, not a
// missing directory.
func evict(entry string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(entry, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return false, err
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	for _, mark := range []string{manifestName, "identity"} {
		if err := os.Remove(filepath.Join(entry, mark)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
	}
	names, err := os.ReadDir(entry)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if n.Name() == "lock" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(entry, n.Name())); err != nil {
			return false, err
		}
	}
	return true, nil
}
