package churnrun

import (
	"slices"
	"strings"
	"testing"

	"github.com/ftrace-harness/fth/wire/event"
)

func TestHotSyscalls(t *testing.T) {
	with := HotSyscalls(true)
	if slices.Contains(with, "getppid") || !slices.Contains(with, "getpid") || !slices.Contains(with, "read") {
		t.Errorf("HotSyscalls(exact) = %v", with)
	}
	if !slices.Contains(HotSyscalls(false), "getppid") {
		t.Error("getppid left out without the exact-count oracle")
	}
}

func TestVerdict(t *testing.T) {
	var v verdict
	if r := v.result().Reasons(); len(r) != 0 {
		t.Errorf("clean churn reasons = %q", r)
	}
	for i := range 7 {
		v.oracleFail(event.Oracle{Name: event.OracleExact, Function: "__x64_sys_getppid", Expected: 1000, Got: uint64(999 - i)})
	}
	v.oracleFail(event.Oracle{Name: event.OracleFuncIP, Function: "vfs_read", Msg: "fentry: 1 of 9 hits saw bpf_get_func_ip 0x4, want 0x0"})
	v.other("churn: no fentry attached in 3 tries")
	reason := strings.Join(v.result().Reasons(), "; ")
	for _, want := range []string{
		"8 oracle failure(s): exact-count __x64_sys_getppid: expected 1000, got 999",
		"; and 3 more",
		"; churn: no fentry attached in 3 tries",
	} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q, want it to contain %q", reason, want)
		}
	}
	if strings.Contains(reason, "vfs_read") {
		t.Errorf("reason lists more than %d failures: %s", maxReasons, reason)
	}
}

// Beside fth_scale.ko the module's functions are most of the candidates,
// yet never called: the anchor is one of vmlinux's all the same.
func TestModAnchorSkipsScaleFunctions(t *testing.T) {
	cands := []string{"fth_scale_0000", "fth_scale_0001", "fth_scale_0002", "vfs_read", "fth_scale_0003", "ksys_write"}
	for seed := int64(0); seed < 50; seed++ {
		got := modAnchor(cands, []string{"ksys_write"}, "", seed)
		if got != "vfs_read" {
			t.Fatalf("seed %d: anchor %q, want vfs_read (the only free vmlinux function)", seed, got)
		}
	}
}
