// Package options defines the agent's options and reads them from two sources:
// command-line flags and the kernel command line, where a key fth.<name>=<value>
// sets the option <name>. The host passes everything on the kernel command
// line so that a run is reproduced by one command line; flags exist for running
// the agent by hand.
//
// Precedence, lowest first: defaults, kernel command line, flags.
package options

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/results/event"
)

// All is the value of Options.N and Options.Detach meaning "every one".
const All = -1

// CmdlinePrefix starts every agent key on the kernel command line.
const CmdlinePrefix = "fth."

// Crash modes.
const (
	// CrashNone does not crash the guest.
	CrashNone = ""
	// CrashSysrqC writes 'c' to /proc/sysrq-trigger after the attach phase,
	// so that the host's crash detection can be tested against a known panic.
	CrashSysrqC = "sysrq-c"
	// CrashHungTask loads fth_target after the attach phase, lowers the
	// hung task timeout to HungTaskTimeout and leaves one agent thread
	// asleep in D state, then goes on as usual: a partial hang, which the
	// host must report and end the cell on while the agent still talks.
	CrashHungTask = "hung-task"
)

const crashModes = `want "none", "sysrq-c" or "hung-task"`

// HungTaskTimeout is what crash=hung-task sets kernel.hung_task_timeout_secs
// to, in seconds, so the report comes within seconds rather than minutes.
const HungTaskTimeout = 2

// Sabotage modes: test-only ways to make an oracle see what it must
// catch, so that a test can show the oracle fails the cell.
const (
	SabotageNone = ""
	// SabotageWrongIP makes every func-ip program expect an address off
	// by SabotageSkew from the one it is attached to.
	SabotageWrongIP = "wrong-ip"
	// SabotageSkipCount makes each exact-count window make one call fewer
	// than it expects.
	SabotageSkipCount = "skip-count"
)

// Scenarios (results/event defines them, for host and guest alike).
const (
	ScenarioStorm = event.ScenarioStorm
	ScenarioChurn = event.ScenarioChurn
	ScenarioBench = event.ScenarioBench
)

// Parts of the bench scenario, in the order it runs them.
const (
	BenchOps     = "ops"
	BenchSyscall = "syscall"
	BenchScaling = "scaling"
	BenchMulti   = "multi"
	BenchWakeup  = "wakeup"
)

// BenchParts lists every bench part in run order. It is never modified.
var BenchParts = []string{BenchOps, BenchSyscall, BenchScaling, BenchMulti, BenchWakeup}

// OpsPoint is one configuration of the kernel's ftrace-ops sample module:
// how many ftrace_ops trace the timed function (Relevant) and another one
// (Irrelevant), and whether they ask for full pt_regs (SaveRegs). Its text
// form is "R:I", or "R:I:regs" with SaveRegs.
type OpsPoint struct {
	Relevant   int
	Irrelevant int
	SaveRegs   bool
}

// String is the text form opssweep takes.
func (p OpsPoint) String() string {
	s := strconv.Itoa(p.Relevant) + ":" + strconv.Itoa(p.Irrelevant)
	if p.SaveRegs {
		s += ":regs"
	}
	return s
}

// DefaultOpsSweep is the ftrace-ops sweep run unless opssweep says
// otherwise: small, because every point is a module load per run, yet
// enough to show the single-op fast path against the list function
// (relevant 2, 10), the cost irrelevant ops put on every callsite, and
// saving full registers.
var DefaultOpsSweep = []OpsPoint{{1, 0, false}, {2, 0, false}, {10, 0, false}, {1, 10, false}, {1, 100, false}, {1, 0, true}}

// FullOpsSweep is the cross product opssweep=full runs: relevant 1, 2, 10 by
// irrelevant 0, 10, 100 by save_regs off and on.
func FullOpsSweep() []OpsPoint {
	var out []OpsPoint
	for _, regs := range []bool{false, true} {
		for _, irr := range []int{0, 10, 100} {
			for _, rel := range []int{1, 2, 10} {
				out = append(out, OpsPoint{rel, irr, regs})
			}
		}
	}
	return out
}

// maxOps bounds nr_ops_relevant and nr_ops_irrelevant: each op is an
// ftrace_ops registration, which patches text, so thousands would take
// minutes under TCG for no new information.
const maxOps = 1000

// ParseOpsSweep parses a comma-separated list of OpsPoint text forms, or
// "full" for FullOpsSweep. An empty list is valid: the baseline alone.
func ParseOpsSweep(v string) ([]OpsPoint, error) {
	if v == "full" {
		return FullOpsSweep(), nil
	}
	var out []OpsPoint
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		f := strings.Split(item, ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "regs") {
			return nil, fmt.Errorf("%q: want relevant:irrelevant or relevant:irrelevant:regs", item)
		}
		rel, err1 := strconv.Atoi(f[0])
		irr, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || rel < 0 || irr < 0 || rel > maxOps || irr > maxOps {
			return nil, fmt.Errorf("%q: op counts must be integers from 0 to %d", item, maxOps)
		}
		out = append(out, OpsPoint{Relevant: rel, Irrelevant: irr, SaveRegs: len(f) == 3})
	}
	return out, nil
}

func formatOpsSweep(ps []OpsPoint) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// parseParts parses benchparts: known names, comma-separated, or "all".
// The result follows BenchParts order whatever the order given, so that a
// part that feeds another (scaling before multi) always runs first.
func parseParts(v string) ([]string, error) {
	if v == "all" {
		return slices.Clone(BenchParts), nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(BenchParts, p) {
			return nil, fmt.Errorf("unknown part %q (known: %s)", p, strings.Join(BenchParts, ","))
		}
		want[p] = true
	}
	var out []string
	for _, p := range BenchParts {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// parseCounts parses a comma-separated list of integers in [1, hi].
func parseCounts(v string, hi int) ([]int, error) {
	var out []int
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 || n > hi {
			return nil, fmt.Errorf("%q: want integers from 1 to %d", item, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

func formatCounts(ns []int) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Bounds of the bench options. maxCount is beyond any kernel's traceable
// function count; maxCalls keeps one timed run within seconds under TCG.
const (
	maxCount = 1 << 20
	maxCalls = 100_000_000
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
	// finding is reproduced on the function it names.
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
	// MaxArgs is the largest parameter count of a function to trace. The
	// kernel's limit depends on the architecture and version; 6 is safe
	// everywhere trampolines exist.
	MaxArgs int

	// Scenario is ScenarioStorm, ScenarioChurn or ScenarioBench. The
	// options below apply to churn only; in churn, N is the count of
	// background trampolines attached before the churn and detached (per
	// Detach) after it, and Hold is not used.
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
	// Hotplug is the period of CPU hotplug: one CPU offline for half of
	// it, back online for the other half; 0 (the default) disables it.
	Hotplug time.Duration
	// RT is how many hammer threads run SCHED_FIFO/SCHED_RR.
	RT int
	// TimerPeriod arms a timerfd of this period in every hammer thread; 0
	// disables it.
	TimerPeriod time.Duration
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
	// Sabotage is a test-only mode (SabotageWrongIP, SabotageSkipCount).
	Sabotage string
	// Board turns the VM into a stand-in SSH board instead of running a
	// scenario: network up at BoardAddr, u-root's sshd on port 22 with
	// the keys under /etc/fth, and no poweroff.
	Board     bool
	BoardAddr string
	// StdinWatch stops the run when stdin reaches EOF: on a board the
	// agent runs in an SSH session whose stdin the harness holds, so a
	// dropped session stops the stress instead of leaving it burning.
	StdinWatch bool
	// KmsgStream copies /dev/kmsg to stdout instead of running a
	// scenario, until stdin closes: the soak's kernel log stream. A plain
	// `cat /dev/kmsg` outlives the session on sshds that keep the output
	// pipe open until the command exits (u-root's), blocked on a full pipe.
	KmsgStream bool

	// The options below apply to the bench scenario only.
	//
	// BenchParts are the parts to run, in BenchParts order.
	BenchParts []string
	// OpsSweep are the ftrace-ops configurations measured besides the
	// baseline (no ops at all), which always runs.
	OpsSweep []OpsPoint
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
	// WakeupFor is how long each wakeup-latency run (quiet, storm) lasts.
	WakeupFor time.Duration
}

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

		Scenario:     ScenarioStorm,
		Hot:          16,
		Churn:        60 * time.Second,
		Workers:      2,
		ExactCalls:   1000,
		ExactEvery:   5 * time.Second,
		PreemptEvery: 3 * time.Second,
		Mixed:        true,
		// RT threads and timerfds are opt-in: on riscv64 under TCG they
		// starved the storm's SCHED_OTHER threads into a false liveness
		// failure. The churn tests turn them on (rt=2, timerperiod=500µs).
		RT:          0,
		TimerPeriod: 0,
		Modules:     true,
		ModHold:     3 * time.Second,
		BoardAddr:   "10.0.2.15/24",

		BenchParts:   slices.Clone(BenchParts),
		OpsSweep:     slices.Clone(DefaultOpsSweep),
		OpsCalls:     100_000,
		SyscallCalls: 100_000,
		ScalingN:     []int{100, 500, 1000, 2000, 5000, 10000},
		MultiN:       []int{100, 1000},
		WakeupFor:    10 * time.Second,
	}
}

// field describes one option: how to set it from text and how to print it
// back so that printing then setting gives the same value.
type field struct {
	name   string
	usage  string
	isBool bool
	set    func(o *Options, v string) error
	get    func(o *Options) string
}

// fields is the option table shared by flags, the kernel command line and
// Args. It is never modified.
var fields = []field{
	{
		name:  "n",
		usage: "trampolines to attach: a `count`, or \"all\" for every candidate",
		set:   func(o *Options, v string) (err error) { o.N, err = countOrAll(v); return err },
		get:   func(o *Options) string { return formatCountOrAll(o.N) },
	},
	{
		name:  "funcs",
		usage: "comma-separated `functions` to attach instead of a seeded selection of n (filters bypassed)",
		set: func(o *Options, v string) error {
			o.Funcs = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.Funcs = append(o.Funcs, f)
				}
			}
			return nil
		},
		get: func(o *Options) string { return strings.Join(o.Funcs, ",") },
	},
	{
		name:  "seed",
		usage: "random `seed`; 0 picks one from the clock (reported back in hello)",
		set: func(o *Options, v string) error {
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return errors.New("want a 64-bit integer")
			}
			o.Seed = s
			return nil
		},
		get: func(o *Options) string { return strconv.FormatInt(o.Seed, 10) },
	},
	{
		name:  "hold",
		usage: "`duration` to keep everything attached with the hammer running",
		set:   func(o *Options, v string) (err error) { o.Hold, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.Hold.String() },
	},
	{
		name:  "detach",
		usage: "links to detach with timing: \"all\", or a `count` (the rest stay attached until reboot)",
		set:   func(o *Options, v string) (err error) { o.Detach, err = countOrAll(v); return err },
		get:   func(o *Options) string { return formatCountOrAll(o.Detach) },
	},
	{
		name:  "threads",
		usage: "hammer `threads`; the default is 2 per CPU",
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 4096 {
				return errors.New("want an integer from 1 to 4096")
			}
			o.Threads = n
			return nil
		},
		get: func(o *Options) string { return strconv.Itoa(o.Threads) },
	},
	{
		name:  "stall",
		usage: "a hammer thread without progress for longer than this `duration` is reported stalled",
		set:   func(o *Options, v string) (err error) { o.Stall, err = duration(v, true); return err },
		get:   func(o *Options) string { return o.Stall.String() },
	},
	{
		name:  "loglevel",
		usage: "console log `level` (1-8) to set at start, 0 to keep init's; the default is 7 in the harness VM (u-root's 5 hides KERN_INFO stacks of hung-task and stall reports), 0 elsewhere",
		set:   func(o *Options, v string) (err error) { o.LogLevel, err = intRange(v, 0, 8); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.LogLevel) },
	},
	{
		name:  "crash",
		usage: "`mode`: \"none\"; \"sysrq-c\" to crash the kernel after attaching, or \"hung-task\" to leave one agent thread in D state then (tests crash and hang detection)",
		set: func(o *Options, v string) error {
			switch v {
			case "", "none":
				o.Crash = CrashNone
			case CrashSysrqC, CrashHungTask:
				o.Crash = v
			default:
				return errors.New(crashModes)
			}
			return nil
		},
		get: func(o *Options) string {
			if o.Crash == CrashNone {
				return "none"
			}
			return o.Crash
		},
	},
	{
		name:  "events",
		usage: "event output `path`: \"auto\" (virtio-serial port fth.agent, else stdout), \"-\" for stdout, or a file",
		set: func(o *Options, v string) error {
			if v == "auto" {
				v = ""
			}
			o.Events = v
			return nil
		},
		get: func(o *Options) string {
			if o.Events == "" {
				return "auto"
			}
			return o.Events
		},
	},
	{
		name:   "poweroff",
		usage:  "reboot the guest after the last event; the default is true as PID 1's child in the VM",
		isBool: true,
		set: func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			o.Poweroff = b
			return nil
		},
		get: func(o *Options) string { return strconv.FormatBool(o.Poweroff) },
	},
	{
		name:  "maxargs",
		usage: "largest parameter `count` of a traced function",
		set: func(o *Options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > MaxArgsLimit {
				return fmt.Errorf("want an integer from 0 to %d", MaxArgsLimit)
			}
			o.MaxArgs = n
			return nil
		},
		get: func(o *Options) string { return strconv.Itoa(o.MaxArgs) },
	},
	{
		name:  "scenario",
		usage: "`workload`: \"storm\" (attach n, hold, detach), \"churn\" (drive a hot set through callsite states with oracles) or \"bench\" (measure overheads)",
		set: func(o *Options, v string) error {
			switch sc := event.Scenario(v); sc {
			case ScenarioStorm, ScenarioChurn, ScenarioBench:
				o.Scenario = sc
				return nil
			}
			return errors.New(`want "storm", "churn" or "bench"`)
		},
		get: func(o *Options) string { return string(o.Scenario) },
	},
	{
		name:  "hot",
		usage: "churn: `count` of hot functions driven through the callsite states",
		set:   func(o *Options, v string) (err error) { o.Hot, err = intRange(v, 1, maxHot); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.Hot) },
	},
	{
		name:  "churn",
		usage: "churn: `duration` of the churn; 0 runs until cycles",
		set:   func(o *Options, v string) (err error) { o.Churn, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.Churn.String() },
	},
	{
		name:  "cycles",
		usage: "churn: state-sequence `count` per hot function; 0 runs until the churn duration elapses",
		set:   func(o *Options, v string) (err error) { o.Cycles, err = intRange(v, 0, math.MaxInt32); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.Cycles) },
	},
	{
		name:  "workers",
		usage: "churn: goroutines making transitions concurrently (`count`)",
		set:   func(o *Options, v string) (err error) { o.Workers, err = intRange(v, 1, maxWorkers); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.Workers) },
	},
	{
		name:  "exactcalls",
		usage: "churn: calls per exact-count oracle window (`count`); 0 disables the oracle",
		set:   func(o *Options, v string) (err error) { o.ExactCalls, err = intRange(v, 0, math.MaxInt32); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.ExactCalls) },
	},
	{
		name:  "exactevery",
		usage: "churn: `duration` between exact-count oracle windows",
		set:   func(o *Options, v string) (err error) { o.ExactEvery, err = duration(v, true); return err },
		get:   func(o *Options) string { return o.ExactEvery.String() },
	},
	{
		name:  "preemptevery",
		usage: "churn: `duration` between preemption-model switches; 0 disables switching",
		set:   func(o *Options, v string) (err error) { o.PreemptEvery, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.PreemptEvery.String() },
	},
	{
		name:   "mixed",
		usage:  "churn: toggle function/function_graph tracers and kprobes/kretprobes alongside the churn",
		isBool: true,
		set: func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			o.Mixed = b
			return nil
		},
		get: func(o *Options) string { return strconv.FormatBool(o.Mixed) },
	},
	{
		name:  "hotplug",
		usage: "churn: `period` of CPU hotplug: a CPU goes offline for half of it, online for the other half; 0 disables it",
		set:   func(o *Options, v string) (err error) { o.Hotplug, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.Hotplug.String() },
	},
	{
		name:  "rt",
		usage: "hammer threads running SCHED_FIFO/SCHED_RR at low RT priorities (`count`)",
		set:   func(o *Options, v string) (err error) { o.RT, err = intRange(v, 0, 4096); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.RT) },
	},
	{
		name:  "timerperiod",
		usage: "`period` of a timerfd each hammer thread arms and reads; 0 disables it",
		set:   func(o *Options, v string) (err error) { o.TimerPeriod, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.TimerPeriod.String() },
	},
	{
		name:   "modules",
		usage:  "churn: load and unload the modules under /lib/modules/fth (ftrace-direct samples, fth_target) in a loop",
		isBool: true,
		set: func(o *Options, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return errors.New("want true or false")
			}
			o.Modules = b
			return nil
		},
		get: func(o *Options) string { return strconv.FormatBool(o.Modules) },
	},
	{
		name:  "modlist",
		usage: "churn: comma-separated module `names` to cycle (default: every module under /lib/modules/fth but ftrace_ops)",
		set: func(o *Options, v string) error {
			o.ModList = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					o.ModList = append(o.ModList, strings.ReplaceAll(f, "-", "_"))
				}
			}
			return nil
		},
		get: func(o *Options) string { return strings.Join(o.ModList, ",") },
	},
	{
		name:  "modhold",
		usage: "churn: longest `duration` a cycled module stays loaded",
		set:   func(o *Options, v string) (err error) { o.ModHold, err = duration(v, true); return err },
		get:   func(o *Options) string { return o.ModHold.String() },
	},
	{
		name:   "board",
		usage:  "stand in for an SSH board: bring up the network, run sshd, never power off",
		isBool: true,
		set: func(o *Options, v string) (err error) {
			o.Board, err = parseBool(v)
			return err
		},
		get: func(o *Options) string { return strconv.FormatBool(o.Board) },
	},
	{
		name:  "boardaddr",
		usage: "board mode: eth0's `address/prefix` (QEMU user networking's guest address by default; the gateway is .2)",
		set:   func(o *Options, v string) error { o.BoardAddr = v; return nil },
		get:   func(o *Options) string { return o.BoardAddr },
	},
	{
		name:   "stdinwatch",
		usage:  "stop the run when stdin reaches EOF (the harness's SSH session dropped)",
		isBool: true,
		set: func(o *Options, v string) (err error) {
			o.StdinWatch, err = parseBool(v)
			return err
		},
		get: func(o *Options) string { return strconv.FormatBool(o.StdinWatch) },
	},
	{
		name:   "kmsgstream",
		usage:  "copy /dev/kmsg to stdout until stdin closes, instead of a scenario (the soak's kernel log stream; implies stdinwatch)",
		isBool: true,
		set: func(o *Options, v string) (err error) {
			o.KmsgStream, err = parseBool(v)
			return err
		},
		get: func(o *Options) string { return strconv.FormatBool(o.KmsgStream) },
	},
	{
		name:  "benchparts",
		usage: "bench: comma-separated `parts` to run (ops, syscall, scaling, multi, wakeup), or \"all\"",
		set:   func(o *Options, v string) (err error) { o.BenchParts, err = parseParts(v); return err },
		get:   func(o *Options) string { return strings.Join(o.BenchParts, ",") },
	},
	{
		name:  "opssweep",
		usage: "bench: ftrace-ops `configurations` besides the baseline: relevant:irrelevant[:regs],... or \"full\"",
		set:   func(o *Options, v string) (err error) { o.OpsSweep, err = ParseOpsSweep(v); return err },
		get:   func(o *Options) string { return formatOpsSweep(o.OpsSweep) },
	},
	{
		name:  "opscalls",
		usage: "bench: nr_function_calls of each ftrace-ops load (`count`)",
		set:   func(o *Options, v string) (err error) { o.OpsCalls, err = intRange(v, 1, maxCalls); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.OpsCalls) },
	},
	{
		name:  "syscallcalls",
		usage: "bench: getppid calls per timed run (`count`)",
		set:   func(o *Options, v string) (err error) { o.SyscallCalls, err = intRange(v, 1, maxCalls); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.SyscallCalls) },
	},
	{
		name:  "scalingn",
		usage: "bench: comma-separated trampoline `counts` of the attach/detach scaling curve",
		set:   func(o *Options, v string) (err error) { o.ScalingN, err = parseCounts(v, maxCount); return err },
		get:   func(o *Options) string { return formatCounts(o.ScalingN) },
	},
	{
		name:  "multin",
		usage: "bench: comma-separated function `counts` of the tracing_multi and kprobe_multi links",
		set:   func(o *Options, v string) (err error) { o.MultiN, err = parseCounts(v, maxCount); return err },
		get:   func(o *Options) string { return formatCounts(o.MultiN) },
	},
	{
		name:  "wakeupfor",
		usage: "bench: `duration` of each wakeup-latency run (quiet, then under the attach storm)",
		set:   func(o *Options, v string) (err error) { o.WakeupFor, err = duration(v, true); return err },
		get:   func(o *Options) string { return o.WakeupFor.String() },
	},
	{
		name:  "sabotage",
		usage: "test only: \"wrong-ip\" or \"skip-count\" makes the func-ip or exact-count oracle see a failure",
		set: func(o *Options, v string) error {
			if v == "none" {
				v = SabotageNone
			}
			o.Sabotage = v
			return nil
		},
		get: func(o *Options) string {
			if o.Sabotage == SabotageNone {
				return "none"
			}
			return o.Sabotage
		},
	},
}

// Bounds of the churn options. maxHot keeps the per-function oracle map and
// the tracefs filters small; maxWorkers is far beyond what 2 vCPUs use.
const (
	maxHot     = 1024
	maxWorkers = 64
)

func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New("want true or false")
	}
	return b, nil
}

// intRange parses an integer in [lo, hi].
func intRange(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func lookup(name string) (*field, bool) {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i], true
		}
	}
	return nil, false
}

func countOrAll(v string) (int, error) {
	if v == "all" {
		return All, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errors.New(`want "all" or an integer >= 0`)
	}
	return n, nil
}

func formatCountOrAll(n int) string {
	if n == All {
		return "all"
	}
	return strconv.Itoa(n)
}

func duration(v string, positive bool) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, errors.New("want a duration such as 500ms, 5s or 2m")
	case positive && d <= 0:
		return 0, errors.New("want a duration > 0")
	case d < 0:
		return 0, errors.New("want a duration >= 0")
	}
	return d, nil
}

// Names returns the option names in table order.
func Names() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.name
	}
	return out
}

// ErrUnknownOption is wrapped by Set for a name the table does not have.
var ErrUnknownOption = errors.New("unknown option")

// Set sets the option name from its text form, as the flag or cmdline would.
func (o *Options) Set(name, value string) error {
	f, ok := lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownOption, name)
	}
	if err := f.set(o, value); err != nil {
		return fmt.Errorf("option %s=%q: %w", name, value, err)
	}
	return nil
}

// Validate checks values that a caller may have set without Set.
func (o *Options) Validate() error {
	var errs []error
	check := func(bad bool, name, msg string) {
		if bad {
			errs = append(errs, fmt.Errorf("option %s: %s", name, msg))
		}
	}
	check(o.N < All, "n", `want "all" or an integer >= 0`)
	check(o.Detach < All, "detach", `want "all" or an integer >= 0`)
	check(o.Hold < 0, "hold", "want a duration >= 0")
	check(o.Threads < 1 || o.Threads > 4096, "threads", "want an integer from 1 to 4096")
	check(o.Stall <= 0, "stall", "want a duration > 0")
	check(o.LogLevel < 0 || o.LogLevel > 8, "loglevel", "want an integer from 0 to 8")
	check(o.Crash != CrashNone && o.Crash != CrashSysrqC && o.Crash != CrashHungTask, "crash", crashModes)
	check(o.MaxArgs < 0 || o.MaxArgs > MaxArgsLimit, "maxargs", fmt.Sprintf("want an integer from 0 to %d", MaxArgsLimit))
	check(o.Scenario != ScenarioStorm && o.Scenario != ScenarioChurn && o.Scenario != ScenarioBench, "scenario", `want "storm", "churn" or "bench"`)
	check(o.Hot < 1 || o.Hot > maxHot, "hot", fmt.Sprintf("want an integer from 1 to %d", maxHot))
	check(o.Churn < 0, "churn", "want a duration >= 0")
	check(o.Cycles < 0, "cycles", "want an integer >= 0")
	check(o.Workers < 1 || o.Workers > maxWorkers, "workers", fmt.Sprintf("want an integer from 1 to %d", maxWorkers))
	check(o.ExactCalls < 0, "exactcalls", "want an integer >= 0")
	check(o.ExactEvery <= 0, "exactevery", "want a duration > 0")
	check(o.PreemptEvery < 0, "preemptevery", "want a duration >= 0")
	check(o.Hotplug < 0, "hotplug", "want a duration >= 0")
	check(o.RT < 0, "rt", "want an integer >= 0")
	check(o.TimerPeriod < 0, "timerperiod", "want a duration >= 0")
	check(o.ModHold <= 0, "modhold", "want a duration > 0")
	check(o.Sabotage != SabotageNone && o.Sabotage != SabotageWrongIP && o.Sabotage != SabotageSkipCount, "sabotage", `want "none", "wrong-ip" or "skip-count"`)
	check(o.OpsCalls < 1 || o.OpsCalls > maxCalls, "opscalls", fmt.Sprintf("want an integer from 1 to %d", maxCalls))
	check(o.SyscallCalls < 1 || o.SyscallCalls > maxCalls, "syscallcalls", fmt.Sprintf("want an integer from 1 to %d", maxCalls))
	check(o.WakeupFor <= 0, "wakeupfor", "want a duration > 0")
	for _, p := range o.BenchParts {
		check(!slices.Contains(BenchParts, p), "benchparts", fmt.Sprintf("unknown part %q", p))
	}
	for _, p := range o.OpsSweep {
		check(p.Relevant < 0 || p.Irrelevant < 0 || p.Relevant > maxOps || p.Irrelevant > maxOps, "opssweep", fmt.Sprintf("op counts must be from 0 to %d", maxOps))
	}
	for _, n := range append(slices.Clone(o.ScalingN), o.MultiN...) {
		check(n < 1 || n > maxCount, "scalingn/multin", fmt.Sprintf("want counts from 1 to %d", maxCount))
	}
	// Without either bound the churn would only end on a signal, and the
	// host would call that a hang.
	check(o.Scenario == ScenarioChurn && o.Churn == 0 && o.Cycles == 0, "churn", "churn=0 needs cycles > 0")
	return errors.Join(errs...)
}

// Args returns every option as name=value text. Setting each pair with Set
// (or passing fth.<name>=<value> on the kernel command line) reproduces o.
func (o *Options) Args() map[string]string {
	m := make(map[string]string, len(fields))
	for _, f := range fields {
		m[f.name] = f.get(o)
	}
	return m
}

// Cmdline formats o as kernel command-line keys, in table order, for a
// one-line reproduction.
func (o *Options) Cmdline() string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		v := f.get(o)
		if strings.ContainsAny(v, " \t\"") {
			v = `"` + v + `"`
		}
		parts = append(parts, CmdlinePrefix+f.name+"="+v)
	}
	return strings.Join(parts, " ")
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

// flagValue binds one option to a flag.FlagSet.
type flagValue struct {
	o *Options
	f *field
}

// String prints the current value, as flag.PrintDefaults shows it.
func (v flagValue) String() string {
	if v.o == nil {
		return ""
	}
	return v.f.get(v.o)
}

// Set parses s into the option.
func (v flagValue) Set(s string) error { return v.f.set(v.o, s) }

// IsBoolFlag lets -poweroff stand for -poweroff=true.
func (v flagValue) IsBoolFlag() bool { return v.f.isBool }

// PrintHelp writes every option with its usage and its default under env,
// as the agent's own flags show them: the host's `--agent-arg help`.
func PrintHelp(w io.Writer, env Env) {
	o := Defaults(env)
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(w)
	for i := range fields {
		fs.Var(flagValue{&o, &fields[i]}, fields[i].name, fields[i].usage)
	}
	fs.PrintDefaults()
}

// Parse returns the effective options: defaults from env, then fth.* keys from
// the kernel command line cmdline (the contents of /proc/cmdline), then args.
// Flag usage and errors go to output. A bad value is an error naming the key
// and where it came from.
func Parse(args []string, cmdline string, env Env, output io.Writer) (Options, error) {
	o := Defaults(env)

	for _, kv := range ParseCmdline(cmdline) {
		if err := o.applyCmdline(kv); err != nil {
			return o, err
		}
	}

	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(output)
	for i := range fields {
		fs.Var(flagValue{&o, &fields[i]}, fields[i].name, fields[i].usage)
	}
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("options: flags: %w", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("options: flags: unexpected argument %q", fs.Arg(0))
	}
	if err := o.Validate(); err != nil {
		return o, fmt.Errorf("options: %w", err)
	}
	return o, nil
}

func (o *Options) applyCmdline(kv KV) error {
	name := strings.TrimPrefix(kv.Key, CmdlinePrefix)
	f, ok := lookup(name)
	if !ok {
		// A typo must not silently fall back to a default: the run would
		// report results for options nobody asked for.
		return fmt.Errorf("options: cmdline %s: unknown key (known: %s%s)", kv.Key, CmdlinePrefix, strings.Join(Names(), ", "+CmdlinePrefix))
	}
	v := kv.Value
	if !kv.HasValue {
		if !f.isBool {
			return fmt.Errorf("options: cmdline %s: missing value (write %s=<value>)", kv.Key, kv.Key)
		}
		v = "true"
	}
	if err := f.set(o, v); err != nil {
		return fmt.Errorf("options: cmdline %s=%q: %w", kv.Key, v, err)
	}
	return nil
}
