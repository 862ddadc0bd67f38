package images

import (
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// keepImages bounds the image cache. Each agent change makes a new image
// per GOARCH and a new overlay per kernel (12-25 MB each); unbounded, two
// days of work here left 449 of them, 5.8 GB, on the disk the kernel
// cache needs. An image rebuilds in seconds.
const keepImages = 64

// pruneGrace keeps an image used this recently: another fth process may
// be about to boot it (QEMU reads the initrd whole when it starts).
const pruneGrace = time.Hour

// touch stamps a cached image as used now, for prune's order.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}

// prune removes the least recently used images of dir beyond keepImages,
// sparing those used within pruneGrace. A failure only leaves an image.
func prune(log *slog.Logger, dir string, now time.Time) {
	paths, _ := filepath.Glob(filepath.Join(dir, "*.cpio"))
	type img struct {
		path string
		used time.Time
	}
	var imgs []img
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			imgs = append(imgs, img{p, st.ModTime()})
		}
	}
	if len(imgs) <= keepImages {
		return
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].used.After(imgs[j].used) })
	removed := 0
	for _, im := range imgs[keepImages:] {
		if now.Sub(im.used) < pruneGrace {
			continue
		}
		if os.Remove(im.path) == nil {
			removed++
		}
	}
	if removed > 0 {
		log.Info("image cache: removed the least recently used images", "removed", removed, "kept", len(imgs)-removed, "dir", dir)
	}
}
