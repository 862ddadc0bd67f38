// Package options defines the agent's options and reads them from two sources:
// command-line flags and the kernel command line, where a key fth.<name>=<value>
// sets the option <name>. The host passes everything on the kernel command
// line so that a run is reproduced by one command line; flags exist for running
// the agent by hand.
//
// Precedence, lowest first: defaults, kernel command line, flags.
package options

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
)

// All is the value of Options.N and Options.Detach meaning "every one".
const All = -1

// CmdlinePrefix starts every agent key on the kernel command line.
const CmdlinePrefix = "fth."

// Scenarios (wire/event defines them, for host and guest alike).
const (
	ScenarioStorm = event.ScenarioStorm
	ScenarioChurn = event.ScenarioChurn
	ScenarioBench = event.ScenarioBench
	ScenarioRace  = event.ScenarioRace
	// ScenarioCampaign runs storm, churn, race and detach in one boot.
	ScenarioCampaign = event.ScenarioCampaign
	ScenarioRepro    = event.ScenarioRepro
	// ScenarioStandalone runs a known finding's standalone reproducer.
	ScenarioStandalone = event.ScenarioStandalone
)

// MaxArgsLimit is the largest parameter count any kernel accepts for a
// trampoline target (MAX_BPF_FUNC_ARGS).
const MaxArgsLimit = 12

// Options are the agent's settings.
type Options struct {
	// N is how many trampolines to attach, or All for every candidate.
	N int
	// Funcs, when set, replaces the seeded selection: exactly these functions,
	// in this order, deny list and signature filters bypassed. It is how a
	// finding is reproduced on the function it names. The churn and the
	// campaign take them as their background trampolines and keep them out
	// of the hot set.
	Funcs []string
	// Seed drives every random choice; 0 means "pick one from the clock"
	// (see ResolveSeed), and the chosen seed is reported back.
	Seed int64
	// Hold is how long everything stays attached with the hammer running.
	Hold time.Duration
	// Detach is how many links to detach with timing, or All. Links not
	// detached stay attached until the guest reboots.
	Detach int
	// Threads is the number of hammer threads.
	Threads int
	// Stall is the liveness bound: a hammer thread that does not progress
	// for longer is reported stalled.
	Stall time.Duration
	// Crash is CrashNone, CrashSysrqC or CrashHungTask.
	Crash string
	// LogLevel is the console log level the agent sets first thing, 0 to
	// leave it alone. u-root's init lowers it to 5 (notice), which hides
	// every KERN_INFO line: the stacks of hung-task reports and the task
	// dumps of RCU stall reports among them.
	LogLevel int
	// Events is where events go: "" auto-detects the virtio-serial port,
	// "-" or "stdout" is stdout, anything else a file path.
	Events string
	// Poweroff reboots the guest after the last event: the harness's QEMU
	// turns a reboot into a stop, so this ends the VM.
	Poweroff bool
	// IncludeKnown attaches to and cycles the triggers of the known
	// findings (results/known), which are avoided otherwise.
	IncludeKnown bool
	// MaxArgs is the largest parameter count of a function to trace. The
	// kernel's limit depends on the architecture and version; 6 is safe
	// everywhere trampolines exist.
	MaxArgs int

	// Scenario is one of the Scenario* constants. The options below
	// apply to churn and campaign; there N is the count of background
	// trampolines attached before the churn and detached (per Detach)
	// after it, and Hold is not used.
	Scenario event.Scenario
	// Hot is how many functions the churn drives through its states.
	Hot int
	// Churn is how long the churn runs; 0 means until Cycles.
	Churn time.Duration
	// Cycles bounds how many times each hot function goes through the
	// state sequence; 0 means until Churn elapses.
	Cycles int
	// Workers is how many goroutines run transitions concurrently; each
	// owns a fixed share of the hot set, so each function's sequence
	// depends on the seed alone.
	Workers int
	// ExactCalls is how many calls each exact-count window makes; 0
	// disables the exact-count oracle.
	ExactCalls int
	// ExactEvery is the pause between exact-count windows.
	ExactEvery time.Duration
	// PreemptEvery is the pause between preemption-model switches; 0
	// disables switching.
	PreemptEvery time.Duration
	// Mixed runs the mixed-tracers goroutine (function and function_graph
	// tracers, kprobes and kretprobes toggling) during the churn.
	Mixed bool
	// Hotplug (Auto: ChurnHotplug) is the period of CPU hotplug: one CPU offline for half of
	// it, back online for the other half; 0 (the default) disables it.
	Hotplug time.Duration
	// RT is how many hammer threads run SCHED_FIFO/SCHED_RR.
	RT int
	// TimerPeriod arms a timerfd of this period in every hammer thread; 0
	// disables it.
	TimerPeriod time.Duration
	// RTReserve is the percentage of every CPU kept for SCHED_OTHER tasks
	// (the kernel's fair server) while RT hammer threads run; 0 leaves the
	// kernel's own 5%.
	RTReserve int
	// Modules cycles the modules under /lib/modules/fth during the churn:
	// the kernel's ftrace-direct samples one at a time, and fth_target with
	// tracers already filtering its functions.
	Modules bool
	// ModList, when set, restricts the cycled modules to these names
	// (kernel spelling, e.g. ftrace_direct_modify, fth_target): how a
	// module-path finding is narrowed down.
	ModList []string
	// ModHold is the longest a cycled module stays loaded (drawn from
	// [ModHold/4, ModHold]).
	ModHold time.Duration
	// StormFirst makes the campaign attach the whole storm before the
	// churn starts, as it did before 2026-11-29: for cells whose churn
	// must meet every trampoline live (the scale cells). By default the
	// storm attaches beside the churn.
	StormFirst bool
	// Delivery runs the delivery oracle (stress/deliver) beside the
	// churn: fth_deliver.ko's numbered calls checked for every user on
	// one callsite while the others attach and detach.
	Delivery bool
	// Twins gives each churn worker a twin changing the same function's
	// trampoline at the same time (churn.Config.Twins).
	Twins bool
	// DeliverSkip are delivery-oracle users left out (DefaultDeliverSkip:
	// those a results/known entry names).
	DeliverSkip []string
	// Sabotage is a test-only mode (SabotageWrongIP, SabotageSkipCount,
	// SabotageDropCall).
	Sabotage string

	// Budget bounds the campaign's churn and race stages together, from
	// the churn's start: the churn is shortened to leave
	// CampaignRaceReserve for the race, and the race injects no more once
	// it is spent (after each target's first injection, which always
	// runs). A churn that runs past its share to finish the delivery
	// opening (at most DeliveryOpeningGrace) does not eat the race's
	// reserve: the campaign runs past Budget by that much. Neither do the
	// targets the campaign walks whole (RaceWalkAll: both trampoline
	// images on x86_64, about 2 minutes under TCG), which run first and
	// outside it; the others share the reserve. The storm and the detach
	// sample are sized by N and Detach. 0 means no bound.
	Budget time.Duration

	// The options below apply to the race scenario and the campaign's
	// race stage.
	//
	// RaceTarget is where the task is preempted: RaceAuto, or a
	// comma-separated list of RaceTrampoline, RaceOpsTrampoline and
	// RaceCallsite, run one after the other (RaceTargets).
	RaceTarget string
	// RaceAction is what the trampoline target races against the held
	// task: RaceDetach or RaceReplace, or a comma-separated list of both
	// (each instruction of the window is raced against each).
	RaceAction string
	// InjectFrom is where each target's walk through its window starts:
	// InjectFirst (its first instruction) or InjectRandom (an
	// instruction drawn from Seed: with few injections, a run then
	// catches a bug that bites at some points only with a probability,
	// the flaky reproduction fth bisect is calibrated against).
	InjectFrom string
	// RaceList decodes and reports the targets' windows and injects
	// nothing (fth race --list-windows).
	RaceList bool
	// Repro names the scripted sequence of scenario=repro (Repros).
	Repro string
	// Reproducer names the standalone reproducer of scenario=standalone
	// (a directory of results/known/repro), and ReproducerArgs the words
	// its run.sh is given ("control" for its control run).
	Reproducer     string
	ReproducerArgs []string
	// Injections is how many preemptions the race injects, shared by the
	// targets, or All (the default): one at every instruction of every
	// target's window. The campaign's budget ends them sooner, but for
	// the targets it walks whole (RaceWalkAll).
	Injections int
	// Window is how long the preemptor holds the CPU while the race runs;
	// Auto picks by arch (RaceWindow).
	Window time.Duration

	// The options below apply to the bench scenario only.
	//
	// BenchParts are the parts to run, in benchopts.Parts order.
	BenchParts []string
	// OpsSweep are the ftrace-ops configurations measured besides the
	// baseline (no ops at all), which always runs.
	OpsSweep []benchopts.OpsPoint
	// OpsCalls is nr_function_calls of every ftrace-ops load.
	OpsCalls int
	// SyscallCalls is how many getppid calls one timed run makes.
	SyscallCalls int
	// ScalingN are the trampoline counts of the attach/detach scaling
	// curve, each capped by the number of candidates.
	ScalingN []int
	// MultiN are the function counts of the tracing_multi and
	// kprobe_multi links.
	MultiN []int
	// MultiLiveN are the tracing_multi population sizes of the bench's
	// multilive part (none: the part is skipped).
	MultiLiveN []int
	// WakeupFor is how long each wakeup-latency run (quiet, storm) lasts.
	WakeupFor time.Duration
	// FExitEvery makes every FExitEvery-th trampoline of the storm (and
	// the bench's curve) an fexit; 0 keeps them all fentry.
	FExitEvery int
	// ScaleModule loads fth_scale.ko (ScaleModuleName) before the
	// inventory and counts its functions as candidates.
	ScaleModule bool
	// MultiHold is how many functions the campaign holds under
	// tracing_multi links (stress/multi) from before its storm to its
	// detach: functions neither the storm nor the churn touches, vmlinux's
	// first, then fth_scale.ko's. 0: none.
	MultiHold int
	// Profile is where the bench profiles attach and detach
	// (benchopts.ProfileLargest, ProfileAll, ProfileOff).
	Profile string
}

// Race targets (the race option).
const (
	// RaceTrampoline preempts a task at each instruction of a BPF
	// trampoline image in turn and replaces or detaches it meanwhile
	// (RaceAction).
	RaceTrampoline = "trampoline"
	// RaceFexitTrampoline is RaceTrampoline with a fexit program: its
	// image calls the original function, and is freed in three steps
	// (RCU-tasks for the instructions before __bpf_tramp_enter, the
	// image's percpu_ref for the program and the original function,
	// RCU-tasks again for the epilogue). Its walk starts at the image's
	// return, so that the epilogue, which only the last step covers, is
	// injected at first. Not in the campaign's auto: it has caught no
	// mutant yet (docs/race-injection.md).
	RaceFexitTrampoline = "fexittramp"
	// RaceCallsite preempts a task at the second instruction of a
	// disabled patchable function entry and enables tracing meanwhile.
	RaceCallsite = "callsite"
	// RaceOpsTrampoline preempts a task at each instruction in turn of the
	// trampoline x86 allocates for a dynamic ftrace_ops (a function tracer
	// instance's) and unregisters the ops meanwhile: ftrace_shutdown()
	// frees it once RCU-tasks let the task out.
	RaceOpsTrampoline = "opstramp"
	// RaceInt3 holds x86's patcher at each step of an INT3 patch of a
	// function's callsite (smp_text_poke_batch_finish) while a task runs
	// the callsite; a task that traps on the INT3 is held in the handler
	// while the patcher runs on, tracing switched on or off meanwhile.
	RaceInt3 = "int3"
	// RaceCallOps preempts a task at each instruction in turn of
	// ftrace_caller between the load of its callsite's ops literal and the
	// call of op->func (CALL_OPS: arm64, riscv64, ppc64le), a function tracer
	// instance's ops the callsite's only one, and removes the instance
	// meanwhile: its ops is freed once ftrace_shutdown()'s RCU-tasks wait
	// let the task out.
	RaceCallOps = "callops"
	// RaceLiteral watches every write to a CALL_OPS callsite (arm64,
	// riscv64; ppc64le, whose literal and bl are in the callsite's
	// out-of-line stub): its ops literal and its branch, each write's state read
	// through the gdbstub as the kernel's text writer is entered, while
	// the callsite walks between nop, one ops, the list ops and a direct
	// call. A live branch must never find the nop ops in its literal
	// except on its way to a nop. Nothing is preempted.
	RaceLiteral = "literal"
	// RaceAuto is the race scenario's trampoline alone, and in the
	// campaign's race stage every target the arch can be raced at for a
	// freed-early class (RaceTargets).
	RaceAuto = "auto"
	// RaceAll is every target the arch has (ArchRaceTargets): the
	// nightly's full exploration.
	RaceAll = "all"
)

// raceTargetTable is every race target, in the order a list of them
// runs, with the arches that have its window (nil: every arch), whether
// the campaign's race stage runs it where the arch has it (a class the
// campaign claims), and why another arch has no such window, naming what
// to use instead. ArchRaceTargets, RaceTargets and CheckRaceTargets all
// read it.
var raceTargetTable = []struct {
	name string
	on   []string
	// campaign puts the target in the campaign's auto, on the arches of
	// campaignOn (nil: every arch it runs on); walkAllOn are the arches
	// whose campaign walks every point of its window, first and outside
	// the budget the other targets share.
	campaign   bool
	campaignOn []string
	walkAllOn  []string
	lacks      func(goarch string) string
}{
	// Both trampoline kinds are walked whole on x86_64 (an fentry image
	// of 26 points at about 1.1 s each under TCG, an fexit image's 12
	// prologue points as fast and its 23 epilogue points at about 3 s,
	// each behind a nap).
	{name: RaceTrampoline, campaign: true, walkAllOn: []string{"amd64"}},
	// The fexit image: its walk starts at the return, where the image's
	// last wait matters. In the campaign on arm64 since stress/disasm
	// reads its call of the function (adr x30, .+8; ret x10) as a call:
	// 51 instructions, the mutant caught at the first injection. Not on
	// riscv64: every injection at the return ended at the host's bound,
	// the agent's CPU stalled while the task was held (2026-12-07, not
	// understood).
	{name: RaceFexitTrampoline, campaign: true, campaignOn: []string{"amd64", "arm64", "riscv64"}, walkAllOn: []string{"amd64"}},
	{name: RaceOpsTrampoline, on: []string{"amd64"}, campaign: true, lacks: func(goarch string) string {
		return "needs x86's per-ftrace_ops trampolines; " + goarch + " calls every ops through ftrace_caller (CALL_OPS): use racetarget=trampoline"
	}},
	{name: RaceInt3, on: []string{"amd64"}, campaign: true, lacks: func(goarch string) string {
		return "needs x86's INT3 patching (smp_text_poke_batch_finish); " + goarch + " patches a callsite without a breakpoint: use racetarget=callsite or trampoline"
	}},
	{name: RaceCallsite, on: []string{"arm64", "riscv64"}, lacks: func(goarch string) string {
		switch goarch {
		case "amd64":
			return "needs a two-instruction callsite (riscv64, arm64); amd64 patches one 5-byte instruction, through an INT3: use racetarget=int3"
		case "ppc64le":
			return "needs a two-instruction callsite (riscv64, arm64); ppc64le 7.3 patches one nop at the callsite into a branch to an out-of-line stub, which holds the mflr r0/bl pair older kernels patched in place: use racetarget=trampoline"
		}
		return "needs a two-instruction callsite (riscv64, arm64); " + goarch + " patches one instruction: use racetarget=trampoline"
	}},
	{name: RaceCallOps, on: []string{"arm64", "riscv64", "ppc64le"}, lacks: func(goarch string) string {
		return "needs ftrace_caller's CALL_OPS literal load (arm64, riscv64, ppc64le); " + goarch + ": use racetarget=trampoline"
	}},
	{name: RaceLiteral, on: []string{"arm64", "riscv64", "ppc64le"}, campaign: true, lacks: func(goarch string) string {
		return "needs a CALL_OPS literal (arm64, riscv64, ppc64le); " + goarch + " has none: use racetarget=trampoline"
	}},
}

// CheckRaceTargets says why a racetarget value cannot run on goarch, so
// that the host refuses it before any build: a callsite target needs a
// callsite of two instructions (riscv64, arm64; x86 patches one), an ops
// trampoline needs x86's per-ops trampolines.
func CheckRaceTargets(target, goarch string) error {
	for _, t := range RaceTargets(target, goarch, true) {
		for _, row := range raceTargetTable {
			if row.name == t && row.on != nil && !slices.Contains(row.on, goarch) {
				return fmt.Errorf("racetarget=%s %s", t, row.lacks(goarch))
			}
		}
	}
	return nil
}

// AllRaceTargets is every race target of any arch.
var AllRaceTargets = func() []string {
	var out []string
	for _, row := range raceTargetTable {
		out = append(out, row.name)
	}
	return out
}()

// ArchRaceTargets is every target goarch can be raced at, what racelist
// lists for racetarget auto.
func ArchRaceTargets(goarch string) []string {
	return archTargets(goarch, false)
}

// archTargets is the targets goarch has, those of the campaign's auto
// alone with campaign.
func archTargets(goarch string, campaign bool) []string {
	var out []string
	for _, row := range raceTargetTable {
		inCampaign := row.campaign && (row.campaignOn == nil || slices.Contains(row.campaignOn, goarch))
		if (row.on == nil || slices.Contains(row.on, goarch)) && (!campaign || inCampaign) {
			out = append(out, row.name)
		}
	}
	return out
}

// RaceWalkAll says the campaign on goarch walks every point of target's
// window, before the targets that share its budget and outside it.
func RaceWalkAll(target, goarch string) bool {
	for _, row := range raceTargetTable {
		if row.name == target {
			return slices.Contains(row.walkAllOn, goarch)
		}
	}
	return false
}

// RaceTargets resolves the racetarget option for goarch: the targets to
// run in order, each with its share of the injections. campaign is true
// for the campaign's race stage, whose auto is every target the arch has
// for a class the campaign claims: x86 allocates a trampoline per
// ftrace_ops and patches through INT3, the CALL_OPS arches call every ops
// through ftrace_caller and have none to free, but write a literal and a
// branch per callsite, in an order the literal target watches.
func RaceTargets(target, goarch string, campaign bool) []string {
	switch {
	case target == RaceAll:
		return ArchRaceTargets(goarch)
	case target != RaceAuto:
		return strings.Split(target, ",")
	case campaign:
		return archTargets(goarch, true)
	}
	return []string{RaceTrampoline}
}

// ReproIPModifyFilter is scenario=repro's sequence for docs/findings.md 8:
// an enabled IPMODIFY ftrace_ops takes a function with a BPF fexit into its
// filter, then another function's trampoline is modified.
const ReproIPModifyFilter = "ipmodify-filter"

// ReproIPModifyRegister is its control: the same functions and programs,
// the IPMODIFY ops given both functions before it registers.
const ReproIPModifyRegister = "ipmodify-register"

// ReproDirectUnregisterFree is scenario=repro's sequence for
// docs/findings.md 9: unregister_ftrace_direct() frees a direct_functions
// entry while a lookup on another CPU, held there by the host, holds it.
const ReproDirectUnregisterFree = "direct-unregister-free"

// ReproDirectUnregisterLive is its control: the same holds and frees, the
// lookup held at a live entry behind the freed one.
const ReproDirectUnregisterLive = "direct-unregister-live"

// ReproDirectUnregisterFreeTracefs and ReproDirectUnregisterLiveTracefs
// are the same two with tracefs's enabled_functions as the reader, which
// kernels before 7.3 have too.
const (
	ReproDirectUnregisterFreeTracefs = "direct-unregister-free-tracefs"
	ReproDirectUnregisterLiveTracefs = "direct-unregister-live-tracefs"
)

// ReproMapperRemoveFree is scenario=repro's sequence for
// docs/findings.md 10: removing a function probe from one function frees
// its entry of the probe's ftrace_func_mapper while the probe's callback
// for another function, held by the host, holds it.
// ReproMapperRemoveLive is its control: the callback held at its own
// entry.
const (
	ReproMapperRemoveFree = "mapper-remove-free"
	ReproMapperRemoveLive = "mapper-remove-live"
)

// ReproEAgainFree is scenario=repro's sequence for docs/findings.md 12: a
// BPF trampoline whose first registration on a function with an IPMODIFY
// ftrace_ops is refused with -EAGAIN (to be built again with ORIG_STACK)
// is freed at once, while a caller that ftrace_ops_list_func sent there
// during the refused registration, held by the host, is on its way in.
// ReproEAgainPeer is its control: the trampoline attached first, the
// IPMODIFY ops after (the peer handshake), the same three holds, the old
// image put after an RCU-tasks grace period.
const (
	ReproEAgainFree = "eagain-free"
	ReproEAgainPeer = "eagain-peer"
)

// ReproIPModifyMidUpdate is scenario=repro's sequence for
// docs/findings.md 13: a livepatch on a function, then a BPF fentry there
// (its trampoline registered without sharing), then a fexit added, whose
// update has set CALL_ORIG and waits for direct_mutex while another
// trampoline's modify, held by the host with that mutex taken, goes on to
// ask every trampoline on an IPMODIFY function to share.
// ReproIPModifyMidUpdatePeer is its control: the fentry first, the
// livepatch after (the peer handshake marks the trampoline sharing), the
// same hold.
const (
	ReproIPModifyMidUpdate     = "ipmodify-mid-update"
	ReproIPModifyMidUpdatePeer = "ipmodify-mid-update-peer"
)

// ReproRefusedDirect is scenario=repro's sequence for docs/findings.md
// 14: a direct ops refused by the IPMODIFY handshake was listed while the
// refusal was decided, and a caller it sent to its trampoline, held by the
// host, gets there after the refusal returned.
// ReproRefusedDirectAccepted is its control: the same holds, the second
// ops not IPMODIFY, the attach accepted.
const (
	ReproRefusedDirect         = "refused-direct"
	ReproRefusedDirectAccepted = "refused-direct-accepted"
)

// reproTable is every sequence of the repro option, with whether it holds
// vCPUs through the gdbstub (its cell gets the race port, and freed slab
// objects poisoned: ReproKernelArgs).
var reproTable = []struct {
	name  string
	races bool
}{
	{ReproIPModifyFilter, false}, {ReproIPModifyRegister, false},
	{ReproDirectUnregisterFree, true}, {ReproDirectUnregisterLive, true},
	{ReproDirectUnregisterFreeTracefs, true}, {ReproDirectUnregisterLiveTracefs, true},
	{ReproMapperRemoveFree, true}, {ReproMapperRemoveLive, true},
	{ReproEAgainFree, true}, {ReproEAgainPeer, true},
	{ReproIPModifyMidUpdate, true}, {ReproIPModifyMidUpdatePeer, true},
	{ReproRefusedDirect, true}, {ReproRefusedDirectAccepted, true},
}

// Repros lists the repro option's sequences.
func Repros() []string {
	out := make([]string, len(reproTable))
	for i, r := range reproTable {
		out[i] = r.name
	}
	return out
}

// ReproRaces says whether repro sequence seq holds vCPUs through the
// gdbstub.
func ReproRaces(seq string) bool {
	for _, r := range reproTable {
		if r.name == seq {
			return r.races
		}
	}
	return false
}

// RacePort says whether a cell run with o needs the race port, through
// which the host holds vCPUs at instructions (harness/race): the race
// scenario; the campaign, whose race stage runs where the arch can
// inject (canRace); a repro sequence that holds vCPUs (ReproRaces).
func (o Options) RacePort(canRace bool) bool {
	switch o.Scenario {
	case ScenarioRace:
		return true
	case ScenarioCampaign:
		return canRace
	case ScenarioRepro:
		return ReproRaces(o.Repro)
	}
	return false
}

// KernelArgs are the kernel parameters beyond fth.<name>= that a cell run
// with o needs: a repro sequence's (ReproKernelArgs).
func (o Options) KernelArgs() []string {
	if o.Scenario == ScenarioRepro {
		return ReproKernelArgs(o.Repro)
	}
	return nil
}

// ScaleModuleName is the module of stress/kmod-scale: 32,768 traceable
// functions for storms and scaling curves beyond vmlinux's own.
const ScaleModuleName = "fth_scale"

// ScaleModuleFunc says whether fn is one of the scale module's functions,
// all of which its generator names with the module's name first. Nothing
// calls them: the churn keeps them out of its hot set and anchors, and a
// tracefs filter naming one is matched over the module's 32,768 symbols.
func ScaleModuleFunc(fn string) bool { return strings.HasPrefix(fn, ScaleModuleName+"_") }

// ReproKernelArgs are the kernel parameters a repro sequence needs: a
// freed slab object poisoned (0x6b), so that a read of it after the free
// faults instead of finding its old contents.
func ReproKernelArgs(seq string) []string {
	if ReproRaces(seq) {
		return []string{"slab_debug=P"}
	}
	return nil
}

// Race actions on a trampoline (the raceaction option).
const (
	// RaceDetach closes the image's only link: the function is no longer
	// traced. On CALL_OPS arches that takes the direct ops down through
	// ftrace_shutdown(), which itself waits for RCU-tasks, so the image's
	// own grace period is never what protects the held task.
	RaceDetach = "detach"
	// RaceReplace attaches a second program to the same function: the
	// trampoline is regenerated, the callsite moved to the new image and
	// the held task's image put while the function stays traced, so only
	// the image's own grace periods protect the task, on every arch.
	// The move is the kernel's direct-modify path (modify_ftrace_direct;
	// update_ftrace_direct_mod under x86_64 7.3's single direct ops), so
	// this is also the direct-modify window.
	RaceReplace = "replace"
)

// Where a race target's walk starts (the injectfrom option).
const (
	// InjectFirst starts at the window's first instruction.
	InjectFirst = "first"
	// InjectRandom starts at an instruction drawn from the seed.
	InjectRandom = "random"
)

// RaceWindow is the window's default, every arch's: long enough for the
// actions (a replace under TCG took 14-30 ms on riscv64, 150-520 ms for
// a detach that waits for no held task) and for an image freed too early
// to be gone before the task runs on (every trampoline mutant crashed at
// its first injection on arm64 and riscv64 with 400 ms, as with 700), and
// far below the 950 ms after which the kernel's fair server would run the
// preempted task beside the spinning preemptor. arm64 and riscv64 had 700
// ms until 2026-11-27, which kept them under 60 injections a minute.
const RaceWindow = 400 * time.Millisecond

// Env is what the defaults depend on.
type Env struct {
	// NumCPU is the number of usable CPUs.
	NumCPU int
	// Poweroff is the default of the poweroff option: true when the agent
	// is the child of PID 1 inside the harness VM.
	Poweroff bool
}

// vmLogLevel is the default of the loglevel option: 7 in the harness VM,
// whose console the host parses; on a board nothing is changed, since a
// slow serial console there would carry every KERN_INFO line too.
func vmLogLevel(env Env) int {
	if env.Poweroff {
		return 7
	}
	return 0
}

// Auto marks an option whose value depends on the scenario (see
// ResolveAuto); the churn's preemption pressure is ChurnRT RT threads and
// ChurnTimerPeriod timers.
const (
	Auto = -1
	// CampaignRaceReserve is what the campaign's budget keeps for the
	// race stage when it shortens the churn.
	CampaignRaceReserve = 45 * time.Second
	// DeliveryOpeningGrace is how long the churn may run past its budget
	// for the delivery churn to finish its opening (deliver.Opening).
	DeliveryOpeningGrace = 3 * time.Minute

	ChurnRT          = 2
	ChurnTimerPeriod = 500 * time.Microsecond
	ChurnHotplug     = 20 * time.Second
)

// DefaultDeliverSkip are the delivery-oracle users left out by default:
// those a known finding names (ops-ipmodify: docs/findings.md 8).
func DefaultDeliverSkip() []string { return known.DeliverUsers() }

// Defaults returns the options before any source is applied.
func Defaults(env Env) Options {
	cpus := max(env.NumCPU, 1)
	return Options{
		N:        2000,
		Hold:     5 * time.Second,
		Detach:   All,
		Threads:  2 * cpus,
		Stall:    20 * time.Second,
		Crash:    CrashNone,
		LogLevel: vmLogLevel(env),
		Poweroff: env.Poweroff,
		MaxArgs:  6,

		Scenario: ScenarioStorm,
		Budget:   2 * time.Minute,
		Hot:      16,
		Churn:    60 * time.Second,
		Workers:  2,
		// A twin per worker: without it no two tasks ever change one
		// trampoline at once, and an unlocked update escapes the churn.
		Twins:        true,
		ExactCalls:   1000,
		ExactEvery:   5 * time.Second,
		PreemptEvery: 3 * time.Second,
		Mixed:        true,
		Hotplug:      Auto,
		// The preemption pressure is the churn's: on riscv64 under TCG
		// the storm's SCHED_OTHER threads starved into a false liveness
		// failure under it (before RT threads shared one priority and a
		// fair-server reserve).
		RT:          Auto,
		TimerPeriod: Auto,
		RTReserve:   DefaultRTReserve,
		Modules:     true,
		ModHold:     3 * time.Second,
		Delivery:    true,
		DeliverSkip: DefaultDeliverSkip(),

		RaceTarget: RaceAuto,
		RaceAction: RaceReplace,
		InjectFrom: InjectFirst,
		Injections: All,
		Window:     Auto,

		BenchParts:   benchopts.DefaultParts(),
		OpsSweep:     benchopts.DefaultOpsSweep(),
		OpsCalls:     100_000,
		SyscallCalls: 100_000,
		ScalingN:     []int{100, 500, 1000, 2000, 5000, 10000},
		MultiN:       []int{100, 1000},
		WakeupFor:    10 * time.Second,
		Profile:      benchopts.ProfileLargest,
	}
}

// ResolveSeed replaces a zero seed with one taken from now, so that every run
// has a seed it can report and be reproduced with.
func (o *Options) ResolveSeed(now time.Time) {
	if o.Seed != 0 {
		return
	}
	o.Seed = now.UnixNano()
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// DefaultRTReserve is the percentage of each CPU the hammer reserves for
// SCHED_OTHER tasks while its real-time threads run (the fair server's
// runtime; stress/hammer.DefaultFairShare). The kernel's default (50 ms
// of every second) is sized for real hardware. Under TCG a guest CPU is
// tens of times slower and the agent itself is written in Go, whose
// runtime makes a thread leaving a syscall spin (casgstatus) until a
// stack scan by another, SCHED_OTHER thread ends: an RT hammer thread
// spun that way on one CPU while the scanner waited behind it, the agent
// fell silent and RCU-tasks could not finish a grace period for minutes
// (the vCPU dump of the stall shows it). A larger reserve keeps the
// pressure (RT wakeups still preempt anything at any instruction) without
// letting the harness starve the tasks the kernel waits for.
const DefaultRTReserve = 40

// DeliveryUsers are the delivery oracle's users by the names deliverskip
// takes, sorted: fth_deliver.ko's and fth_klp.ko's (stress/deliver's
// ModuleUsers gives each its dispatch group) and the agent's own BPF
// programs and tracers (its AgentUsers).
func DeliveryUsers() []string {
	return []string{"direct", "fentry", "fexit", "fprobe", "function-tracer", "graph-tracer", "kprobe", "kretprobe",
		"livepatch", "ops", "ops-ipmodify", "ops-multi", "ops-notrace", "ops-recursion", "ops-regs"}
}
