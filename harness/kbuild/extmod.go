package kbuild

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// extDoneName marks a finished external module build; like the kernel
// manifest it is written last, so a killed build is redone.
const extDoneName = ".fth-done"

// BuildModule builds the out-of-tree module whose Kbuild file and sources
// are in src against k, the way a kernel developer would (make M=...), and
// returns its .ko: src must build exactly one. The build lives in k's
// cache entry under ext/, keyed by the kernel and the contents of src, so
// it is redone only when either changes. req must be the request k was
// built from: it supplies the toolchain and the source tree.
func BuildModule(ctx context.Context, log *slog.Logger, req Request, k Kernel, src string) (string, error) {
	name := filepath.Base(src)
	if k.Modules == nil {
		return "", fmt.Errorf("module %s: kernel %s was built without CONFIG_MODULES=y (or by an older fth): rebuild it with the base fragment", name, k.Key[:16])
	}
	files, err := moduleFiles(src)
	if err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nkernel %s\n", keyVersion, k.Key)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("module %s: %w", name, err)
		}
		fmt.Fprintf(h, "file %s %d\n", f, len(b))
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))
	entry := filepath.Dir(k.BuildDir)
	dir := filepath.Join(entry, "ext", name+"-"+key[:16])
	if _, err := os.Stat(filepath.Join(dir, extDoneName)); err == nil {
		if ko, err := onlyKO(dir); err == nil {
			return ko, nil
		}
	}
	unlock, err := lock(ctx, log, entry)
	if err != nil {
		return "", err
	}
	defer unlock()

	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", fmt.Errorf("module %s: %w", name, err)
		}
	}
	// The kernel's own toolchain (req's): a module built by another
	// compiler may not load (or be refused by the build's compiler checks).
	if err := req.Toolchain.checkFor(req.Arch.Name); err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	// A patched kernel's modules see its patched files too.
	b := &builder{req: req, out: k.BuildDir, log: log, ov: overlay{dir: k.PatchDir, files: k.PatchedFiles}}
	start := time.Now()
	args := []string{"-C", req.Source.Dir, "O=" + k.BuildDir, "CC=" + req.Toolchain.CC, "M=" + dir, "modules"}
	log.Info("building module", "module", name, "arch", req.Arch.Name, "dir", dir)
	if _, err := b.run(ctx, "make M="+name, "make", args, nil); err != nil {
		return "", fmt.Errorf("module %s: %w", name, err)
	}
	ko, err := onlyKO(dir)
	if err != nil {
		return "", fmt.Errorf("module %s: make succeeded but %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, extDoneName), nil, 0o644); err != nil {
		return "", err
	}
	log.Info("module built", "module", name, "seconds", time.Since(start).Round(time.Millisecond))
	return ko, nil
}

// moduleFiles lists the files of an external module source directory: its
// Kbuild (or Makefile) and C sources and headers, sorted.
// HasModuleSource says src is a module source directory BuildModule
// takes: a Kbuild or a Makefile beside its sources.
func HasModuleSource(src string) bool {
	_, err := moduleFiles(src)
	return err == nil
}

func moduleFiles(src string) ([]string, error) {
	ents, err := os.ReadDir(src)
	if err != nil {
		return nil, err
	}
	var files []string
	kbuild := false
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() {
			continue
		}
		switch {
		case n == "Kbuild" || n == "Makefile":
			kbuild = true
			files = append(files, n)
		case strings.HasSuffix(n, ".c") || strings.HasSuffix(n, ".h"):
			files = append(files, n)
		}
	}
	if !kbuild {
		return nil, errors.New(src + " has no Kbuild or Makefile: not a module source directory")
	}
	sort.Strings(files)
	return files, nil
}

// onlyKO returns the one .ko in dir.
func onlyKO(dir string) (string, error) {
	kos, _ := filepath.Glob(filepath.Join(dir, "*.ko"))
	if len(kos) != 1 {
		return "", fmt.Errorf("%s holds %d .ko files, want exactly one", dir, len(kos))
	}
	return kos[0], nil
}
