// Package modload loads and unloads kernel modules from files, as the agent
// does in a loop: every load runs ftrace_module_init/ftrace_module_enable,
// which patch the module's callsites for tracers already filtering them,
// and every unload releases them while other CPUs may be running through
// them. The Cycler keeps one module of a set loaded at a time, chosen by a
// seeded random stream.
package modload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/tally"
)

// DefaultDir is where the harness puts the modules in the initramfs.
const DefaultDir = "/lib/modules/fth"

// Transition names recorded in a tally.Recorder, with the module name as
// the function.
const (
	OpLoad   = "module_load"
	OpUnload = "module_unload"
)

// Name is the kernel's name of the module in file path: the base name
// without .ko, with dashes as underscores (what lsmod shows and
// delete_module wants).
func Name(path string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(path), ".ko"), "-", "_")
}

// List returns the .ko files in dir, sorted; none (and no error) when dir
// does not exist.
func List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".ko") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Load loads the module file path with params ("name=value ...").
func Load(path, params string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), params, 0); err != nil {
		return fmt.Errorf("finit_module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// Unload removes module name. It does not wait for users to go: a busy
// module fails with EWOULDBLOCK (or EBUSY), which Unload returns as is.
func Unload(name string) error {
	if err := unix.DeleteModule(name, unix.O_NONBLOCK); err != nil {
		return fmt.Errorf("delete_module %s: %w", name, err)
	}
	return nil
}

// Loaded reports whether module name is loaded.
func Loaded(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/module", name, "initstate"))
	return err == nil
}

// Cycler loads one module of Paths at a time, holds it, and unloads it,
// until its context ends.
type Cycler struct {
	// Paths are the module files to cycle.
	Paths []string
	// Hold is the longest a module stays loaded; each hold is drawn from
	// [Hold/4, Hold].
	Hold time.Duration
	// Rec times every load and unload.
	Rec *tally.Recorder
	// Params are module parameters by module name.
	Params map[string]string
	// OnLoad, if set, is called after each successful load (to log where
	// the module's text landed: a CPU later found executing there after the
	// unload points at a trampoline used after free).
	OnLoad func(name string)
	// unloadTries bounds the retries of a busy unload.
	unloadTries int
}

// TextAddr returns the load address of module name's .text section, from
// /sys/module/<name>/sections/.text ("" if unreadable).
func TextAddr(name string) string {
	b, err := os.ReadFile(filepath.Join("/sys/module", name, "sections", ".text"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Run cycles until ctx is done and leaves no module of Paths loaded; the
// error reports a module it could not unload. Refused loads (a sample whose
// function already has a direct caller gives EBUSY) are data in Rec.
func (c *Cycler) Run(ctx context.Context, rng *rand.Rand) error {
	if len(c.Paths) == 0 {
		return nil
	}
	if c.Hold <= 0 {
		c.Hold = 2 * time.Second
	}
	for ctx.Err() == nil {
		p := c.Paths[rng.IntN(len(c.Paths))]
		name := Name(p)
		if err := c.Rec.Time(OpLoad, name, func() error { return Load(p, c.Params[name]) }); err != nil {
			ctxsleep.Sleep(ctx, 100*time.Millisecond)
			continue
		}
		if c.OnLoad != nil {
			c.OnLoad(name)
		}
		hold := c.Hold/4 + time.Duration(rng.Int64N(int64(c.Hold-c.Hold/4)+1))
		ctxsleep.Sleep(ctx, hold)
		if err := c.unload(name); err != nil {
			return err
		}
	}
	return nil
}

// unload unloads name, retrying while it is busy.
func (c *Cycler) unload(name string) error {
	return UnloadRetry(c.Rec, name, c.unloadTries)
}

// UnloadRetry unloads name, timing each try in rec, and retries every
// 100 ms while it is busy: a module whose function is being traced holds
// references until the tracer lets go. tries 0 means 50 (5 s).
func UnloadRetry(rec *tally.Recorder, name string, tries int) error {
	if tries == 0 {
		tries = 50
	}
	var err error
	for range tries {
		err = rec.Time(OpUnload, name, func() error { return Unload(name) })
		if err == nil || !(errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EBUSY)) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("modload: %s still busy after %d unload tries: %w", name, tries, err)
}

// LogLoaded records in w where module name's text was loaded: the address
// a hung or crashed CPU is found at (registers.txt, an oops RIP) can then
// be matched to a module that was already unloaded.
func LogLoaded(w *emit.Writer, name string) {
	emit.Logf(w, "module %s loaded, .text at %s", name, TextAddr(name))
}
