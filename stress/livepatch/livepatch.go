// Package livepatch applies and removes a livepatch module the way an
// administrator does (Documentation/livepatch/livepatch.rst): loading the
// module enables its patch, and the per-task transition runs until
// /sys/kernel/livepatch/<patch>/transition reads 0; writing 0 to enabled
// starts the transition back, after which the kernel frees the patch
// (its directory goes) and the module can be unloaded.
package livepatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
)

// DefaultDir is the kernel's livepatch sysfs directory.
const DefaultDir = "/sys/kernel/livepatch"

// Patch is one livepatch module.
type Patch struct {
	// Dir is the livepatch sysfs directory (DefaultDir).
	Dir string
	// Name is the patch's name: its module's name.
	Name string
	// Load loads the module (enabling the patch) and Unload removes it.
	Load   func() error
	Unload func() error
	// Timeout bounds each transition; Poll is how often it is read.
	Timeout, Poll time.Duration
}

// Supported says why the kernel cannot apply a livepatch, or "" if it can.
func Supported(dir string) string {
	if _, err := os.Stat(dir); err != nil {
		return fmt.Sprintf("no %s: the kernel has no CONFIG_LIVEPATCH", dir)
	}
	return ""
}

func (p Patch) file(name string) string { return filepath.Join(p.Dir, p.Name, name) }

func (p Patch) read(name string) (string, error) {
	b, err := os.ReadFile(p.file(name))
	return strings.TrimSpace(string(b)), err
}

// wait polls until done says so, for at most p.Timeout.
func (p Patch) wait(ctx context.Context, what string, done func() (bool, error)) error {
	poll := p.Poll
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	deadline := time.Now().Add(p.Timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("livepatch %s: %s not done after %s", p.Name, what, p.Timeout)
		}
		if !ctxsleep.Sleep(ctx, poll) {
			return fmt.Errorf("livepatch %s: %s: %w", p.Name, what, ctx.Err())
		}
	}
}

// settled reports that no transition is in flight and the patch's enabled
// file reads want.
func (p Patch) settled(want string) func() (bool, error) {
	return func() (bool, error) {
		tr, err := p.read("transition")
		if err != nil {
			return false, err
		}
		en, err := p.read("enabled")
		return tr == "0" && en == want, err
	}
}

// Enable loads the module and waits for its transition to complete: then
// every task runs the patched function. A transition that does not
// complete in time is reversed, the module unloaded, and an error
// returned.
func (p Patch) Enable(ctx context.Context) error {
	if err := p.Load(); err != nil {
		return fmt.Errorf("livepatch %s: load: %w", p.Name, err)
	}
	err := p.wait(ctx, "patching transition", p.settled("1"))
	if err == nil {
		return nil
	}
	if derr := p.Disable(context.WithoutCancel(ctx)); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}

// Disable unpatches and waits for the transition back and the patch's
// release, then unloads the module.
func (p Patch) Disable(ctx context.Context) error {
	if err := os.WriteFile(p.file("enabled"), []byte("0"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("livepatch %s: disable: %w", p.Name, err)
	}
	gone := func() (bool, error) {
		_, err := os.Stat(filepath.Join(p.Dir, p.Name))
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		return false, err
	}
	if err := p.wait(ctx, "unpatching transition", gone); err != nil {
		return err
	}
	if err := p.Unload(); err != nil {
		return fmt.Errorf("livepatch %s: unload: %w", p.Name, err)
	}
	return nil
}
