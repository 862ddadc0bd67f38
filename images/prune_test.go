package images

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPrune(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name       string
		old, fresh int // images used 2 days ago, and 10 minutes ago
		wantLeft   int
	}{
		{name: "under the bound", old: keepImages - 1, wantLeft: keepImages - 1},
		{name: "at the bound", old: keepImages, wantLeft: keepImages},
		{name: "over it: the oldest go", old: keepImages + 10, wantLeft: keepImages},
		{name: "the recently used stay beyond it", old: 5, fresh: keepImages + 3, wantLeft: keepImages + 3},
		{name: "recent first, old fill the rest", old: 20, fresh: keepImages - 5, wantLeft: keepImages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mk := func(name string, at time.Time) {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte("070701"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(p, at, at); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.old {
				mk(fmt.Sprintf("amd64-old%03d.cpio", i), now.Add(-48*time.Hour-time.Duration(i)*time.Minute))
			}
			for i := range tt.fresh {
				mk(fmt.Sprintf("overlay-new%03d.cpio", i), now.Add(-10*time.Minute))
			}
			mk("not-an-image.txt", now.Add(-72*time.Hour))
			prune(slog.New(slog.NewTextHandler(io.Discard, nil)), dir, now)
			left, _ := filepath.Glob(filepath.Join(dir, "*.cpio"))
			if len(left) != tt.wantLeft {
				t.Errorf("%d images left, want %d", len(left), tt.wantLeft)
			}
			for i := range tt.fresh {
				if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("overlay-new%03d.cpio", i))); err != nil {
					t.Errorf("a recently used image went: %v", err)
				}
			}
			// The newest of the old ones are the ones kept.
			if tt.old > 0 && tt.wantLeft > tt.fresh {
				if _, err := os.Stat(filepath.Join(dir, "amd64-old000.cpio")); err != nil {
					t.Errorf("the most recently used old image went: %v", err)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "not-an-image.txt")); err != nil {
				t.Errorf("prune removed a file that is not an image: %v", err)
			}
		})
	}
}
