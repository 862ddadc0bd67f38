package bench

import "testing"

// parseKB reads the fields kernelFree needs from the kernel's own text
// (lines of an x86_64 7.3.4 guest's /proc/meminfo and /proc/self/status).
func TestParseKB(t *testing.T) {
	const meminfo = "MemTotal:        1004532 kB\nMemFree:          688812 kB\nMemAvailable:     772364 kB\nBuffers:               0 kB\n"
	const status = "Name:\tagent\nVmPeak:\t 1253368 kB\nVmRSS:\t   41236 kB\nRssAnon:\t   23140 kB\nThreads:\t12\n"
	for _, tc := range []struct {
		text, field string
		want        int64
	}{
		{meminfo, "MemAvailable:", 772364},
		{meminfo, "MemFree:", 688812},
		{status, "VmRSS:", 41236},
		{status, "Threads:", -1}, // not a kB line
		{status, "VmSwap:", -1},  // absent
		{"MemAvailable: lots kB\n", "MemAvailable:", -1},
	} {
		if got := parseKB(tc.text, tc.field); got != tc.want {
			t.Errorf("parseKB(%q) = %d, want %d", tc.field, got, tc.want)
		}
	}
}
