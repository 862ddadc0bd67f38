package known

import (
	"slices"
	"testing"
)

func TestTriggered(t *testing.T) {
	for _, tt := range []struct {
		phase, target, version string
		want                   string
	}{
		{"attach", "rcu_read_unlock_special", "7.3.4", "rcu-read-unlock-special-fentry"},
		{"attach_fentry", "rcu_read_unlock_special", "", "rcu-read-unlock-special-fentry"},
		{"module_load", "ftrace_direct_multi_modify", "7.3.4", "ftrace-direct-modify-unload-hang"},
		{"module_unload", "ftrace_direct_modify", "7.3.4", "ftrace-direct-modify-unload-hang"},
		{"attach", "rcu_read_unlock_special", "6.12.1", ""}, // not seen there: a new finding
		{"module_load", "rcu_read_unlock_special", "7.3.4", ""},
		{"attach", "vfs_read", "7.3.4", ""},
	} {
		f, ok := Triggered(tt.phase, tt.target, tt.version)
		if got := map[bool]string{true: f.ID}[ok]; got != tt.want {
			t.Errorf("Triggered(%s, %s, %s) = %q, want %q", tt.phase, tt.target, tt.version, got, tt.want)
		}
	}
}

// Every entry names a trigger to avoid, a reproduction, and the test that
// runs it.
func TestEntriesComplete(t *testing.T) {
	ids := map[string]bool{}
	for _, f := range All() {
		if f.ID == "" || ids[f.ID] || f.Title == "" || len(f.Kernels) == 0 || len(f.Funcs)+len(f.Modules)+len(f.DeliverUsers)+len(f.DeliverChanges) == 0 || len(f.Repro) == 0 || f.Test == "" {
			t.Errorf("incomplete or duplicate entry %+v", f)
		}
		ids[f.ID] = true
	}
}

// The delivery-oracle users left out by default each lead back to their
// finding.
func TestByDeliverUser(t *testing.T) {
	for _, u := range DeliverUsers() {
		if f, ok := ByDeliverUser(u); !ok || !slices.Contains(f.DeliverUsers, u) {
			t.Errorf("ByDeliverUser(%q) = %+v, %v", u, f, ok)
		}
	}
	if _, ok := ByDeliverUser("ops"); ok {
		t.Error("ops names a known finding")
	}
}
