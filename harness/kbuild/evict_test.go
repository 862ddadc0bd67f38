package kbuild

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeEntry makes a complete cache entry of size bytes, last used ago.
type fakeEntry struct {
	name    string // under the cache dir
	patched bool
	size    int
	ago     time.Duration
	stamp   bool // a used stamp (older entries have only their manifest)
}

func TestMakeRoom(t *testing.T) {
	const margin = spaceMargin
	entries := []fakeEntry{
		{name: "kernels/x86_64-base", size: 400, ago: 5 * time.Hour, stamp: true},
		{name: "kernels/x86_64-mutA", patched: true, size: 100, ago: 3 * time.Hour, stamp: true},
		{name: "kernels/x86_64-mutB", patched: true, size: 100, ago: 4 * time.Hour},
		{name: "kernels/x86_64-fresh", patched: true, size: 100, ago: time.Minute, stamp: true},
		{name: "kernels/arm64-base", size: 400, ago: 30 * time.Hour, stamp: true},
		{name: "src/snapshots/abc", size: 200, ago: 2 * time.Hour, stamp: true},
	}
	tests := []struct {
		name    string
		free    int64 // before eviction, beyond the margin
		need    int64
		keep    []string
		locked  string
		want    []string // evicted, in order
		wantErr bool
	}{
		{name: "enough already", free: 500, need: 500},
		{name: "one patched, the oldest first", free: 0, need: 100, want: []string{"kernels/x86_64-mutB"}},
		{name: "patched, then snapshot, then LRU kernel", free: 0, need: 800,
			want: []string{"kernels/x86_64-mutB", "kernels/x86_64-mutA", "kernels/arm64-base", "src/snapshots/abc"}},
		{name: "kept and locked skipped", free: 0, need: 100, keep: []string{"kernels/x86_64-mutB"}, locked: "kernels/x86_64-mutA",
			want: []string{"src/snapshots/abc"}},
		{name: "the recently used never", free: 0, need: 1300, wantErr: true,
			want: []string{"kernels/x86_64-mutB", "kernels/x86_64-mutA", "src/snapshots/abc", "kernels/arm64-base", "kernels/x86_64-base"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := t.TempDir()
			now := time.Now()
			for _, e := range entries {
				writeFakeEntry(t, cache, e, now)
			}
			if tt.locked != "" {
				f, err := os.OpenFile(filepath.Join(cache, tt.locked, "lock"), os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
					t.Fatal(err)
				}
			}
			// Free space grows by what eviction removed.
			c := &cacheSpace{cacheDir: cache, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: now,
				free: func(string) (int64, error) {
					var freed int64
					for _, e := range entries {
						if _, err := os.Stat(filepath.Join(cache, e.name, "payload")); errors.Is(err, os.ErrNotExist) {
							freed += int64(e.size)
						}
					}
					return margin + tt.free + freed, nil
				}}
			var keep []string
			for _, k := range tt.keep {
				keep = append(keep, filepath.Join(cache, k))
			}
			err := c.makeRoom(context.Background(), tt.need, keep...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("makeRoom = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrNoSpace) {
				t.Errorf("makeRoom = %v, want ErrNoSpace", err)
			}
			var got []string
			for _, e := range entries {
				d := filepath.Join(cache, e.name)
				if _, err := os.Stat(filepath.Join(d, "payload")); err == nil {
					continue
				}
				got = append(got, e.name)
				if _, err := os.Stat(filepath.Join(d, "lock")); err != nil {
					t.Errorf("%s: the lock file went with the entry: %v", e.name, err)
				}
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("evicted %v, want %v", got, want)
			}
		})
	}
}

// TestEvictionOrder checks the order itself, which TestMakeRoom's final
// sets cannot show.
func TestEvictionOrder(t *testing.T) {
	cache := t.TempDir()
	now := time.Now()
	for _, e := range []fakeEntry{
		{name: "kernels/k-old", size: 1, ago: 9 * time.Hour, stamp: true},
		{name: "kernels/k-new", size: 1, ago: 2 * time.Hour, stamp: true},
		{name: "kernels/p-new", patched: true, size: 1, ago: time.Hour, stamp: true},
		{name: "kernels/p-old", patched: true, size: 1, ago: 8 * time.Hour},
		{name: "src/snapshots/s", size: 1, ago: 20 * time.Hour, stamp: true},
	} {
		writeFakeEntry(t, cache, e, now)
	}
	c := &cacheSpace{cacheDir: cache, now: now}
	cands, err := c.candidates(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range cands {
		got = append(got, strings.TrimPrefix(e.dir, cache+"/"))
	}
	want := []string{"kernels/p-old", "kernels/p-new", "src/snapshots/s", "kernels/k-old", "kernels/k-new"}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func writeFakeEntry(t *testing.T, cache string, e fakeEntry, now time.Time) {
	t.Helper()
	d := filepath.Join(cache, e.name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	complete := manifestName
	body := []byte("snapshot-identity")
	if strings.HasPrefix(e.name, "kernels/") {
		k := Kernel{Key: e.name}
		if e.patched {
			k.Patches = []string{"mutant"}
		}
		var err error
		if body, err = json.Marshal(k); err != nil {
			t.Fatal(err)
		}
	} else {
		complete = "identity"
	}
	at := now.Add(-e.ago)
	for name, b := range map[string][]byte{complete: body, "payload": make([]byte, e.size), "lock": nil} {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if e.stamp {
		p := filepath.Join(d, usedName)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
}
