package attach

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// fdSlack is room for everything that is not a program or link: the event
// channel, /proc files, the Go runtime.
const fdSlack = 256

// PrepareLimits raises the limits that thousands of BPF objects run into. A
// process started by init inherits RLIMIT_NOFILE 1024/4096, and each program
// and each link is a file descriptor: with n functions the agent holds about n
// at once (a program is closed when its link exists). The hard limit is
// raised too, which needs CAP_SYS_RESOURCE, up to fs.nr_open. On kernels
// without memcg accounting of BPF memory, RLIMIT_MEMLOCK is lifted as well.
// Failures are returned for logging; the run goes on and EMFILE or EPERM
// failures then show up in the phases.
func PrepareLimits(n int) error {
	var errs []string
	if err := rlimit.RemoveMemlock(); err != nil {
		errs = append(errs, fmt.Sprintf("memlock: %v", err))
	}
	if err := raiseNoFile(uint64(n) + fdSlack); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("attach.PrepareLimits: %s", strings.Join(errs, "; "))
	}
	return nil
}

func raiseNoFile(need uint64) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit NOFILE: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		max := need
		if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
			if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && v < max {
				max = v
			}
		}
		lim.Max = max
	}
	lim.Cur = min(need, lim.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("setrlimit NOFILE to %d/%d: %w", lim.Cur, lim.Max, err)
	}
	if lim.Cur < need {
		return fmt.Errorf("NOFILE capped at %d by fs.nr_open, %d wanted", lim.Cur, need)
	}
	return nil
}
