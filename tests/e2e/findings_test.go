package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/options"
)

// knownRepro returns the reproduction of the known finding (results/known)
// that names test as its test, with --include-known: the list drives the
// tests that keep each one reproduced.
func knownRepro(t *testing.T, test string) []string {
	t.Helper()
	for _, f := range known.All() {
		if f.Test == test {
			return append([]string{"--include-known"}, f.Repro...)
		}
	}
	t.Fatalf("no known finding names %s as its test", test)
	return nil
}

// Every known finding has its reproducing test here.
func TestEveryKnownFindingIsReproduced(t *testing.T) {
	src, err := os.ReadFile("findings_test.go")
	if err != nil {
		t.Fatal(err)
	}
	churn, _ := os.ReadFile("churn_test.go")
	for _, f := range known.All() {
		if !strings.Contains(string(src)+string(churn), "func "+f.Test+"(") {
			t.Errorf("known finding %s names %s, which tests/e2e does not define", f.ID, f.Test)
		}
	}
}

// Known findings: kernel bugs this harness found, reproduced by name. Random
// storms and churns avoid their triggers (results/known), so each one is
// kept honest here: when a kernel fixes it, this test fails and says so, and
// the entry can leave the list.
func TestKnownFindingRCUReadUnlockSpecial(t *testing.T) {
	// One fentry on rcu_read_unlock_special: traceable, has BTF, not in the
	// verifier's btf_id_deny (its caller __rcu_read_unlock is). On Linux 7.3.4
	// with PREEMPT_RCU the guest dies within a fraction of a second: mostly
	// with an oops, but about one run in three as an x86 triple fault that
	// prints nothing, which the harness reports as a reset finding.
	r := runFth(t, 15*time.Minute, knownRepro(t, t.Name())...)
	r.mustCell(t)
	res := r.result
	// The trampoline is live as soon as the call site is patched, which is
	// before bpf(BPF_LINK_CREATE) returns: on a loaded host the guest may die
	// inside that syscall, so the attach phase never reports. Either way the
	// crash must belong to this one attach, not to an earlier step.
	attached := res.Phases["attach"] != nil && res.Phases["attach"].Succeeded == 1
	inAttach := res.InFlight != nil && res.InFlight.Phase == "attach" && res.InFlight.Function == "rcu_read_unlock_special"
	if !attached && !inAttach {
		t.Fatalf("attach phase = %+v, in flight = %+v: want the one trampoline attached, or the crash during its attach", res.Phases["attach"], res.InFlight)
	}
	if res.Verdict == results.Pass {
		t.Fatalf("the kernel survived a trampoline on rcu_read_unlock_special: the known finding no longer reproduces on %s; if the kernel fixed it, drop it from results/known and README's Findings", res.Kernel.Release)
	}
	if r.exit != 1 || res.Verdict != results.Fail || len(res.Findings) == 0 {
		t.Fatalf("exit %d, verdict %s (%s), findings %d: want a fail with a kernel report", r.exit, res.Verdict, res.Reason, len(res.Findings))
	}
	t.Logf("reproduced: %s", res.Title())
}

// docs/findings.md 8, by a scripted order of operations: a BPF fexit on
// fth_deliver_other, fth_deliver.ko's IPMODIFY ops taking that function
// into its filter while enabled (no handshake with the trampoline there),
// then a modify of another function's trampoline, which asks the fexit's
// trampoline to share anyway: "WARNING in bpf_tramp_ftrace_ops_func", and
// the second fentry's attach refused (EBUSY); and, silently, every call
// of fth_deliver_other running the original function although the
// IPMODIFY ops redirects it to a replacement (livepatch's way). The
// control gives the ops both functions before it registers, the handshake
// runs, and the same programs attach without a warning or a missed call.
// Two short boots.
func TestKnownFindingIPModifyShareAskedOfAStranger(t *testing.T) {
	t.Run("filter", func(t *testing.T) {
		r := runFth(t, 15*time.Minute, knownRepro(t, "TestKnownFindingIPModifyShareAskedOfAStranger")...)
		r.mustCell(t)
		if r.result.Verdict == results.Pass {
			t.Fatalf("no warning on %s: the known finding no longer reproduces; if the kernel fixed it, drop it from results/known and docs/findings.md", r.result.Kernel.Release)
		}
		if r.exit != 1 || r.result.Title() != "WARNING in bpf_tramp_ftrace_ops_func" {
			t.Fatalf("exit %d, verdict %s, title %q: want WARNING in bpf_tramp_ftrace_ops_func", r.exit, r.result.Verdict, r.result.Title())
		}
		// The silent half: ops-ipmodify redirects fth_deliver_other to a
		// replacement, as livepatch does, and the fexit trampoline there,
		// never told to share, runs the original instead.
		bypassed := false
		for _, o := range r.result.Oracles {
			if !o.OK && strings.Contains(o.Msg, "missed call: ops-ipmodify on fth_deliver_other") {
				bypassed = true
				t.Logf("redirect bypassed: %s", o.Msg)
				break
			}
		}
		if !bypassed {
			t.Errorf("no missed call of ops-ipmodify on fth_deliver_other: oracles %+v", r.result.Oracles)
		}
		t.Logf("reproduced: %s", r.result.Title())
	})
	t.Run("register", func(t *testing.T) {
		r := runFth(t, 15*time.Minute, "--agent-arg", "scenario=repro", "--agent-arg", "repro=ipmodify-register")
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			t.Fatalf("exit %d, verdict %s (%s): the control must pass", r.exit, r.result.Verdict, r.result.Reason)
		}
	})
}

// The unlocked ask met through a livepatch (docs/findings.md 13): the
// trampoline asked mid-update warns; the control, whose trampoline the
// livepatch's registration made sharing, does not. make test-all: two
// more gdbstub hold sequences, and make test keeps to three on x86_64
// (docs/race-injection.md, the QEMU 7.2 gdbstub flake).
func TestKnownFindingIPModifyMidUpdate(t *testing.T) {
	requireAll(t)
	const warn = "WARNING in bpf_tramp_ftrace_ops_func"
	t.Run("stranger", func(t *testing.T) { repro(t, options.ReproIPModifyMidUpdate, warn, "--include-known") })
	t.Run("peer", func(t *testing.T) { repro(t, options.ReproIPModifyMidUpdatePeer, "") })
	// The fix asks only the trampolines being modified.
	t.Run("fixed", func(t *testing.T) {
		repro(t, options.ReproIPModifyMidUpdate, "", "--include-known", "--patch", "results/known/fixes/ftrace-direct-mod-ask-only-modified.patch")
	})
}

// docs/findings.md 14: fth_deliver.ko's direct user, refused by the
// IPMODIFY handshake (ops-ipmodify on its function), was on
// ftrace_ops_list meanwhile; the host holds the attach there (at
// ftrace_update_trampoline, right after the ops is listed) and CPU 1's
// caller where ftrace_regs_caller jumps to the direct trampoline, lets the
// attach be refused, then the caller: it runs the refused user's
// trampoline. The control's second ops is not IPMODIFY (the attach is
// accepted, the same holds); the fix waits in ftrace_startup()'s rollback
// as ftrace_shutdown() does, which ends Findings 12's eagain-free too.
// Four short boots and a patched build: make test-all, as make test keeps
// to three gdbstub hold sequences.
func TestKnownFindingRefusedDirectCalled(t *testing.T) {
	requireAll(t)
	const stray = "misdelivered call: direct called after the kernel refused its attach"
	t.Run("refused", func(t *testing.T) { repro(t, options.ReproRefusedDirect, stray, "--include-known") })
	t.Run("accepted", func(t *testing.T) { repro(t, options.ReproRefusedDirectAccepted, "") })
	t.Run("fixed", func(t *testing.T) {
		repro(t, options.ReproRefusedDirect, "", "--include-known", "--patch", "results/known/fixes/ftrace-startup-refused-after-gp.patch")
	})
	t.Run("fixed-eagain", func(t *testing.T) {
		repro(t, options.ReproEAgainFree, "", "--patch", "results/known/fixes/ftrace-startup-refused-after-gp.patch")
	})
}

// repro runs fth run on x86_64 with a repro sequence and extra flags
// (--kernel, --patch) and wants the fault titled title, or a pass when
// title is "".
func repro(t *testing.T, seq, title string, flags ...string) {
	t.Helper()
	args := append([]string{"--arch", "x86_64"}, flags...)
	r := runFth(t, 60*time.Minute, append(args, "--agent-arg", "scenario=repro", "--agent-arg", "repro="+seq)...)
	r.mustCell(t)
	if title == "" {
		if r.exit != 0 || r.result.Verdict != results.Pass {
			r.logConsoleTail(t, 120)
			t.Fatalf("exit %d, verdict %s (%s): want a pass", r.exit, r.result.Verdict, r.result.Reason)
		}
		return
	}
	if r.result.Verdict == results.Pass {
		t.Fatalf("no fault on %s: the finding no longer reproduces; if the kernel fixed it, say so in docs/findings.md", r.result.Kernel.Release)
	}
	if r.exit != 1 || r.result.Title() != title {
		r.logConsoleTail(t, 120)
		t.Fatalf("exit %d, verdict %s (%s), title %q: want %s", r.exit, r.result.Verdict, r.result.Reason, r.result.Title(), title)
	}
	t.Logf("reproduced: %s", title)
}

// The fault the direct_functions race ends in, and the probes' mapper's.
const (
	directFault = "general protection fault in ftrace_find_rec_direct"
	mapperFault = "general protection fault in ftrace_lookup_ip"
)

// docs/findings.md 9: on x86_64 7.3 unregister_ftrace_direct() kfree()s
// its direct_functions entries at once, while call_direct_funcs() may be
// walking the same bucket on another CPU under preempt_disable_notrace().
// The host holds the writer at remove_direct_functions_hash and the
// reader at ftrace_find_rec_direct's compare while it holds the entry
// being freed, lets the writer free it, then the reader: with slab_debug=P
// the reader follows a poisoned next pointer. The control holds the reader
// at a live entry behind the freed one: the same holds and frees, no
// fault. Two short boots; enabled_functions as the reader, 6.12 and the
// fixed kernels are make test-all's (TestFindingDirectUnregisterFreesUnderLookupAll).
func TestFindingDirectUnregisterFreesUnderLookup(t *testing.T) {
	t.Run("direct-unregister-free", func(t *testing.T) { repro(t, "direct-unregister-free", directFault) })
	t.Run("direct-unregister-live", func(t *testing.T) { repro(t, "direct-unregister-live", "") })
}

// docs/findings.md 9 through enabled_functions, on 7.3 and on 6.12: that
// reader has it too (the same fault, from t_show), while 6.12's call
// path, which reads ops->direct_call, never looks the hash up: that
// sequence passes, saying so. The kernels with the entries freed after a
// grace period survive. make test-all (a 6.12 build, two patched ones).
func TestFindingDirectUnregisterFreesUnderLookupAll(t *testing.T) {
	requireAll(t)
	k612 := []string{"--kernel", "6.12"}
	t.Run("tracefs-7.3", func(t *testing.T) { repro(t, "direct-unregister-free-tracefs", directFault) })
	t.Run("tracefs-6.12", func(t *testing.T) { repro(t, "direct-unregister-free-tracefs", directFault, k612...) })
	t.Run("call-path-6.12", func(t *testing.T) { repro(t, "direct-unregister-free", "", k612...) })
	t.Run("fixed-7.3", func(t *testing.T) {
		repro(t, "direct-unregister-free", "", "--patch", "results/known/fixes/ftrace-direct-unregister-free-after-gp.patch")
	})
	t.Run("fixed-6.12", func(t *testing.T) {
		repro(t, "direct-unregister-free-tracefs", "", append(k612, "--patch", "results/known/fixes/ftrace-direct-unregister-free-after-gp-6.12.patch")...)
	})
}

// docs/findings.md 10: removing a function probe from one function frees
// its ftrace_func_mapper entry at once, while the probe's callback for
// another function may hold it. The host holds the writer at
// ftrace_func_mapper_remove_ip and call_write's callback at
// ftrace_lookup_ip's compare on the entry being freed; with slab_debug=P
// the callback follows a poisoned next pointer. The control holds the
// callback at its own entry: the same holds and free, no fault. Two short
// boots; 6.12 and the fixed kernels are make test-all's.
func TestFindingMapperRemoveFreesUnderLookup(t *testing.T) {
	t.Run("mapper-remove-free", func(t *testing.T) { repro(t, "mapper-remove-free", mapperFault) })
	t.Run("mapper-remove-live", func(t *testing.T) { repro(t, "mapper-remove-live", "") })
}

// docs/findings.md 10 on 6.12 (the mapper is older than both releases),
// and both releases fixed. make test-all.
func TestFindingMapperRemoveFreesUnderLookupAll(t *testing.T) {
	requireAll(t)
	k612 := []string{"--kernel", "6.12"}
	t.Run("6.12", func(t *testing.T) { repro(t, "mapper-remove-free", mapperFault, k612...) })
	t.Run("fixed-7.3", func(t *testing.T) {
		repro(t, "mapper-remove-free", "", "--patch", "results/known/fixes/ftrace-func-mapper-free-after-gp.patch")
	})
	t.Run("fixed-6.12", func(t *testing.T) {
		repro(t, "mapper-remove-free", "", append(k612, "--patch", "results/known/fixes/ftrace-func-mapper-free-after-gp-6.12.patch")...)
	})
}

// docs/findings.md 12: a BPF trampoline's first registration on a
// function with an IPMODIFY ftrace_ops is refused with -EAGAIN after
// ftrace_startup() had put its ops on ftrace_ops_list, and BPF frees the
// image at once: a caller that ftrace_ops_list_func sent there meanwhile
// runs into freed text. The host holds the writer at
// bpf_tramp_ftrace_ops_func (the ops on the list), the reader (CPU 1's
// caller kthread) at ftrace_caller's jump to the direct trampoline, lets
// the writer free the image, then the reader: freed BPF text is refilled
// with traps (x86_64 int3, arm64 BRK, riscv64 zeros: an illegal
// instruction). x86_64's one shared direct ops has the window only on its
// first registration, which the sequence's fexit is. The control
// attaches the fexit first and registers the IPMODIFY ops after (the peer
// handshake): the same holds, the old image put after an RCU-tasks grace
// period, no fault (riscv64's JIT refuses ORIG_STACK, so there the ops'
// registration is refused and no image changes). Six short boots, in
// make test-all, not make test: x86_64 under QEMU 7.2's gdbstub has twice
// left the VM stopped after a hold or a peek (the cell then ends on
// silence), and riscv64's control twice timed out waiting for the reader
// (2 runs of 8), neither understood.
func TestFindingEAgainFreesUnderCaller(t *testing.T) {
	requireAll(t)
	for _, arch := range []string{"x86_64", "riscv64", "arm64"} {
		t.Run(arch, func(t *testing.T) { eagain(t, arch) })
	}
}

// docs/findings.md 12 on the fixed kernels (the image put after the
// tasks in it are gone): the same holds, no fault. Three patched builds:
// make test-all.
func TestFindingEAgainFreesUnderCallerFixed(t *testing.T) {
	requireAll(t)
	for _, arch := range []string{"x86_64", "riscv64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			r := runFthArch(t, arch, 60*time.Minute, "--patch", "results/known/fixes/bpf-trampoline-eagain-put-after-gp.patch",
				"--agent-arg", "scenario=repro", "--agent-arg", "repro=eagain-free")
			r.mustCell(t)
			if r.exit != 0 || r.result.Verdict != results.Pass {
				t.Fatalf("exit %d, verdict %s (%s): the fixed kernel must survive", r.exit, r.result.Verdict, r.result.Reason)
			}
		})
	}
}

// eagain runs the eagain-free sequence, which must end in a kernel fault
// (what fault varies with what the reader met in the freed image: the
// trap the free left, or text being written again; the title names the
// image when its registration reached the host before the kernel died,
// which the holds do not wait for), and its control, which must pass.
func eagain(t *testing.T, arch string) {
	t.Run("eagain-free", func(t *testing.T) {
		r := runFthArch(t, arch, 40*time.Minute, "--agent-arg", "scenario=repro", "--agent-arg", "repro=eagain-free")
		r.mustCell(t)
		if r.result.Verdict == results.Pass {
			t.Fatalf("no fault on %s: the finding no longer reproduces; if the kernel fixed it, say so in docs/findings.md", r.result.Kernel.Release)
		}
		title := r.result.Title()
		fault := strings.HasPrefix(title, "Oops") || strings.HasPrefix(title, "Unable to handle kernel") || strings.HasPrefix(title, "general protection fault")
		if r.exit != 1 || !fault {
			t.Fatalf("exit %d, verdict %s (%s), title %q: want a kernel fault", r.exit, r.result.Verdict, r.result.Reason, title)
		}
		t.Logf("reproduced: %s", r.result.Title())
	})
	t.Run("eagain-peer", func(t *testing.T) {
		r := runFthArch(t, arch, 40*time.Minute, "--agent-arg", "scenario=repro", "--agent-arg", "repro=eagain-peer")
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			r.logConsoleTail(t, 120)
			t.Fatalf("exit %d, verdict %s (%s): want a pass", r.exit, r.result.Verdict, r.result.Reason)
		}
	})
}

// docs/findings.md 5: on ppc64le, ftrace_regs_caller restores r13 (the
// paca) from pt_regs after a preemptible handler, so a task moved to
// another CPU meanwhile runs on with the first CPU's. The churn's tracers
// (kprobes among them, called through ftrace_regs_caller) meet it within
// two minutes under QEMU 11.1 and 7.2; with r13 left alone
// (results/known/fixes/ppc64-ftrace-regs-caller-keep-r13.patch) the same
// churn passes. Two ppc64le boots and a patched build: make test-all.
func TestFindingPPC64LERegsCallerRestoresR13(t *testing.T) {
	requireAll(t)
	churn := []string{"--qemu", "11.1", "--agent-arg", "scenario=churn", "--agent-arg", "delivery=false", "--agent-arg", "modules=false", "--agent-arg", "hotplug=0"}
	t.Run("7.3.4", func(t *testing.T) {
		r := runFthArch(t, "ppc64le", 40*time.Minute, churn...)
		r.mustCell(t)
		if r.result.Verdict != results.Fail {
			t.Fatalf("verdict %s (%s): the unpatched kernel must fail (every churn with a kprobe beside it did: docs/findings.md 5)", r.result.Verdict, r.result.Reason)
		}
		t.Logf("failed as expected: %s", r.result.Title())
	})
	t.Run("fixed", func(t *testing.T) {
		r := runFthArch(t, "ppc64le", 40*time.Minute, append(churn, "--patch", "results/known/fixes/ppc64-ftrace-regs-caller-keep-r13.patch")...)
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			t.Fatalf("exit %d, verdict %s (%s): with r13 left alone the churn must pass", r.exit, r.result.Verdict, r.result.Reason)
		}
	})
}

// docs/findings.md 11: on ppc64le 7.3 a BPF fexit trampoline is not called
// while a livepatch of its function is applied (ftrace_regs_exit takes the
// livepatch handler before the direct call). The delivery churn with only
// fexit and the livepatch user must fail with fexit's missed calls; the
// control, fexit alone, must pass. Both on the r13 fix of Finding 5, so
// the runs live long enough to be judged. make test-all.
func TestFindingPPC64LEFexitBypassedByLivepatch(t *testing.T) {
	requireAll(t)
	others := []string{"ops", "ops-regs", "ops-ipmodify", "ops-recursion", "ops-multi", "ops-notrace", "kprobe", "kretprobe", "fprobe", "direct", "function-tracer", "graph-tracer", "fentry"}
	churn := func(skip ...string) []string {
		return []string{"--n", "0", "--qemu", "11.1", "--patch", "results/known/fixes/ppc64-ftrace-regs-caller-keep-r13.patch",
			"--agent-arg", "scenario=churn", "--agent-arg", "churn=90s", "--agent-arg", "preemptevery=0", "--agent-arg", "modules=false",
			"--agent-arg", "deliverskip=" + strings.Join(skip, ",")}
	}
	t.Run("fexit beside the livepatch", func(t *testing.T) {
		r := runFthArch(t, "ppc64le", 30*time.Minute, churn(others...)...)
		r.mustCell(t)
		misses := 0
		for _, o := range r.result.Oracles {
			if !o.OK && strings.HasPrefix(o.Msg, "missed call: fexit on fth_deliver_seq") {
				misses++
			}
		}
		if r.result.Verdict != results.Fail || misses == 0 {
			t.Fatalf("verdict %s (%s), %d fexit misses: fexit must miss calls while the livepatch is applied (docs/findings.md 11)", r.result.Verdict, r.result.Reason, misses)
		}
		t.Logf("reproduced: %d windows of fexit lost calls; headline %q", misses, r.result.Reason)
	})
	// The fix (powerpc-bpf-refuse-share-ipmodify.patch): the JIT refuses
	// to share with an IPMODIFY ops, so that whichever of the two comes
	// second is refused (-EOPNOTSUPP) and no call is lost. The churn
	// reports fexit's refusals (the pair excludes itself only on a fixed
	// kernel), so the verdict is a fail whose findings are refusals only.
	t.Run("fexit beside the livepatch, fixed", func(t *testing.T) {
		r := runFthArch(t, "ppc64le", 30*time.Minute, append([]string{"--patch", "results/known/fixes/powerpc-bpf-refuse-share-ipmodify.patch"}, churn(others...)...)...)
		r.mustCell(t)
		refused := 0
		for _, o := range r.result.Oracles {
			switch {
			case o.OK:
			case strings.HasPrefix(o.Title, "refused attach: fexit on fth_deliver_seq"):
				refused++
			case strings.HasPrefix(o.Title, "missed call") || strings.HasPrefix(o.Msg, "missed call"):
				t.Errorf("a call lost with the fix: %s", o.Msg)
			}
		}
		if refused == 0 {
			t.Fatalf("verdict %s (%s): want fexit refused beside the livepatch", r.result.Verdict, r.result.Reason)
		}
		t.Logf("fixed: fexit refused %d times beside the livepatch, no call lost", refused)
	})
	t.Run("fexit alone", func(t *testing.T) {
		r := runFthArch(t, "ppc64le", 30*time.Minute, churn(append(others, "livepatch")...)...)
		r.mustCell(t)
		if r.exit != 0 || r.result.Verdict != results.Pass {
			t.Fatalf("exit %d, verdict %s (%s): fexit alone must lose nothing", r.exit, r.result.Verdict, r.result.Reason)
		}
	})
}
