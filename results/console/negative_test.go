package console

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// debugMarkers are the boot lines by which a log shows that a debug
// detector was on in its kernel: each is printed once at boot by the
// detector itself (7.3.4: kernel/locking/lockdep.c lockdep_info(),
// mm/kasan/generic.c, kernel/trace/trace.c run_tracer_selftest(), whose
// PASSED may come lines later: it is a pr_cont). A failing self-test
// WARNs, which is a finding, so a clean log with the line passed it.
var debugMarkers = []struct{ variant, marker string }{
	{"lockdep", "Lock dependency validator: "},
	{"kasan", "KernelAddressSanitizer initialized"},
	{"selftest", "Testing tracer function: "},
}

// negativeArches need a clean log from a kernel with each debug detector
// on; noDebugCleanLog excuses one arch/detector, with the reason, for as
// long as no clean log of it can exist.
var (
	negativeArches  = []string{"x86_64", "arm64", "riscv64", "powerpc"}
	noDebugCleanLog = map[string]string{
		"powerpc/lockdep": "every ppc64le 7.3.4 boot with lockdep reports DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context()) from the soft-interrupt replay at 0.03 s, a kernel finding (README, Findings 6: 10 of 10 boots), and lockdep is off from then on",
	}
)

// constructed are the corpus files that are not one verbatim log
// (testdata/SOURCES.md): they cannot show what a kernel printed.
var constructed = map[string]bool{
	"x86_64/clean-boot-benign-noise": true,
}

// TestNegativeSet checks the negative set: for every arch, clean logs
// (no finding: TestCorpus asserts that) of kernels with lockdep, KASAN and
// the ftrace startup self-tests on. A detector that is on prints its own
// warnings into every boot, and those lines must not be findings. Which
// detectors a log had is read from the log, not from its name.
func TestNegativeSet(t *testing.T) {
	have := map[string]map[string][]string{}
	for _, path := range corpusFiles(t) {
		c, err := readCase(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.want) > 0 {
			continue
		}
		arch := filepath.Base(filepath.Dir(path))
		if constructed[arch+"/"+filepath.Base(path)] {
			continue
		}
		for _, m := range debugMarkers {
			if bytes.Contains(c.log, []byte(m.marker)) {
				if have[arch] == nil {
					have[arch] = map[string][]string{}
				}
				have[arch][m.variant] = append(have[arch][m.variant], filepath.Base(path))
			}
		}
	}
	for _, arch := range negativeArches {
		for _, m := range debugMarkers {
			logs := have[arch][m.variant]
			why, excused := noDebugCleanLog[arch+"/"+m.variant]
			switch {
			case len(logs) == 0 && !excused:
				script := arch
				if arch == "powerpc" {
					script = "ppc64le"
				}
				t.Errorf("%s: no clean log of a kernel with %s (scripts/capture-reports.sh %s)", arch, m.variant, script)
			case len(logs) > 0 && excused:
				t.Errorf("%s has a clean %s log now (%s): drop %s/%s from noDebugCleanLog", arch, m.variant, strings.Join(logs, ", "), arch, m.variant)
			case excused:
				t.Logf("%-8s %-8s excused: %s", arch, m.variant, why)
			default:
				t.Logf("%-8s %-8s %s", arch, m.variant, strings.Join(logs, ", "))
			}
		}
	}
}
