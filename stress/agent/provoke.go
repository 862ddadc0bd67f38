package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/wire/options"
)

// Kernel files of crash=lkdtm:<TYPE> and crash=bug:<name>.
const (
	lkdtmPath       = "/sys/kernel/debug/provoke-crash/DIRECT"
	bugPath         = "/sys/kernel/debug/fth_target/bug"
	kmemleakPath    = "/sys/kernel/debug/kmemleak"
	kmemleakVerbose = "/sys/module/kmemleak/parameters/verbose"
)

// provokeWait bounds the wait for a provoking write. A fatal report kills
// the writing thread inside the kernel, so its write never returns; the
// agent goes on talking to the host, which ends the cell on the report.
const provokeWait = 20 * time.Second

// kmemleakScanWait bounds a kmemleak scan, which walks all of memory: 20 s
// was not enough under TCG with KASAN and lockdep (x86_64, 7.3.4).
const kmemleakScanWait = 5 * time.Minute

// kmemleakScans bounds the scans asked for until kmemleak lists a leak.
const kmemleakScans = 3

// kmemleakAge outlasts kmemleak's minimum object age (5 s in
// mm/kmemleak.c): a younger object is never reported.
const kmemleakAge = 6 * time.Second

// provoke makes the kernel print one report: an LKDTM crash type, or one of
// fth_target.ko's injected bugs (kconfigs/debug/triage). It returns once
// the kernel has acted, or after provokeWait if the write never returns.
func provoke(modDir, mode string) error {
	if t, ok := strings.CutPrefix(mode, options.CrashLKDTMPrefix); ok {
		if _, err := os.Stat(lkdtmPath); err != nil {
			return fmt.Errorf("%w (the kernel needs CONFIG_LKDTM: kconfigs/debug/triage)", err)
		}
		return writeOrLeave(lkdtmPath, t, provokeWait)
	}
	name, ok := strings.CutPrefix(mode, options.CrashBugPrefix)
	if !ok {
		return fmt.Errorf("not a provoking crash mode: %q", mode)
	}
	if err := fthtarget.Load(modDir, ""); err != nil {
		return fmt.Errorf("load %s, which holds the injected bugs: %w", filepath.Join(modDir, fthtarget.Module+".ko"), err)
	}
	if name == options.BugViaTrampoline {
		return provokeViaTrampoline(name)
	}
	if err := writeOrLeave(bugPath, name, provokeWait); err != nil {
		return err
	}
	if name != options.BugLeak {
		return nil
	}
	// kmemleak prints what a scan finds on the console only when verbose;
	// its scans are otherwise on demand (kconfigs/debug/triage).
	if err := os.WriteFile(kmemleakVerbose, []byte("1"), 0); err != nil {
		return fmt.Errorf("%w (the kernel needs CONFIG_DEBUG_KMEMLEAK)", err)
	}
	time.Sleep(kmemleakAge)
	// A scan greys every object whose contents changed since the scan
	// before (mm/kmemleak.c, update_checksum), and a new object's first
	// checksum is such a change: one scan never reports it. Two captures
	// with a single scan printed nothing.
	for i := 0; i < kmemleakScans; i++ {
		if err := writeOrLeave(kmemleakPath, "scan", kmemleakScanWait); err != nil {
			return err
		}
		if found, err := os.ReadFile(kmemleakPath); err == nil && len(found) > 0 {
			return nil
		}
	}
	return fmt.Errorf("%d kmemleak scans found no leak", kmemleakScans)
}

// errLeftWriting says a provoking write did not return in time.
var errLeftWriting = errors.New("write still blocked")

// writeOrLeave writes val to path from another goroutine and waits at most
// wait for it.
func writeOrLeave(path, val string, wait time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(path, []byte(val), 0) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("write %q to %s: %w", val, path, err)
		}
		return nil
	case <-time.After(wait):
		return fmt.Errorf("%w after %v: %q to %s (the kernel killed or stopped the writer)", errLeftWriting, wait, val, path)
	}
}

// provokeViaTrampoline attaches a BPF fexit program to the bug's function
// and commits the bug under it: fexit makes the trampoline call the
// function, so the function's WARN has the trampoline on its stack.
func provokeViaTrampoline(name string) error {
	loader, err := oracle.NewLoader(1, nil)
	if err != nil {
		return fmt.Errorf("crash=bug:%s: %w", name, err)
	}
	defer loader.Close()
	fn := options.BugViaTrampolineFunc
	ld, err := loader.Load(fn, oracle.FExit, oracle.Key(oracle.FExit, fn))
	if err != nil {
		return fmt.Errorf("crash=bug:%s: load a fexit program on %s: %w", name, fn, err)
	}
	defer ld.Prog.Close()
	fd, errno := attach.LinkCreate(ld.Prog.FD(), oracle.FExit.LinkType())
	if errno != 0 {
		return fmt.Errorf("crash=bug:%s: attach fexit to %s: %w", name, fn, errno)
	}
	defer unix.Close(fd)
	return writeOrLeave(bugPath, name, provokeWait)
}
