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

// Ext is what an external module build gives: its module and the user
// programs its Makefile builds with it (kbuild's userprogs).
type Ext struct {
	// Module is the .ko; empty when the directory builds programs only.
	Module string
	// Programs are the user programs' paths, sorted.
	Programs []string
}

// BuildModule builds the out-of-tree module whose Kbuild file and sources
// are in src against k, the way a kernel developer would (make M=...), and
// returns its .ko and programs: src must build at most one module, and a
// module or a program. The build lives in k's cache entry under ext/,
// keyed by the kernel and the contents of src, so it is redone only when
// either changes. req must be the request k was built from: it supplies
// the toolchain and the source tree.
func BuildModule(ctx context.Context, log *slog.Logger, req Request, k Kernel, src string) (Ext, error) {
	name := filepath.Base(src)
	if k.Modules == nil {
		return Ext{}, fmt.Errorf("module %s: kernel %s was built without CONFIG_MODULES=y (or by an older fth): rebuild it with the base fragment", name, k.Key[:16])
	}
	files, err := moduleFiles(src)
	if err != nil {
		return Ext{}, fmt.Errorf("module %s: %w", name, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nkernel %s\n", keyVersion, k.Key)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return Ext{}, fmt.Errorf("module %s: %w", name, err)
		}
		fmt.Fprintf(h, "file %s %d\n", f, len(b))
		h.Write(b)
	}
	key := hex.EncodeToString(h.Sum(nil))
	entry := filepath.Dir(k.BuildDir)
	dir := filepath.Join(entry, "ext", name+"-"+key[:16])
	if _, err := os.Stat(filepath.Join(dir, extDoneName)); err == nil {
		if ext, err := outputs(dir); err == nil {
			return ext, nil
		}
	}
	unlock, err := lock(ctx, log, entry)
	if err != nil {
		return Ext{}, err
	}
	defer unlock()

	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Ext{}, fmt.Errorf("module %s: %w", name, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return Ext{}, err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return Ext{}, fmt.Errorf("module %s: %w", name, err)
		}
	}
	// The kernel's own toolchain (req's): a module built by another
	// compiler may not load (or be refused by the build's compiler checks).
	if err := req.Toolchain.checkFor(req.Arch.Name); err != nil {
		return Ext{}, fmt.Errorf("module %s: %w", name, err)
	}
	// A patched kernel's modules see its patched files too.
	b := &builder{req: req, out: k.BuildDir, log: log, ov: overlay{dir: k.PatchDir, files: k.PatchedFiles}}
	start := time.Now()
	args := []string{"-C", req.Source.Dir, "O=" + k.BuildDir, "CC=" + req.Toolchain.CC, "M=" + dir, "modules"}
	log.Info("building module", "module", name, "arch", req.Arch.Name, "dir", dir)
	if _, err := b.run(ctx, "make M="+name, "make", args, nil); err != nil {
		return Ext{}, fmt.Errorf("module %s: %w", name, err)
	}
	ext, err := outputs(dir)
	if err != nil {
		return Ext{}, fmt.Errorf("module %s: make succeeded but %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, extDoneName), nil, 0o644); err != nil {
		return Ext{}, err
	}
	log.Info("module built", "module", name, "programs", len(ext.Programs), "seconds", time.Since(start).Round(time.Millisecond))
	return ext, nil
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

// outputs lists what a finished build in dir gave: at most one .ko, and
// the executables of kbuild's userprogs (a Makefile's
// `userprogs-always-y += name`), which kbuild builds with the kernel's
// compiler along with the module.
func outputs(dir string) (Ext, error) {
	kos, _ := filepath.Glob(filepath.Join(dir, "*.ko"))
	if len(kos) > 1 {
		return Ext{}, fmt.Errorf("%s holds %d .ko files, want at most one", dir, len(kos))
	}
	var ext Ext
	if len(kos) == 1 {
		ext.Module = kos[0]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Ext{}, err
	}
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || strings.Contains(n, ".") {
			continue
		}
		st, err := e.Info()
		if err != nil {
			return Ext{}, err
		}
		if st.Mode()&0o111 != 0 {
			ext.Programs = append(ext.Programs, filepath.Join(dir, n))
		}
	}
	sort.Strings(ext.Programs)
	if ext.Module == "" && len(ext.Programs) == 0 {
		return Ext{}, fmt.Errorf("%s holds no .ko and no program", dir)
	}
	return ext, nil
}
