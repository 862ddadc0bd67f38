package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
)

// requireAll skips arches that do not fit CI's budget unless FTH_E2E_ALL is
// set (make test-all sets it).
func requireAll(t *testing.T) {
	t.Helper()
	if os.Getenv("FTH_E2E_ALL") == "" {
		t.Skip("runs under make test-all (FTH_E2E_ALL=1): too slow for CI's budget")
	}
}

// archPass checks the common shape of a passing storm and the symbols that
// tell the variant apart.
func archPass(t *testing.T, r fthRun, min int, want map[string]string) results.Result {
	t.Helper()
	r.mustCell(t)
	res := r.result
	if r.exit != 0 || res.Verdict != results.Pass {
		t.Fatalf("exit %d, verdict %s (%s), want a pass", r.exit, res.Verdict, res.Reason)
	}
	if a := res.Phases["attach"]; a == nil || a.Succeeded < min {
		t.Fatalf("attach phase = %+v, want ≥ %d attached", a, min)
	}
	if res.PreemptModel != "full" {
		t.Errorf("preempt model = %q, want full", res.PreemptModel)
	}
	for sym, v := range want {
		got := res.Kernel.Verified[sym]
		if got == "" {
			got = res.Kernel.Observed[sym]
		}
		if got != v {
			t.Errorf("%s = %q, want %q", sym, got, v)
		}
	}
	if res.Kernel.Toolchain == "" {
		t.Error("result.json does not record the toolchain")
	}
	t.Logf("boot to agent %.1fs, attach p50 %s p99 %s, cell %.0fs", res.Timings.BootToAgentSeconds,
		res.Phases["attach"].Latency.Median, res.Phases["attach"].Latency.P99, res.Timings.TotalSeconds)
	return res
}

// riscv64: CALL_OPS and direct calls with RVC kept on (LLVM build), 2,000
// trampolines under preempt=full.
func TestRISCV64CallOpsPasses(t *testing.T) {
	r := runFthArch(t, "riscv64", 60*time.Minute, "--n", "2000")
	res := archPass(t, r, 2000, map[string]string{
		"CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS":     "y",
		"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y",
		"CONFIG_RISCV_ISA_C":                      "y",
		"CONFIG_CC_IS_CLANG":                      "y",
	})
	if !strings.Contains(res.Kernel.Toolchain, "clang") {
		t.Errorf("toolchain = %q, want clang", res.Kernel.Toolchain)
	}
}

// arm64 with CALL_OPS on and off, 2,000 trampolines each.
func TestARM64CallOpsOnAndOff(t *testing.T) {
	requireAll(t)
	for _, v := range []struct{ frag, callOps string }{{"ftrace/call-ops", "y"}, {"ftrace/no-call-ops", "n"}} {
		t.Run(v.frag, func(t *testing.T) {
			r := runFthArch(t, "arm64", 60*time.Minute, "--n", "2000", "--fragments", "base,arch/arm64,"+v.frag+",preempt/full")
			archPass(t, r, 2000, map[string]string{
				"CONFIG_DYNAMIC_FTRACE_WITH_CALL_OPS":     v.callOps,
				"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y",
			})
		})
	}
}

// ppc64le with direct calls, 1,000 trampolines.
func TestPPC64LEDirectCallsPasses(t *testing.T) {
	requireAll(t)
	r := runFthArch(t, "ppc64le", 60*time.Minute, "--n", "1000", "--fragments", "base,arch/ppc64le,ftrace/direct-calls,preempt/full")
	archPass(t, r, 1000, map[string]string{"CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS": "y"})
}
