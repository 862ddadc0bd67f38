package kbuild

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/internal/atomicfile"
)

// keyVersion changes when the build recipe changes in a way that invalidates
// every cached kernel.
const keyVersion = "fth-kbuild-2" // 2: make modules after the image

// ErrCorruptCache is wrapped when a cache entry exists but fails its checks.
var ErrCorruptCache = errors.New("corrupt kernel cache entry")

// Key identifies a kernel build by content: the source tree, the merged
// fragments (text, in order), the arch and the toolchain.
// Patches, if any, are part of the key in order.
func Key(src Source, a arch.Name, frags []Fragment, tc Toolchain, patches ...Patch) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nsrc %s\narch %s\ntoolchain %s\ncross %s\n", keyVersion, src.Identity, a, tc.Version, tc.CrossCompile)
	if tc.LLVM != "" {
		fmt.Fprintf(h, "llvm %s\n", tc.LLVM)
	}
	for _, f := range frags {
		fmt.Fprintf(h, "fragment %s %d\n", f.Name, len(f.Text))
		h.Write(f.Text)
		// Only a version that leaves a setting out hashes more, so every
		// key of a kernel that is asked for everything stays as it was.
		for _, g := range f.Left {
			fmt.Fprintf(h, "not asked %s\n", g.Origin)
		}
	}
	for _, p := range patches {
		fmt.Fprintf(h, "patch %s %d\n", p.Name, len(p.Text))
		h.Write(p.Text)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Kernel is a built kernel, as recorded in its cache entry's manifest.
type Kernel struct {
	Arch          arch.Name `json:"arch"`
	Key           string    `json:"key"`
	SourceDir     string    `json:"source_dir"`
	SourceVersion string    `json:"source_version"`
	// Release is the kernel's uname -r.
	Release string `json:"release"`
	// Image is what QEMU boots; Vmlinux has the symbols and DWARF.
	Image       string   `json:"image"`
	ImageSHA256 string   `json:"image_sha256"`
	Vmlinux     string   `json:"vmlinux"`
	VmlinuxSize int64    `json:"vmlinux_size"`
	BuildDir    string   `json:"build_dir"`
	Fragments   []string `json:"fragments"`
	// NotAsked lists the fragments' settings gated on a later kernel
	// version than this one (kconfigs/versions), each with its reason.
	NotAsked []string `json:"not_asked,omitempty"`
	// ConfigSHA256 is the hash of the final .config.
	ConfigSHA256 string `json:"config_sha256"`
	// Verified holds every requested symbol with its verified final value.
	Verified map[string]string `json:"verified"`
	// Observed holds the final value of every ftrace, preemption, BPF JIT and
	// compiler symbol, requested or not, so a reader can tell which variant
	// really ran (e.g. CALL_OPS off on x86, RVC on riscv).
	Observed map[string]string `json:"observed,omitempty"`
	// Modules maps each in-tree module built (CONFIG_MODULES=y) by name,
	// e.g. "ftrace-direct", to its .ko.
	Modules   map[string]string `json:"modules,omitempty"`
	Toolchain string            `json:"toolchain"`
	// Compiler is the --toolchain choice it was built with, host resolved
	// ("gcc-12", "clang-19", "gcc-14" ...); empty in older manifests.
	Compiler  string    `json:"compiler,omitempty"`
	BuiltAt   time.Time `json:"built_at"`
	BuildTime float64   `json:"build_seconds"`
	// BuildSteps counts the kbuild lines (CC, LD ...) each make target
	// printed, so that the next build of the arch can show a percentage.
	BuildSteps map[string]int `json:"build_steps,omitempty"`
	// Patches names the patches a patched build applied, in order; BaseKey
	// is the unpatched kernel it was built from, PatchDir holds the patched
	// copies of PatchedFiles (relative to the tree).
	Patches      []string `json:"patches,omitempty"`
	BaseKey      string   `json:"base_key,omitempty"`
	PatchDir     string   `json:"patch_dir,omitempty"`
	PatchedFiles []string `json:"patched_files,omitempty"`

	// Cached is true when this build was found in the cache.
	Cached bool `json:"-"`
}

// manifestName is written last, by rename, so its presence means the entry
// is complete; a build killed half way leaves no manifest.
const manifestName = "manifest.json"

func loadManifest(entry string) (Kernel, error) {
	b, err := os.ReadFile(filepath.Join(entry, manifestName))
	if err != nil {
		return Kernel{}, err
	}
	var k Kernel
	if err := json.Unmarshal(b, &k); err != nil {
		return Kernel{}, fmt.Errorf("%w: %s: manifest: %v", ErrCorruptCache, entry, err)
	}
	sum, err := fileSHA256(k.Image)
	if err != nil {
		return Kernel{}, fmt.Errorf("%w: %s: %v", ErrCorruptCache, entry, err)
	}
	if sum != k.ImageSHA256 {
		return Kernel{}, fmt.Errorf("%w: %s: %s changed since it was built", ErrCorruptCache, entry, k.Image)
	}
	if st, err := os.Stat(k.Vmlinux); err != nil || st.Size() != k.VmlinuxSize {
		return Kernel{}, fmt.Errorf("%w: %s: vmlinux missing or truncated", ErrCorruptCache, entry)
	}
	return k, nil
}

func writeManifest(entry string, k Kernel) error {
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(entry, manifestName), b)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// previousSteps returns the step counts of the newest unpatched build of
// arch in the cache that recorded them, or nil. A patched build's counts
// are of the few files its patches touch, and would put a full build at
// "100%" within a minute. It reads manifests without checking their
// entries: a wrong count costs only a wrong percentage.
func previousSteps(cacheDir string, a arch.Name) map[string]int {
	paths, _ := filepath.Glob(filepath.Join(cacheDir, "kernels", string(a)+"-*", manifestName))
	var newest Kernel
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var k Kernel
		if json.Unmarshal(b, &k) != nil || k.Arch != a || len(k.BuildSteps) == 0 || len(k.Patches) > 0 {
			continue
		}
		if k.BuiltAt.After(newest.BuiltAt) {
			newest = k
		}
	}
	return newest.BuildSteps
}

// recordArtifacts fills in the hash of the built image and the size of
// vmlinux, which loadManifest checks to find the entry intact.
func (k *Kernel) recordArtifacts() error {
	var err error
	if k.ImageSHA256, err = fileSHA256(k.Image); err != nil {
		return fmt.Errorf("built image: %w", err)
	}
	st, err := os.Stat(k.Vmlinux)
	if err != nil {
		return fmt.Errorf("built vmlinux: %w", err)
	}
	k.VmlinuxSize = st.Size()
	return nil
}
