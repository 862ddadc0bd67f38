// Package event is the wire format between the guest agent and the host: one
// JSON object per line on the agent's virtio-serial port (or its SSH channel).
//
// The guest reports what it saw; it never decides a cell's verdict alone. The
// host combines these events with console findings and liveness.
package event

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kind names what an Event carries. Exactly one payload field matching the Kind
// is set.
type Kind string

const (
	// KindHello is the first event: the agent runs and the channel works.
	KindHello Kind = "hello"
	// KindInventory reports which functions can be traced.
	KindInventory Kind = "inventory"
	// KindProgress reports progress through a long phase.
	KindProgress Kind = "progress"
	// KindOp is sent just before each attach or detach syscall, so that when
	// the kernel dies mid-call the host knows which function it was patching.
	KindOp Kind = "op"
	// KindFailure reports one failed operation with its true errno.
	KindFailure Kind = "failure"
	// KindPhase summarises a finished phase (attach, detach) with timings.
	KindPhase Kind = "phase"
	// KindLiveness reports hammer-thread progress.
	KindLiveness Kind = "liveness"
	// KindLog is free text for humans.
	KindLog Kind = "log"
	// KindDone is the last event: the agent's own view of the run.
	KindDone Kind = "done"
	// KindTransition summarises one kind of state transition of the churn
	// scenario (attach a second fexit, function tracer on, kprobe off, ...):
	// counts, errnos and latency, in the same shape as a Phase.
	KindTransition Kind = "transition"
	// KindOracle reports an oracle's check: every failure, and a summary
	// per oracle at the end of the run.
	KindOracle Kind = "oracle"
	// KindPreempt reports the preemption models the kernel offers and
	// accepts at run time, and how often the agent switched among them.
	KindPreempt Kind = "preempt"
	// KindHotSet names the functions the churn scenario drives through its
	// states, and the one the exact-count oracle counts calls of.
	KindHotSet Kind = "hotset"
	// KindFeature reports, once, whether an optional kernel facility the
	// agent probed works (BPF_LINK_UPDATE on tracing links, tracefs
	// instances, CPU hotplug), with the errno when it does not.
	KindFeature Kind = "feature"
	// KindBench carries the bench scenario's measurements, once, at the
	// end of the run.
	KindBench Kind = "bench"
	// KindDelivery reports the delivery oracle's coverage, once, when its
	// churn ends: users attached, callsite states and edges walked.
	KindDelivery Kind = "delivery"
	// KindImage reports a trampoline image the kernel registered (its
	// kallsyms symbol): what lay at an address once its symbol is gone.
	KindImage Kind = "image"
)

// Event is one line on the agent channel.
type Event struct {
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`

	Hello     *Hello     `json:"hello,omitempty"`
	Inventory *Inventory `json:"inventory,omitempty"`
	Progress  *Progress  `json:"progress,omitempty"`
	Op        *Op        `json:"op,omitempty"`
	Failure   *Failure   `json:"failure,omitempty"`
	Phase     *Phase     `json:"phase,omitempty"`
	Liveness  *Liveness  `json:"liveness,omitempty"`
	Log       string     `json:"log,omitempty"`
	Done      *Done      `json:"done,omitempty"`

	// Transition reuses Phase: a transition summary has exactly a phase's
	// counts, errnos and latency, so readers can render both alike.
	Transition *Phase   `json:"transition,omitempty"`
	Oracle     *Oracle  `json:"oracle,omitempty"`
	Preempt    *Preempt `json:"preempt,omitempty"`
	HotSet     *HotSet  `json:"hotset,omitempty"`
	Feature    *Feature `json:"feature,omitempty"`
	Bench      *Bench   `json:"bench,omitempty"`
	// Delivery is KindDelivery's payload.
	Delivery *Delivery `json:"delivery,omitempty"`
	// Injection is KindInjection's payload (race.go).
	Injection *Injection `json:"injection,omitempty"`
	// Stage is KindStage's payload (campaign.go).
	Stage *Stage `json:"stage,omitempty"`
	// RaceWindow is KindRaceWindow's payload (race.go).
	RaceWindow *RaceWindow `json:"race_window,omitempty"`
	// Image is KindImage's payload.
	Image *Image `json:"image,omitempty"`
}

// Image is a trampoline image's code: [Addr, Addr+Len), under its
// kallsyms name (bpf_trampoline_<key>, ftrace_trampoline).
type Image struct {
	Name string `json:"name"`
	Addr uint64 `json:"addr"`
	Len  uint32 `json:"len"`
}

// Hello describes the guest as the agent found it.
type Hello struct {
	KernelRelease string `json:"kernel_release"`
	CPUs          int    `json:"cpus"`
	// PreemptModel is read from /sys/kernel/debug/sched/preempt, e.g. "full".
	PreemptModel string `json:"preempt_model,omitempty"`
	// Args are the agent options in effect, as key=value.
	Args map[string]string `json:"args,omitempty"`
	// PID is the agent's process id: on a board, where the soak must stop
	// a stale agent after a network blip.
	PID int `json:"pid,omitempty"`
}

// Inventory counts the functions that could be traced.
type Inventory struct {
	// Traceable is the number of entries in available_filter_functions.
	Traceable int `json:"traceable"`
	// WithBTF is how many of those have a BTF FUNC in vmlinux.
	WithBTF int `json:"with_btf"`
	// Candidates is how many passed every filter (BTF, deny list, signature).
	Candidates int `json:"candidates"`
	// Selected is how many the agent will try to attach.
	Selected int `json:"selected"`
}

// Progress reports Done out of Total for Phase.
type Progress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

// Op names the operation about to run.
type Op struct {
	Phase    string `json:"phase"`
	Function string `json:"function"`
	// Index counts from 1 within the phase (attach storm), or over all
	// operations (the churn's operation log).
	Index int `json:"index"`
	// AtMS is when the operation started, in milliseconds since the
	// churn began; CPU is the CPU the agent thread was on. Set in the
	// churn's operation log only.
	AtMS float64 `json:"t_ms,omitempty"`
	CPU  *int    `json:"cpu,omitempty"`
}

// KmsgStreamPIDPrefix starts the first line of the agent's kernel log
// stream (-kmsgstream), followed by its pid: a line no kmsg record can be.
const KmsgStreamPIDPrefix = "fth-kmsgstream pid="

// Failure is one failed operation.
type Failure struct {
	Phase    string `json:"phase"`
	Function string `json:"function"`
	// Errno is the kernel's errno name (e.g. "EINVAL", "ENOTSUPP"), taken from
	// the syscall that failed, not from a library's fallback path.
	Errno string `json:"errno,omitempty"`
	Msg   string `json:"msg"`
}

// Phase summarises one finished phase.
type Phase struct {
	Name      string         `json:"name"`
	Attempted int            `json:"attempted"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Errnos    map[string]int `json:"errnos,omitempty"`
	Latency   Latency        `json:"latency"`
	Wall      Duration       `json:"wall"`
}

// Latency is a distribution of per-operation times.
type Latency struct {
	Count  int      `json:"count"`
	Min    Duration `json:"min"`
	Median Duration `json:"median"`
	P90    Duration `json:"p90"`
	P99    Duration `json:"p99"`
	Max    Duration `json:"max"`
}

// Liveness reports whether every hammer thread made progress.
type Liveness struct {
	Threads int `json:"threads"`
	// Iterations is the total loop count across threads since the last report.
	Iterations uint64 `json:"iterations"`
	// Stalled lists threads that made no progress for longer than the bound,
	// with their kernel stack where readable.
	Stalled []StalledThread `json:"stalled,omitempty"`
}

// StalledThread is a hammer thread that stopped making progress.
type StalledThread struct {
	TID   int      `json:"tid"`
	For   Duration `json:"for"`
	Stack string   `json:"stack,omitempty"`
}

// Done is the agent's summary. OK false means the agent saw something wrong
// (an oracle failed, a phase could not run); Reason says what. Unjudged
// means the agent stopped at a limit of its own, not at anything the
// kernel did (it could not tell which trampoline image an attach made):
// the host makes that an error, never a kernel failure.
type Done struct {
	OK       bool   `json:"ok"`
	Reason   string `json:"reason,omitempty"`
	Unjudged bool   `json:"unjudged,omitempty"`
}

// OracleName names an oracle in Oracle events; host and guest share these.
type OracleName string

// The oracles.
const (
	// OracleFuncIP compares bpf_get_func_ip() in each program with the
	// kallsyms address of the function it is attached to.
	OracleFuncIP OracleName = "func-ip"
	// OracleCalibration is the per-boot measurement of the arch's offset
	// between the two.
	OracleCalibration OracleName = "func-ip-calibration"
	// OracleExact counts hits in a window with a known number of calls.
	OracleExact OracleName = "exact-count"
	// OracleDelivery checks that every call reaches every user attached
	// to the callsite through other users' transitions (stress/deliver).
	OracleDelivery OracleName = "delivery"
	// OracleCallsiteOrder checks the order of a CALL_OPS callsite's
	// writes: a live branch never meets the nop ops in its literal but on
	// its way to a nop (the race scenario's literal target).
	OracleCallsiteOrder OracleName = "callsite-order"
	// OracleReproducer is a standalone reproducer's own check: its run.sh
	// exits 1 and says what went wrong on a line that starts "FAIL: ".
	OracleReproducer OracleName = "reproducer"
)

// Oracle is the result of an oracle check. Expected and Got are counts for
// the exact-count oracle and addresses for the func-ip oracle (Msg repeats
// addresses in hex, which is how a reader compares them with kallsyms).
type Oracle struct {
	// Name is the oracle.
	Name OracleName `json:"name"`
	// Function is the kernel function checked; empty in a summary.
	Function string `json:"function,omitempty"`
	Expected uint64 `json:"expected,omitempty"`
	Got      uint64 `json:"got,omitempty"`
	OK       bool   `json:"ok"`
	// Delta is what the calibration measured: bpf_get_func_ip minus the
	// kallsyms address, in bytes.
	Delta int64 `json:"delta,omitempty"`
	// Checks and Failures count the checks in a summary.
	Checks   int `json:"checks,omitempty"`
	Failures int `json:"failures,omitempty"`
	// Skipped says why the oracle could not run at all.
	Skipped string `json:"skipped,omitempty"`
	Msg     string `json:"msg,omitempty"`
	// Title names a failure the way a cell's headline shows it, when the
	// oracle has a name of its own for it (the delivery oracle's "missed
	// call: <user> on <function> during <transition>").
	Title string `json:"title,omitempty"`
}

// Delivery is what the delivery oracle's churn covered (stress/deliver).
type Delivery struct {
	// Steps counts attaches, detaches and filter changes made; Checked
	// the calls judged against a user's window.
	Steps   int    `json:"steps"`
	Checked uint64 `json:"checked"`
	// Users are every user the oracle knows, attached or not.
	Users []DeliveryUser `json:"users"`
	// States counts each callsite state entered (nop, one-ops, list,
	// direct, direct+ops); Edges each change between two ("list ->
	// one-ops").
	States map[string]int `json:"states,omitempty"`
	Edges  map[string]int `json:"edges,omitempty"`
	// Orders counts the registration orders made of the direct call and
	// each other ftrace_ops on the callsite (DeliveryOrder): the ops
	// joining the direct call, and the direct call joining the ops.
	// OrderGoal is every order the run's users could make.
	Orders    map[string]int `json:"orders,omitempty"`
	OrderGoal []string       `json:"order_goal,omitempty"`
}

// DeliveryOrder names the registration order of two of a callsite's
// ftrace_ops: first registered, then second beside it ("direct, then
// kprobe"; "kprobe, then direct").
func DeliveryOrder(first, second string) string { return first + ", then " + second }

// MissingOrders are the orders of goal that made never counted, in
// goal's order.
func MissingOrders(goal []string, made map[string]int) []string {
	var out []string
	for _, o := range goal {
		if made[o] == 0 {
			out = append(out, o)
		}
	}
	return out
}

// DeliveryEdges are the changes of the callsite's state that one user's
// attach or detach can make: what a delivery churn should cover. The
// states: nop; one-ops (the CALL_OPS literal's single ops, or an x86 ops
// trampoline); list (ftrace_ops_list_func); direct (a direct call alone);
// direct+ops.
func DeliveryEdges() []string {
	return []string{
		"nop -> one-ops", "one-ops -> nop",
		"one-ops -> list", "list -> one-ops",
		"nop -> direct", "direct -> nop",
		"direct -> direct+ops", "direct+ops -> direct",
		"one-ops -> direct+ops", "direct+ops -> one-ops",
		"list -> direct+ops", "direct+ops -> list",
	}
}

// DeliveryUser is one user of the delivery oracle's callsite.
type DeliveryUser struct {
	Name     string `json:"name"`
	Attaches int    `json:"attaches"`
	Refused  int    `json:"refused,omitempty"`
	// Updates counts changes while attached: a BPF link update, an ops
	// filter change.
	Updates int `json:"updates,omitempty"`
	// Failed counts the user's findings (all of them: the agent emits
	// only the first few as events).
	Failed int `json:"failed,omitempty"`
	// Skipped says why the kernel cannot provide the user.
	Skipped string `json:"skipped,omitempty"`
}

// Preempt describes run-time preemption-model switching through
// /sys/kernel/debug/sched/preempt.
type Preempt struct {
	// Offered are the models the file lists; Initial is the one selected
	// when the agent started.
	Offered []string `json:"offered"`
	Initial string   `json:"initial,omitempty"`
	// Accepted are the models a write was accepted for; Rejected maps each
	// refused model to the errno of the refusal.
	Accepted []string          `json:"accepted"`
	Rejected map[string]string `json:"rejected,omitempty"`
	// Switches counts successful switches during the run; Errnos counts
	// failed ones by errno.
	Switches int            `json:"switches"`
	Errnos   map[string]int `json:"errnos,omitempty"`
	// Skipped says why there was no switching (no such file, disabled).
	Skipped string `json:"skipped,omitempty"`
}

// HotSet is the churn scenario's choice of functions.
type HotSet struct {
	// Functions are the hot functions, in the order they were chosen.
	Functions []string `json:"functions"`
	// SyscallPath are those of Functions found on the hammer's syscall
	// paths; the rest are a seeded sample of other candidates.
	SyscallPath []string `json:"syscall_path,omitempty"`
	// Exact is the exact-count oracle's function ("" when it cannot run).
	Exact string `json:"exact,omitempty"`
}

// Feature is the result of probing one optional kernel facility.
type Feature struct {
	Name      string `json:"name"`
	Supported bool   `json:"supported"`
	Errno     string `json:"errno,omitempty"`
	Msg       string `json:"msg,omitempty"`
}

// Bench is the bench scenario's report: numbers a kernel developer argues
// with, measured inside one boot. Under TCG absolute nanoseconds are not
// hardware numbers, so every figure comes with its ratio to the untraced
// baseline measured in the same boot. Every part is present; a part that
// did not run has Supported false and Skipped saying why (not requested,
// module missing, the kernel refused), and is never filled with guesses.
type Bench struct {
	// CPU is the CPU the timed threads were pinned to (-1 if pinning
	// failed).
	CPU     int           `json:"cpu"`
	Ops     *BenchOps     `json:"ops"`
	Syscall *BenchSyscall `json:"syscall"`
	Scaling *BenchScaling `json:"scaling"`
	Multi   *BenchMulti   `json:"multi"`
	// MultiLive is absent from reports written before it existed.
	MultiLive *BenchMultiLive `json:"multi_live,omitempty"`
	Wakeup    *BenchWakeup    `json:"wakeup"`
}

// BenchMultiLive is the cost of one per-link trampoline's attach and
// detach while a tracing_multi population of each size is live (seed
// 001's way of reaching tens of thousands of functions): the population
// grows to each size in turn, and at each the same per-link functions,
// never in the population, attach and detach.
type BenchMultiLive struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// Kind is the population's link kind: tracing_multi, or kprobe_multi
	// where the kernel refused tracing_multi (TracingRefused says how).
	Kind           string `json:"kind,omitempty"`
	TracingRefused string `json:"tracing_refused,omitempty"`
	// Samples is how many per-link trampolines each point attaches and
	// detaches.
	Samples int              `json:"samples"`
	Points  []MultiLivePoint `json:"points,omitempty"`
	// Detach is the population's detach at the end, every link closed.
	Detach *Phase `json:"detach,omitempty"`
}

// MultiLivePoint is one population size of BenchMultiLive.
type MultiLivePoint struct {
	// Live is how many functions the tracing_multi links held while the
	// samples ran; Grow is the attach that brought the population to it.
	Live int   `json:"live"`
	Grow Phase `json:"grow"`
	// Link is the samples' load, attach and detach, with their
	// distributions and, at the profiled sizes, their profiles; its N is
	// the sample count.
	Link BenchScalingPoint `json:"link"`
}

// BenchOps is the per-call overhead of ftrace_ops on one function, measured
// by the kernel's samples/ftrace/ftrace-ops.ko in its init.
type BenchOps struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// Module is the module file loaded; Calls its nr_function_calls; Runs
	// how many loads each configuration got.
	Module string `json:"module,omitempty"`
	Calls  int    `json:"calls,omitempty"`
	Runs   int    `json:"runs,omitempty"`
	// Baseline has no ops at all (nr_ops_relevant=0 nr_ops_irrelevant=0):
	// the cost of the untraced call loop, the denominator of every Ratio.
	Baseline *BenchOpsPoint  `json:"baseline,omitempty"`
	Points   []BenchOpsPoint `json:"points,omitempty"`
}

// BenchOpsPoint is one ftrace-ops configuration.
type BenchOpsPoint struct {
	Relevant   int  `json:"relevant"`
	Irrelevant int  `json:"irrelevant"`
	SaveRegs   bool `json:"save_regs"`
	// NsPerCall is the median over the runs of total/calls, in ns;
	// BestNs the fastest run; RunsNs lists each run's value.
	NsPerCall float64   `json:"ns_per_call"`
	BestNs    float64   `json:"best_ns,omitempty"`
	RunsNs    []float64 `json:"runs_ns,omitempty"`
	// Ratio is NsPerCall over the baseline's, BestRatio BestNs over the
	// baseline's (0 when there is no baseline). Under TCG with one host
	// thread for all vCPUs, a run is slowed by whatever the other vCPUs
	// do at the time, so the fastest runs are the steadier comparison.
	Ratio     float64 `json:"ratio"`
	BestRatio float64 `json:"best_ratio,omitempty"`
	// Tracee is the function the module timed, as %ps printed it.
	Tracee string `json:"tracee,omitempty"`
	// Note repeats what the module said about the configuration, e.g. that
	// the kernel cannot save registers (save_regs then measured without).
	Note string `json:"note,omitempty"`
	// Error says why the point has no number.
	Error string `json:"error,omitempty"`
}

// BenchSyscall is the cost of one getppid() from user space with its kernel
// entry function in various traced states.
type BenchSyscall struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// Syscall is the syscall timed; Function its kernel entry function.
	Syscall  string `json:"syscall,omitempty"`
	Function string `json:"function,omitempty"`
	// Calls per timed run, Runs per state.
	Calls  int                 `json:"calls,omitempty"`
	Runs   int                 `json:"runs,omitempty"`
	States []BenchSyscallState `json:"states,omitempty"`
}

// BenchSyscallState is one state of the entry function: "baseline",
// "fentry", "fentry2", "fentry_fexit", "function_tracer", "kprobe",
// "bpf_kprobe", and "baseline_end" (the baseline again, to show drift).
type BenchSyscallState struct {
	Name string `json:"name"`
	// NsPerCall is the median over the runs, BestNs the fastest run.
	NsPerCall float64 `json:"ns_per_call,omitempty"`
	BestNs    float64 `json:"best_ns,omitempty"`
	// Ratio is NsPerCall over the baseline's, BestRatio BestNs over the
	// baseline's (see BenchOpsPoint for why both).
	Ratio     float64 `json:"ratio,omitempty"`
	BestRatio float64 `json:"best_ratio,omitempty"`
	Skipped   string  `json:"skipped,omitempty"`
}

// BenchScaling is the attach/detach cost of N fentry trampolines, each N
// attached fresh and fully detached in the same boot.
type BenchScaling struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// Candidates bounds N: requested counts above it were capped.
	Candidates int                 `json:"candidates,omitempty"`
	Points     []BenchScalingPoint `json:"points,omitempty"`
	// AttachExponent and DetachExponent fit total seconds = c·N^k over
	// the points (least squares in log-log space): 1 is linear, 2
	// quadratic; 0 with fewer than two points.
	AttachExponent float64 `json:"attach_exponent,omitempty"`
	DetachExponent float64 `json:"detach_exponent,omitempty"`
}

// BenchScalingPoint is one N of the scaling curve. Seconds are wall time of
// the whole phase (every operation, timing and event included).
type BenchScalingPoint struct {
	N        int `json:"n"`
	Loaded   int `json:"loaded"`
	Attached int `json:"attached"`
	Detached int `json:"detached"`

	LoadSeconds   float64 `json:"load_seconds"`
	AttachSeconds float64 `json:"attach_seconds"`
	DetachSeconds float64 `json:"detach_seconds"`
	// Attach and Detach are the per-trampoline distributions.
	Attach Latency `json:"attach"`
	Detach Latency `json:"detach"`
	// AttachRatio and DetachRatio are the cost per operation relative to
	// the first point's: (seconds/N) / (seconds0/N0). A curve above 1
	// grows faster than linearly.
	AttachRatio float64 `json:"attach_ratio"`
	DetachRatio float64 `json:"detach_ratio"`
	// Errnos counts failures as "<phase>:<errno>".
	Errnos map[string]int `json:"errnos,omitempty"`
	// MemoryKB is the guest memory the N programs and trampolines held:
	// MemAvailable plus the agent's own resident memory, before the load
	// minus after the attach, in KiB, each read once the guest stopped
	// giving memory back (the previous point's deferred frees, the
	// agent's own heap). The agent's memory is left out: what it let go
	// meanwhile made small points negative.
	MemoryKB int64 `json:"memory_kb,omitempty"`
	// AttachProfile and DetachProfile say where the phase's time went,
	// at the counts the bench profiles (option profile).
	AttachProfile *Profile `json:"attach_profile,omitempty"`
	DetachProfile *Profile `json:"detach_profile,omitempty"`
}

// Profile is where one thread's wall time went during a profiled
// operation, from the kernel's own profilers inside the guest
// (stress/profile): on-CPU time sampled with kernel stacks, off-CPU time
// measured from each switch out to the switch back in. Costs sort it by
// kind, Centres by the functions that spent it.
type Profile struct {
	// WallSeconds is the time measured around the operation;
	// OnCPUSeconds the thread's CPU time (the cpu-clock count, exact),
	// SampledSeconds what the samples covered of it (periods × samples:
	// they say how it divides), OffCPUSeconds the measured time off the
	// CPU, asleep or preempted.
	WallSeconds    float64 `json:"wall_seconds"`
	OnCPUSeconds   float64 `json:"on_cpu_seconds"`
	SampledSeconds float64 `json:"sampled_seconds"`
	OffCPUSeconds  float64 `json:"off_cpu_seconds"`
	// Coverage is (on + off) / wall; AddsUp says it is within Margin of
	// 1. A profile that does not add up is shown as it is.
	Coverage float64 `json:"coverage"`
	Margin   float64 `json:"margin"`
	AddsUp   bool    `json:"adds_up"`
	// PeriodMicros is the on-CPU sampling period.
	PeriodMicros int `json:"period_us"`
	Samples      int `json:"samples"`
	Switches     int `json:"switches"`
	// Throttled counts the kernel throttling the sampling.
	Throttled int `json:"throttled,omitempty"`
	// Lost counts records the kernel dropped (ring full).
	Lost uint64 `json:"lost,omitempty"`
	// Costs is the time per kind of cost, largest first; Centres the
	// largest cost centres ("<function> ← <caller>").
	Costs   []ProfileCost `json:"costs,omitempty"`
	Centres []ProfileCost `json:"centres,omitempty"`
	// Error says why the profile is partial or missing.
	Error string `json:"error,omitempty"`
}

// ProfileCost is one kind of cost or one cost centre of a Profile.
type ProfileCost struct {
	// Key is the kind ("rcu", "text", "ftrace", ...); Name what it is,
	// or for a centre the function and its caller.
	Key  string `json:"key"`
	Name string `json:"name"`
	// Seconds is the time, OffCPUSeconds the part of it off the CPU,
	// Share its fraction of the wall time.
	Seconds       float64 `json:"seconds"`
	OffCPUSeconds float64 `json:"off_cpu_seconds,omitempty"`
	Share         float64 `json:"share"`
}

// BenchMulti compares one multi-function link over N functions with N
// single fentry links.
type BenchMulti struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// TracingMulti is BPF_TRACE_FENTRY_MULTI (a BPF_LINK_TYPE_TRACING_MULTI
	// link); KprobeMulti is BPF_TRACE_KPROBE_MULTI (fprobe).
	TracingMulti BenchMultiLink `json:"tracing_multi"`
	KprobeMulti  BenchMultiLink `json:"kprobe_multi"`
}

// BenchMultiLink is one kind of multi link.
type BenchMultiLink struct {
	Supported bool   `json:"supported"`
	Skipped   string `json:"skipped,omitempty"`
	// Errno is the kernel's answer when it refused.
	Errno  string            `json:"errno,omitempty"`
	Points []BenchMultiPoint `json:"points,omitempty"`
}

// BenchMultiPoint is one link over N functions.
type BenchMultiPoint struct {
	N             int     `json:"n"`
	AttachSeconds float64 `json:"attach_seconds"`
	DetachSeconds float64 `json:"detach_seconds"`
	// AttachRatio and DetachRatio compare with N single links from the
	// scaling part (multi/singles; 0 when scaling did not measure this N).
	AttachRatio float64 `json:"attach_ratio,omitempty"`
	DetachRatio float64 `json:"detach_ratio,omitempty"`
	Error       string  `json:"error,omitempty"`
	// AttachProfile and DetachProfile say where the link's time went,
	// at the counts the bench profiles (option profile).
	AttachProfile *Profile `json:"attach_profile,omitempty"`
	DetachProfile *Profile `json:"detach_profile,omitempty"`
}

// BenchWakeup is cyclictest-style wakeup latency: a SCHED_FIFO thread on one
// CPU sleeping to absolute 1 ms deadlines, quiet and then under an attach
// storm.
type BenchWakeup struct {
	Supported bool           `json:"supported"`
	Skipped   string         `json:"skipped,omitempty"`
	Period    Duration       `json:"period"`
	For       Duration       `json:"for"`
	Priority  int            `json:"priority"`
	Quiet     *WakeupSummary `json:"quiet,omitempty"`
	Storm     *WakeupSummary `json:"storm,omitempty"`
	// Ratio is storm over quiet, per percentile.
	Ratio *WakeupPercentiles `json:"ratio,omitempty"`
	// StormAttaches and StormDetaches count the trampoline operations
	// the storm made while the storm run measured, StormErrors its
	// failures: a storm that did nothing would make the ratio a lie.
	StormAttaches int `json:"storm_attaches,omitempty"`
	StormDetaches int `json:"storm_detaches,omitempty"`
	StormErrors   int `json:"storm_errors,omitempty"`
}

// WakeupSummary is one wakeup-latency histogram: wake time minus intended
// time, in microseconds.
type WakeupSummary struct {
	Samples int64 `json:"samples"`
	// Overruns counts periods missed entirely (the thread woke after the
	// next deadline had passed).
	Overruns int64 `json:"overruns,omitempty"`
	WakeupPercentiles
}

// WakeupPercentiles are latency percentiles in microseconds (or, in
// BenchWakeup.Ratio, ratios).
type WakeupPercentiles struct {
	Min  float64 `json:"min_us"`
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p99_9_us"`
	Max  float64 `json:"max_us"`
}

// Duration is a time.Duration that marshals as fractional milliseconds, which
// is what a reader of result files wants to see.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want milliseconds as a number: %w", err)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// Scenario names a guest workload: the agent's scenario option, the
// matrix's scenario, result.json's scenario and fth soak's --scenario all
// use these spellings.
type Scenario string

// The scenarios.
const (
	// ScenarioStorm attaches n trampolines, holds them with the hammer
	// running, and detaches them: the original workload.
	ScenarioStorm Scenario = "storm"
	// ScenarioChurn drives a small hot set of functions through callsite
	// states (fentry, several fentry/fexit, function tracer, kprobe) while
	// other tracers toggle and the preemption model switches, with oracles
	// checking every hit.
	ScenarioChurn Scenario = "churn"
	// ScenarioBench measures instead of stressing: ftrace_ops per-call
	// overhead, syscall cost under tracers, attach/detach scaling, multi
	// links and wakeup latency, reported as one bench event.
	ScenarioBench Scenario = "bench"
	// ScenarioRace injects preemptions at exact instructions (a BPF
	// trampoline's first, a callsite's second) through the host's gdbstub,
	// and races a detach or a repatch against the preempted task.
	ScenarioRace Scenario = "race"
	// ScenarioCampaign is the default cell: in one boot, the storm's
	// background trampolines attached and kept, the churn with its
	// oracles on top of them, race injections, then the timed detach
	// sample (campaign.go names the stages).
	ScenarioCampaign Scenario = "campaign"
	// ScenarioRepro runs one scripted order of operations that reproduces
	// a known finding a random churn meets rarely (the repro option names
	// it).
	ScenarioRepro Scenario = "repro"
	// ScenarioStandalone runs nothing of the harness's own: only a known
	// finding's standalone reproducer (results/known/repro/<name>/run.sh,
	// a shell script and its modules), as a maintainer would run it.
	ScenarioStandalone Scenario = "standalone"
)

// legacyStorm is how results and matrix files before the one spelling
// named the storm; it is still read.
const legacyStorm = "attach-storm"

// Scenarios lists every scenario, storm first. It is a new slice.
func Scenarios() []Scenario {
	return []Scenario{ScenarioStorm, ScenarioChurn, ScenarioBench, ScenarioRace, ScenarioCampaign, ScenarioRepro, ScenarioStandalone}
}

// ParseScenario reads a scenario name; "" is the storm, the default.
func ParseScenario(s string) (Scenario, error) {
	switch s {
	case "", legacyStorm:
		return ScenarioStorm, nil
	}
	for _, sc := range Scenarios() {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", fmt.Errorf("unknown scenario %q: want storm, churn, bench, race, campaign or repro", s)
}
