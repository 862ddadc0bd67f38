// Package images builds the guest initramfs: u-root's init plus the ftrace-harness
// agent, cross-built for the target GOARCH with mkuimage, and cached by content.
package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/u-root/gobusybox/src/pkg/golang"
	"github.com/u-root/mkuimage/uimage"
	"github.com/u-root/uio/llog"
)

// keyVersion changes when the image recipe changes.
const keyVersion = "fth-image-3" // 2: board commands and a shell; 3: reproducers' commands

const (
	// AgentPackage is the guest agent's import path.
	AgentPackage = "github.com/ftrace-harness/fth/stress/agent"
	initPackage  = "github.com/u-root/u-root/cmds/core/init"
)

// boardCommands are the u-root commands a VM needs to stand in for an SSH
// board (fth.board=1): sshd, the shell it runs commands with, and what the
// soak runs remotely (cat for /dev/kmsg and uploads, chmod, mv, uname, kill,
// ...). ip brings up the user-mode network. They cost the image about a
// few MB and nothing at run time when unused.
//
// The standalone reproducers (results/known/repro/*/run.sh) are sh
// scripts that run with gosh and need insmod, rmmod, grep, dmesg, echo,
// cat and dd (one-byte reads and writes in a loop: the most calls of
// vfs_read() and vfs_write() a task makes without forking) besides.
var boardCommands = []string{"gosh", "sshd", "cat", "chmod", "mv", "uname", "ip", "kill", "ls", "sleep", "rm", "mkdir", "wc",
	"insmod", "rmmod", "grep", "dmesg", "echo", "dd"}

// Request says which initramfs to build.
type Request struct {
	// GOARCH of the guest.
	GOARCH string
	// ModuleDir is the root of the ftrace-harness module (where go.mod is).
	ModuleDir string
	// CacheDir holds images/<goarch>-<key>.cpio.
	CacheDir string
}

// Image is a built initramfs.
type Image struct {
	Path   string
	Key    string
	Cached bool
}

// Build returns the initramfs for req, from the cache when the agent's sources,
// go.sum, the Go toolchain and the GOARCH are unchanged.
func Build(ctx context.Context, log *slog.Logger, req Request) (Image, error) {
	key, err := Key(ctx, req)
	if err != nil {
		return Image{}, err
	}
	dir := filepath.Join(req.CacheDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Image{}, err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%s.cpio", req.GOARCH, key[:16]))
	// Only complete images are ever renamed into place, so existence is enough;
	// a non-cpio file there is caught by the magic check.
	if ok, err := looksLikeCPIO(path); err == nil && ok {
		touch(path)
		log.Info("initramfs cached", "goarch", req.GOARCH, "path", path)
		return Image{Path: path, Key: key, Cached: true}, nil
	} else if err == nil {
		log.Warn("initramfs cache entry is corrupt, rebuilding", "path", path)
	}

	tmpDir, err := os.MkdirTemp("", "fth-uimage-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(tmpDir)
	partial := path + ".partial"
	log.Info("building initramfs", "goarch", req.GOARCH, "agent", AgentPackage)
	env := golang.Default(golang.DisableCGO(), golang.WithGOARCH(req.GOARCH), golang.WithWorkingDir(req.ModuleDir))
	var out bytes.Buffer
	l := llog.New(slog.LevelWarn, llog.WritePrintf(&out))
	done := make(chan error, 1)
	go func() {
		done <- uimage.Create(l,
			uimage.WithReplaceEnv(env),
			uimage.WithTempDir(tmpDir),
			uimage.WithBaseArchive(uimage.DefaultRamfs()),
			uimage.WithBusyboxCommands(append([]string{initPackage, AgentPackage}, corePackages(boardCommands)...)...),
			uimage.WithInit("init"),
			uimage.WithShell("gosh"),
			uimage.WithUinitCommand("agent"),
			uimage.WithCPIOOutput(partial),
			uimage.WithSkipLDD(),
		)
	}()
	select {
	case <-ctx.Done():
		return Image{}, fmt.Errorf("build initramfs: %w", ctx.Err())
	case err := <-done:
		if err != nil {
			return Image{}, fmt.Errorf("build initramfs for %s: %w\n%s", req.GOARCH, err, out.String())
		}
	}
	if err := os.Rename(partial, path); err != nil {
		return Image{}, err
	}
	prune(log, dir, time.Now())
	return Image{Path: path, Key: key}, nil
}

// Key hashes everything that ends up in the image: the Go version, go.mod and
// go.sum, GOARCH, and the source of every package of this module that the agent
// imports.
func Key(ctx context.Context, req Request) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\ngoarch %s\ngo %s\n", keyVersion, req.GOARCH, runtime.Version())
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, filepath.Join(req.ModuleDir, f)); err != nil {
			return "", fmt.Errorf("image key: %w (is %s the ftrace-harness module root?)", err, req.ModuleDir)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", AgentPackage)
	cmd.Dir = req.ModuleDir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+req.GOARCH, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("image key: go list %s: %w", AgentPackage, err)
	}
	var files []string
	for _, dir := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dir, req.ModuleDir+string(filepath.Separator)) {
			continue // third-party code is pinned by go.sum
		}
		m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(h, "file %s\n", strings.TrimPrefix(f, req.ModuleDir))
		if err := hashFile(h, f); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// looksLikeCPIO reports whether path starts with a newc cpio header.
func looksLikeCPIO(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	magic := make([]byte, 6)
	if _, err := io.ReadFull(f, magic); err != nil {
		return false, nil
	}
	return string(magic) == "070701", nil
}

func corePackages(cmds []string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = "github.com/u-root/u-root/cmds/core/" + c
	}
	return out
}
