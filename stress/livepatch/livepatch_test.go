package livepatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeKernel plays the kernel's side of a patch's sysfs directory: a load
// creates it mid-transition, the transition ends after a delay, and
// writing 0 to enabled makes it go after another.
type fakeKernel struct {
	dir    string
	delay  time.Duration
	stuck  bool // the patching transition never completes
	loaded bool
}

func (k *fakeKernel) load() error {
	d := filepath.Join(k.dir, "fth_klp")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	_ = os.WriteFile(filepath.Join(d, "enabled"), []byte("1\n"), 0o644)
	_ = os.WriteFile(filepath.Join(d, "transition"), []byte("1\n"), 0o644)
	k.loaded = true
	if !k.stuck {
		time.AfterFunc(k.delay, func() { _ = os.WriteFile(filepath.Join(d, "transition"), []byte("0\n"), 0o644) })
	}
	go func() {
		for {
			b, err := os.ReadFile(filepath.Join(d, "enabled"))
			if err != nil {
				return
			}
			if strings.TrimSpace(string(b)) == "0" {
				time.Sleep(k.delay)
				_ = os.RemoveAll(d)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return nil
}

func (k *fakeKernel) unload() error {
	if _, err := os.Stat(filepath.Join(k.dir, "fth_klp")); err == nil {
		return errors.New("busy: the patch is still there")
	}
	k.loaded = false
	return nil
}

func TestEnableDisable(t *testing.T) {
	for _, tt := range []struct {
		name       string
		stuck      bool
		wantEnable string // error substring, "" for none
	}{
		{"transition completes", false, ""},
		{"transition stuck: reversed and unloaded", true, "patching transition not done after"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := &fakeKernel{dir: t.TempDir(), delay: 30 * time.Millisecond, stuck: tt.stuck}
			p := Patch{Dir: k.dir, Name: "fth_klp", Load: k.load, Unload: k.unload, Timeout: 300 * time.Millisecond, Poll: 5 * time.Millisecond}
			err := p.Enable(context.Background())
			if tt.wantEnable == "" {
				if err != nil {
					t.Fatalf("Enable: %v", err)
				}
				if got, _ := p.read("transition"); got != "0" {
					t.Errorf("Enable returned with transition %q", got)
				}
				if err := p.Disable(context.Background()); err != nil {
					t.Fatalf("Disable: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantEnable) {
				t.Fatalf("Enable = %v, want an error with %q", err, tt.wantEnable)
			}
			if k.loaded {
				t.Error("module left loaded")
			}
		})
	}
}

func TestDisableTimesOut(t *testing.T) {
	k := &fakeKernel{dir: t.TempDir(), delay: time.Hour}
	p := Patch{Dir: k.dir, Name: "fth_klp", Load: k.load, Unload: k.unload, Timeout: 50 * time.Millisecond, Poll: 5 * time.Millisecond}
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	if err := p.Disable(context.Background()); err == nil || !strings.Contains(err.Error(), "unpatching transition not done") {
		t.Errorf("Disable = %v, want the unpatching transition's timeout", err)
	}
	if !k.loaded {
		t.Error("module unloaded while its patch was still there")
	}
}

func TestSupported(t *testing.T) {
	if why := Supported(t.TempDir()); why != "" {
		t.Errorf("Supported(existing) = %q", why)
	}
	if why := Supported(filepath.Join(t.TempDir(), "none")); !strings.Contains(why, "CONFIG_LIVEPATCH") {
		t.Errorf("Supported(missing) = %q", why)
	}
}
