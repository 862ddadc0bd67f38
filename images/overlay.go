package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ftrace-harness/fth/internal/atomicfile"
)

// Overlay returns base with files appended as a second cpio archive: the
// kernel unpacks concatenated newc archives in order, so the agent image
// stays per GOARCH and only the small per-kernel part (modules) is
// rebuilt per kernel. files maps guest paths (absolute) to host paths. The
// result is cached under cacheDir/images by the contents of both.
func Overlay(log *slog.Logger, base Image, files map[string]string, cacheDir string) (Image, error) {
	if len(files) == 0 {
		return base, nil
	}
	guests := make([]string, 0, len(files))
	for g := range files {
		if !filepath.IsAbs(g) {
			return Image{}, fmt.Errorf("overlay: guest path %q is not absolute", g)
		}
		guests = append(guests, g)
	}
	sort.Strings(guests)
	h := sha256.New()
	fmt.Fprintf(h, "%s\noverlay of %s\n", keyVersion, base.Key)
	contents := map[string][]byte{}
	modes := map[string]uint64{}
	for _, g := range guests {
		b, err := os.ReadFile(files[g])
		if err != nil {
			return Image{}, fmt.Errorf("overlay: %w", err)
		}
		st, err := os.Stat(files[g])
		if err != nil {
			return Image{}, fmt.Errorf("overlay: %w", err)
		}
		// A program stays executable; everything else is a plain file.
		modes[g] = 0o644
		if st.Mode()&0o111 != 0 {
			modes[g] = 0o755
		}
		contents[g] = b
		fmt.Fprintf(h, "file %s %o %d\n", g, modes[g], len(b))
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))
	path := filepath.Join(cacheDir, "images", "overlay-"+key[:16]+".cpio")
	if ok, err := looksLikeCPIO(path); err == nil && ok {
		touch(path)
		return Image{Path: path, Key: key, Cached: true}, nil
	}

	var extra bytes.Buffer
	w := cpio.Newc.Writer(&extra)
	recs := make([]cpio.Record, 0, len(guests))
	for _, g := range guests {
		recs = append(recs, cpio.StaticFile(g[1:], string(contents[g]), modes[g]))
	}
	cpio.MakeAllReproducible(recs)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return Image{}, fmt.Errorf("overlay: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return Image{}, fmt.Errorf("overlay: %w", err)
	}
	img, err := os.ReadFile(base.Path)
	if err != nil {
		return Image{}, fmt.Errorf("overlay: base image: %w", err)
	}
	if err := atomicfile.Write(path, append(img, extra.Bytes()...)); err != nil {
		return Image{}, fmt.Errorf("overlay: %w", err)
	}
	prune(log, filepath.Dir(path), time.Now())
	return Image{Path: path, Key: key}, nil
}
