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
// on; noDebugCleanLog excuses an arch, with the reason, until one lands.
var (
	negativeArches  = []string{"x86_64", "arm64", "riscv64", "powerpc"}
	noDebugCleanLog = map[string]string{
		"powerpc": "no ppc64le debug kernel has been booted: Debian 12's compilers give ppc64le no trampolines (issue 13)",
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
		why, excused := noDebugCleanLog[arch]
		var missing []string
		for _, m := range debugMarkers {
			if len(have[arch][m.variant]) == 0 {
				missing = append(missing, m.variant)
			} else {
				t.Logf("%-8s %-8s %s", arch, m.variant, strings.Join(have[arch][m.variant], ", "))
			}
		}
		switch {
		case len(missing) > 0 && !excused:
			t.Errorf("%s: no clean log of a kernel with %s (scripts/capture-reports.sh %s)", arch, strings.Join(missing, ", "), arch)
		case len(missing) == 0 && excused:
			t.Errorf("%s has a debug clean log of each kind now: drop it from noDebugCleanLog", arch)
		case excused:
			t.Logf("%-8s excused: %s", arch, why)
		}
	}
}
