package inventory

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/stress/ksyms"
)

// Available is what available_filter_functions lists.
type Available struct {
	// Entries counts every line, module functions included.
	Entries int
	// Vmlinux counts how often each built-in function name appears. A count
	// above one is a static name defined in several files: ftrace lists
	// each, and a name cannot say which one to attach to.
	Vmlinux map[string]int
	// Modules counts each module function name, per module.
	Modules map[string]map[string]int
}

// ParseAvailable reads available_filter_functions. It accepts the classic
// "func" and "func [module]" lines and, for available_filter_functions_addrs
// and possible future formats, a leading hexadecimal address. Module functions
// are counted in Entries and kept per module in Modules.
func ParseAvailable(r io.Reader) (Available, error) {
	a := Available{Vmlinux: make(map[string]int), Modules: map[string]map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) >= 2 && isHexAddr(f[0]) && !strings.HasPrefix(f[1], "[") {
			f = f[1:]
		}
		a.Entries++
		if len(f) >= 2 && strings.HasPrefix(f[1], "[") {
			mod := strings.Trim(f[1], "[]")
			if a.Modules[mod] == nil {
				a.Modules[mod] = map[string]int{}
			}
			a.Modules[mod][f[0]]++
			continue
		}
		a.Vmlinux[f[0]]++
	}
	if err := sc.Err(); err != nil {
		return a, fmt.Errorf("inventory.ParseAvailable: %w", err)
	}
	return a, nil
}

func isHexAddr(s string) bool {
	s = strings.TrimPrefix(s, "0x")
	if len(s) < 8 {
		// Function names can be short hex-looking words ("add", "dec");
		// addresses are printed with at least 8 digits.
		return false
	}
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// ParseKallsyms counts built-in symbol names in /proc/kallsyms ("addr type
// name [module]"). The kernel resolves an fentry target with
// kallsyms_lookup_name, which takes the first symbol of that name, so a name
// that kallsyms has twice may resolve to a copy ftrace cannot patch even when
// available_filter_functions lists it once.
func ParseKallsyms(r io.Reader) (map[string]int, error) {
	counts := make(map[string]int)
	// The built-in symbols come before the modules' and BPF's: what is
	// after the first BPF image (tens of thousands with a storm live,
	// each one a walk of the kernel's BPF symbol list) is not read.
	err := ksyms.EachBeforeBPF(r, func(s ksyms.Sym) {
		if s.Module == "" {
			counts[s.Name]++
		}
	})
	if err != nil {
		return nil, fmt.Errorf("inventory.ParseKallsyms: %w", err)
	}
	return counts, nil
}
