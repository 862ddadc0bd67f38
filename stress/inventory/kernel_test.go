package inventory

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
)

// TestRealBTF runs the filter over the running kernel's BTF, using kallsyms
// text symbols as a stand-in for available_filter_functions (which needs
// tracefs mounted). It only reads; it is gated because parsing vmlinux BTF
// takes a while: set FTH_READ_KERNEL=1.
func TestRealBTF(t *testing.T) {
	if os.Getenv("FTH_READ_KERNEL") != "1" {
		t.Skip("set FTH_READ_KERNEL=1 to read the running kernel's BTF")
	}
	cache := btf.NewCache()
	t0 := time.Now()
	spec, err := cache.Kernel()
	if err != nil {
		t.Skip("no kernel BTF:", err)
	}
	parse := time.Since(t0)
	if again, _ := cache.Kernel(); again != spec {
		t.Error("btf.Cache returned a different spec on the second call")
	}

	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Skip(err)
	}
	var avail strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[1] == "T" || f[1] == "t") {
			avail.WriteString(f[2] + "\n")
		}
	}
	a, err := ParseAvailable(strings.NewReader(avail.String()))
	if err != nil {
		t.Fatal(err)
	}
	ks, _ := ParseKallsyms(strings.NewReader(string(b)))
	t0 = time.Now()
	res, err := Compute(Input{Available: a, BTF: SpecSource{spec}, Kallsyms: ks, Filter: Filter{MaxArgs: 6, Deny: DefaultDeny}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BTF parse %v, filter %v: %d names, %d with BTF, %d candidates, rejected %v",
		parse, time.Since(t0), res.Traceable, res.WithBTF, len(res.Candidates), res.Rejected)
	if len(res.Candidates) == 0 {
		t.Error("no candidates in a kernel with BTF")
	}
}
