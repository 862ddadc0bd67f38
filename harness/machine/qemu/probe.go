package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/internal/proc"
)

// DefaultTCG is the accelerator used when KVM is unusable, on a QEMU older
// than MultiTCGFrom. thread=single is the sound default there: QEMU 7.2's
// thread=multi gave a correct x86_64 kernel spurious int3 oopses under mass
// attach (see docs/tcg.md).
const DefaultTCG = AccelTCGSingle

// MultiTCGFrom is the first QEMU (major*100+minor) whose multi-threaded TCG
// is the default: 11.1 ran the x86_64 storm 5 of 5 clean where 7.2 failed 4
// of 5, and the x86_64 churn, the arm64 and riscv64 storms passed under it,
// with real parallel vCPUs (docs/tcg.md).
const MultiTCGFrom = 1101

// TCGFor is the TCG mode auto picks on QEMU version v (ProbeVersion's
// number), and why.
func TCGFor(v int) (Accel, string) {
	if v >= MultiTCGFrom {
		return AccelTCGMulti, fmt.Sprintf("QEMU %d.%d: multi-threaded TCG, measured sound from 11.1", v/100, v%100)
	}
	return DefaultTCG, ""
}

// ProbeTimeout bounds the KVM probe boot. A working KVM prints the banner in
// well under a second.
const ProbeTimeout = 15 * time.Second

// ProbeResult records whether KVM booted a kernel on this host.
type ProbeResult struct {
	BootID string `json:"boot_id"`
	KVM    bool   `json:"kvm"`
	Reason string `json:"reason"`
}

// ResolveAccel turns AccelAuto into a concrete accelerator. KVM is used only if
// a bounded test boot of kernel under KVM printed its banner; the result is
// cached per host boot in cacheDir, since a host's KVM does not heal mid-boot.
func ResolveAccel(ctx context.Context, log *slog.Logger, want Accel, a arch.Arch, kernel, cacheDir string, qemuVersion int) (Accel, string, error) {
	if want != AccelAuto {
		return want, "requested", nil
	}
	tcg, tcgWhy := TCGFor(qemuVersion)
	withTCG := func(why string) string {
		if tcgWhy == "" {
			return why
		}
		return why + "; " + tcgWhy
	}
	if host, _ := arch.HostName(runtime.GOARCH); host != a.Name || !a.KVMCapable {
		return tcg, withTCG(fmt.Sprintf("KVM cannot run %s guests on a %s host", a.Name, runtime.GOARCH)), nil
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return tcg, withTCG("no /dev/kvm"), nil
	}
	bootID, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	cache := filepath.Join(cacheDir, "kvm-probe.json")
	var pr ProbeResult
	if b, err := os.ReadFile(cache); err == nil && json.Unmarshal(b, &pr) == nil && pr.BootID == strings.TrimSpace(string(bootID)) {
		log.Debug("kvm probe cached", "kvm", pr.KVM, "reason", pr.Reason)
	} else {
		log.Info("probing KVM with a bounded boot", "timeout", ProbeTimeout)
		pr = probeKVM(ctx, a, kernel)
		pr.BootID = strings.TrimSpace(string(bootID))
		if b, err := json.Marshal(pr); err == nil {
			_ = os.MkdirAll(cacheDir, 0o755)
			_ = os.WriteFile(cache, b, 0o644)
		}
	}
	if pr.KVM {
		return AccelKVM, pr.Reason, nil
	}
	return tcg, withTCG(pr.Reason), nil
}

func probeKVM(ctx context.Context, a arch.Arch, kernel string) ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cmd := proc.Command(ctx, time.Second, a.QEMU,
		"-machine", a.Machine, "-accel", "kvm", "-cpu", "host", "-m", "256",
		"-kernel", kernel, "-append", "console="+a.Console+" panic=-1",
		"-display", "none", "-monitor", "none", "-nodefaults", "-no-reboot",
		"-chardev", "stdio,id=con0,signal=off", "-serial", "chardev:con0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return ProbeResult{Reason: err.Error()}
	}
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return ProbeResult{Reason: err.Error()}
	}
	defer func() {
		proc.KillGroup(cmd)
		_ = cmd.Wait()
	}()
	start := time.Now()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "Linux version") {
			return ProbeResult{KVM: true, Reason: fmt.Sprintf("KVM booted a kernel to its banner in %s", time.Since(start).Round(time.Millisecond))}
		}
	}
	if ctx.Err() != nil {
		return ProbeResult{Reason: fmt.Sprintf("KVM printed no kernel banner within %s (it hangs on this host)", ProbeTimeout)}
	}
	return ProbeResult{Reason: fmt.Sprintf("KVM boot failed: %s", strings.TrimSpace(stderr.String()))}
}
