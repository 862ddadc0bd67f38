package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// defaultTree is where `make deps` unpacks Debian's linux-source-7.3.
const defaultTree = "/var/cache/fth/src/linux-source-7.3"

// A developer's own tree was refused if it had ever been configured in
// place ("run make mrproper there", which would delete their .config). It
// is now built from a clean snapshot of its source files, and never
// written to. The tree here is the default one, hard-linked with its mtimes and
// then configured in place (make defconfig), so its snapshot after the
// kernel's mrproper is the pristine tree again: the x86_64 kernel the other
// tests built is found in the cache by content, and nothing is rebuilt. A
// build starting would mean the snapshot is not what it should be, so the
// test stops it at once rather than wait ten minutes.
func TestInTreeConfiguredInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("copies a kernel tree; skipped with -short")
	}
	clock(t)
	if _, err := os.Stat(filepath.Join(defaultTree, "Makefile")); err != nil {
		t.Skipf("no default tree (make deps): %v", err)
	}
	// A copy of hard links: a full copy is 1.5 GB more on a disk the
	// snapshot and the kernel cache already fill. make defconfig writes
	// only files the pristine tree does not have, which the default tree's
	// own hash checks at the end.
	pristine := hashTree(t, defaultTree)
	t.Cleanup(func() {
		if hashTree(t, defaultTree) != pristine {
			t.Errorf("%s changed: the test's hard-linked copy wrote into it", defaultTree)
		}
	})
	tree := filepath.Join(t.TempDir(), "linux")
	if out, err := exec.Command("cp", "-al", defaultTree, tree).CombinedOutput(); err != nil {
		t.Fatalf("cp -al: %v\n%s", err, out)
	}
	defconfig := exec.Command("make", "-s", "ARCH=x86_64", "defconfig")
	defconfig.Dir = tree
	defconfig.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if out, err := defconfig.CombinedOutput(); err != nil {
		t.Fatalf("make defconfig in place: %v\n%s", err, out)
	}
	before := hashTree(t, tree)

	// The kernel the x86_64 tests use: built now if no test built it yet.
	warm := exec.CommandContext(t.Context(), fthBin, "build", "--arch", "x86_64")
	warm.Dir = "../.."
	if out, err := warm.CombinedOutput(); err != nil {
		t.Fatalf("fth build of the default tree: %v\n%s", err, out)
	}

	// The copy has the pristine tree's mtimes, so every run's snapshot
	// has one key: a run killed before its cleanup leaves it cached, and
	// this run removes it and starts again.
	var stdout, stderr string
	var err error
	var took time.Duration
	for try := 0; try < 2; try++ {
		start := time.Now()
		stdout, stderr, err = buildNoCompile(t, "build", "--arch", "x86_64", "--kernel-src", tree)
		took = time.Since(start)
		m := snapshotRe.FindStringSubmatch(stderr)
		if m != nil {
			// A developer's snapshots are kept; the test's 1.5 GB are not.
			t.Cleanup(func() { os.RemoveAll(filepath.Dir(m[1])) })
		}
		if err != nil {
			t.Fatalf("fth build --kernel-src <tree configured in place>: %v\nstderr:\n%s", err, stderr)
		}
		if m == nil || !strings.Contains(stderr, "kernel snapshot cached") {
			break
		}
		t.Logf("removing the snapshot an earlier run left: %s", filepath.Dir(m[1]))
		if err := os.RemoveAll(filepath.Dir(m[1])); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.HasPrefix(stdout, "cached:") || !strings.Contains(stderr, "kernel snapshot made") {
		t.Errorf("stdout %q, stderr:\n%s\nwant a snapshot made and the kernel found cached", stdout, stderr)
	}
	if after := hashTree(t, tree); after != before {
		t.Error("the developer's tree changed")
	}
	if _, err := os.Stat(filepath.Join(tree, ".config")); err != nil {
		t.Errorf("the developer's .config: %v", err)
	}
	t.Logf("snapshot and cache lookup in %s", took.Round(100*time.Millisecond))

	// A second build finds the snapshot itself.
	_, stderr, err = buildNoCompile(t, "build", "--arch", "x86_64", "--kernel-src", tree)
	if err != nil || !strings.Contains(stderr, "kernel snapshot cached") {
		t.Errorf("second build: %v, stderr:\n%s\nwant the snapshot found in the cache", err, stderr)
	}
}

var snapshotRe = regexp.MustCompile(`snapshot=(\S+/src/snapshots/[0-9a-f]+/tree)`)

// buildNoCompile runs fth and stops it if kbuild starts compiling.
func buildNoCompile(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, fthBin, args...)
	cmd.Dir = "../.."
	var stdout strings.Builder
	cmd.Stdout = &stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(pipe)
	compiling := false
	for sc.Scan() {
		stderr.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), `msg=configuring`) || strings.Contains(sc.Text(), `msg="building kernel"`) {
			compiling = true
			cancel()
		}
	}
	err = cmd.Wait()
	if compiling {
		return stdout.String(), stderr.String(), fmt.Errorf("a kernel build started: the snapshot's identity differs from the tree it copies")
	}
	return stdout.String(), stderr.String(), err
}

// hashTree hashes every path, size, mode and mtime under dir, and the
// content of .config.
func hashTree(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %v %d\n", p[len(dir):], info.Size(), info.Mode(), info.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".config"))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}
