package options

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
)

// The option table: one row per option, read by flags, the kernel
// command line, the host's check of --agent-arg and Args.

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
		usage: "`mode`: \"none\"; \"sysrq-c\" to crash the kernel after attaching, \"hung-task\" to leave one agent thread in D state then, \"rt-inversion\" to starve one agent thread behind another at SCHED_FIFO (tests crash, hang and harness-induced stall detection); \"lkdtm:<TYPE>\" or \"bug:<name>\" to make the kernel print one report (LKDTM, or fth_target.ko's injected bugs: kconfigs/debug/triage)",
		set: func(o *Options, v string) (err error) {
			o.Crash, err = parseCrash(v)
			return err
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
		set:    setBool(func(o *Options) *bool { return &o.Poweroff }),
		get:    getBool(func(o *Options) *bool { return &o.Poweroff }),
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
		name:  "racetarget",
		usage: "race scenario: `where` the task is preempted, a comma-separated list run in order with the injections shared: \"trampoline\" (each instruction of a BPF trampoline in turn; raceaction races it), \"opstramp\" (x86: each instruction of a function tracer instance's ftrace_ops trampoline; the tracer is switched off meanwhile), \"callsite\" (the second instruction of a disabled function entry; tracing is enabled meanwhile), \"int3\" (x86: the patcher held at each step of the INT3 patch of a callsite while a task runs it; a task that traps is held in the handler while the patcher runs on), \"callops\" (arm64, riscv64, ppc64le: each instruction of ftrace_caller from the load of the callsite's ops literal to the call of op->func; the function tracer instance whose ops it is is removed meanwhile), \"literal\" (arm64, riscv64, ppc64le: every write to the callsite's CALL_OPS literal and branch traced, nothing held, while the callsite walks through nop, one ops, the list ops and a direct call; a live branch over the nop ops fails; ppc64le's literal and bl are in the callsite's out-of-line stub), \"auto\" (the trampoline; in the campaign trampoline,opstramp,int3 on x86_64, trampoline,literal on arm64, riscv64 and ppc64le), or \"all\" (every target the arch has, in the race scenario too: the nightly's full exploration)",
		set: func(o *Options, v string) error {
			if v == RaceAuto || v == RaceAll {
				o.RaceTarget = v
				return nil
			}
			seen := map[string]bool{}
			for _, t := range strings.Split(v, ",") {
				if !slices.Contains(AllRaceTargets, t) {
					return fmt.Errorf(`%q: want "auto", "all" or a list of %q`, t, AllRaceTargets)
				}
				if seen[t] {
					return fmt.Errorf("%q twice", t)
				}
				seen[t] = true
			}
			o.RaceTarget = v
			return nil
		},
		get: func(o *Options) string { return o.RaceTarget },
	},
	{
		name:   "racelist",
		usage:  "race scenario: decode and report every target's window (every target the arch has, for racetarget auto) and inject nothing: what fth race --list-windows runs",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.RaceList }),
		get:    getBool(func(o *Options) *bool { return &o.RaceList }),
	},
	{
		name:  "raceaction",
		usage: "race scenario, trampoline target: `what` races the held task, or a comma-separated list (each instruction of the window is then raced against each): \"replace\" (a second program on the function regenerates the trampoline, the direct call moves to the new image through modify_ftrace_direct, update_ftrace_direct_mod on x86_64, and the held image is put: the direct-modify window) or \"detach\" (the image's only link is closed)",
		set: func(o *Options, v string) error {
			seen := map[string]bool{}
			for _, a := range strings.Split(v, ",") {
				switch a {
				case RaceReplace, RaceDetach:
				default:
					return fmt.Errorf(`%q: want "replace", "detach", or both`, a)
				}
				if seen[a] {
					return fmt.Errorf("%q twice", a)
				}
				seen[a] = true
			}
			o.RaceAction = v
			return nil
		},
		get: func(o *Options) string { return o.RaceAction },
	},
	{
		name:  "injectfrom",
		usage: "race scenario: where each target's walk through its window `starts`: \"first\" (its first instruction) or \"random\" (an instruction drawn from the seed; with injections=1, a run that catches a bug biting at some points only does so with a probability: fth bisect's flaky reproduction)",
		set: func(o *Options, v string) error {
			switch v {
			case InjectFirst, InjectRandom:
				o.InjectFrom = v
				return nil
			}
			return fmt.Errorf(`%q: want "first" or "random"`, v)
		},
		get: func(o *Options) string { return o.InjectFrom },
	},
	{
		name:  "injections",
		usage: "race scenario: how many preemptions to inject (a `count`, shared by the targets; each target's injections walk its window one instruction after the other from the first), or \"all\": one at every instruction of every target's window",
		set: func(o *Options, v string) error {
			if v == "all" {
				o.Injections = All
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return errors.New(`want a count of at least 1, or "all"`)
			}
			o.Injections = n
			return nil
		},
		get: func(o *Options) string {
			if o.Injections == All {
				return "all"
			}
			return strconv.Itoa(o.Injections)
		},
	},
	{
		name:  "window",
		usage: "race scenario: `duration` the preemptor holds the CPU while the race runs, or \"auto\" (400ms)",
		set: func(o *Options, v string) error {
			if v == "auto" {
				o.Window = Auto
				return nil
			}
			d, err := duration(v, true)
			if err != nil {
				return err
			}
			if d > 900*time.Millisecond {
				return errors.New("at most 900ms: beyond that the kernel's fair server runs the preempted task beside the preemptor")
			}
			o.Window = d
			return nil
		},
		get: func(o *Options) string {
			if o.Window == Auto {
				return "auto"
			}
			return o.Window.String()
		},
	},
	{
		name:  "scenario",
		usage: "`workload`: \"storm\" (attach n, hold, detach), \"churn\" (drive a hot set through callsite states with oracles), \"bench\" (measure overheads), \"race\" (preemptions injected at exact instructions through the host's gdbstub), \"campaign\" (storm, churn, race and detach in one boot: fth run's default) or \"repro\" (one scripted order of operations that reproduces a known finding: the repro option)",
		set: func(o *Options, v string) error {
			switch sc := event.Scenario(v); sc {
			case ScenarioStorm, ScenarioChurn, ScenarioBench, ScenarioRace, ScenarioCampaign, ScenarioRepro, ScenarioStandalone:
				o.Scenario = sc
				return nil
			}
			return errors.New(`want "storm", "churn", "bench", "race", "campaign", "repro" or "standalone"`)
		},
		get: func(o *Options) string { return string(o.Scenario) },
	},
	{
		name:  "repro",
		usage: "repro scenario: the `sequence` to run: \"ipmodify-filter\" (a BPF fexit on fth_deliver_other; fth_deliver.ko's IPMODIFY ftrace_ops on fth_deliver_seq takes fth_deliver_other into its filter; two fentry programs on fth_deliver_seq, the second modifying that trampoline: docs/findings.md 8), \"ipmodify-register\" (its control: the IPMODIFY ops has both functions in its filter when it registers), \"direct-unregister-free\" (x86_64: unregister_ftrace_direct() frees a direct_functions entry while a direct-call lookup on the other CPU, held by the host, holds it: docs/findings.md 9) \"direct-unregister-live\" (its control: the lookup held at a live entry), , both again with tracefs's enabled_functions as the reader (\"direct-unregister-free-tracefs\", \"direct-unregister-live-tracefs\": kernels before 7.3 have that reader too), \"mapper-remove-free\" (x86_64: removing an enable_event probe from one function frees its entry of the probe's ftrace_func_mapper while the probe's callback for another function, held by the host, holds it: docs/findings.md 10) , \"mapper-remove-live\" (its control), \"eagain-free\" (x86_64, arm64, riscv64: a BPF fexit's first registration on a function with an IPMODIFY ftrace_ops is refused with -EAGAIN and its image freed at once, while a caller the refused registration's ops sent there, held by the host, is on its way in: docs/findings.md 12) \"eagain-peer\" (its control: the IPMODIFY ops registered after the fexit), \"ipmodify-mid-update\" (x86_64: a livepatch, then a BPF fentry, on fth_deliver_seq; a fexit added there while another trampoline's modify, held by the host, holds direct_mutex: that modify asks the trampoline mid-update to share: docs/findings.md 13) \"ipmodify-mid-update-peer\" (its control: the fentry before the livepatch), \"refused-direct\" (x86_64, arm64, riscv64: fth_deliver.ko's direct user refused by the IPMODIFY handshake on fth_deliver_seq while a caller its listed ops sent to its trampoline, held by the host, is on its way in: docs/findings.md 14) or \"refused-direct-accepted\" (its control: the second ops not IPMODIFY)",
		set: func(o *Options, v string) error {
			if v != "" && !slices.Contains(Repros(), v) {
				return fmt.Errorf("%q: want one of %s", v, strings.Join(Repros(), ", "))
			}
			o.Repro = v
			return nil
		},
		get: func(o *Options) string { return o.Repro },
	},
	{
		name:  "reproducer",
		usage: "standalone scenario: the `name` of the reproducer to run, a directory of results/known/repro (its run.sh and modules); the host checks the name",
		set: func(o *Options, v string) error {
			if strings.ContainsAny(v, "/ ") {
				return fmt.Errorf("%q: want a directory name of results/known/repro", v)
			}
			o.Reproducer = v
			return nil
		},
		get: func(o *Options) string { return o.Reproducer },
	},
	{
		name:  "reproducerargs",
		usage: "standalone scenario: comma-separated `words` given to the reproducer's run.sh (\"control\" runs its control)",
		set: func(o *Options, v string) error {
			o.ReproducerArgs = nil
			if v != "" {
				o.ReproducerArgs = strings.Split(v, ",")
			}
			return nil
		},
		get: func(o *Options) string { return strings.Join(o.ReproducerArgs, ",") },
	},
	{
		name:   "stormfirst",
		usage:  "campaign: attach the whole storm before the churn starts (default: the storm attaches beside the churn, so that the oracles run from the first seconds)",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.StormFirst }),
		get:    getBool(func(o *Options) *bool { return &o.StormFirst }),
	},
	{
		name:  "budget",
		usage: "campaign: `duration` of the churn and race stages together; the churn is cut to leave the race 45s and the race stops injecting when it is spent, after one injection at least; 0 for no bound",
		set:   func(o *Options, v string) (err error) { o.Budget, err = duration(v, false); return err },
		get:   func(o *Options) string { return o.Budget.String() },
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
		set:    setBool(func(o *Options) *bool { return &o.Mixed }),
		get:    getBool(func(o *Options) *bool { return &o.Mixed }),
	},
	{
		name:  "hotplug",
		usage: "churn: `period` of CPU hotplug: a CPU goes offline for half of it, online for the other half; 0 disables it; \"auto\": 20s where the kernel lets a CPU go offline",
		set:   func(o *Options, v string) (err error) { o.Hotplug, err = autoDuration(v); return err },
		get:   func(o *Options) string { return autoString(o.Hotplug) },
	},
	{
		name:  "rt",
		usage: "hammer threads running SCHED_RR at a low RT priority (`count`), or \"auto\": 2 in the churn, 0 in the storm and bench",
		set: func(o *Options, v string) (err error) {
			if v == "auto" {
				o.RT = Auto
				return nil
			}
			o.RT, err = intRange(v, 0, 4096)
			return err
		},
		get: func(o *Options) string {
			if o.RT == Auto {
				return "auto"
			}
			return strconv.Itoa(o.RT)
		},
	},
	{
		name:  "rtreserve",
		usage: "`percent` of every CPU reserved for SCHED_OTHER tasks (the kernel's fair server) while rt threads run; 0 leaves the kernel's 5%",
		set:   func(o *Options, v string) (err error) { o.RTReserve, err = intRange(v, 0, 90); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.RTReserve) },
	},
	{
		name:  "timerperiod",
		usage: "`period` of a timerfd each hammer thread arms and reads; 0 disables it; \"auto\": 500µs in the churn, 0 in the storm and bench",
		set:   func(o *Options, v string) (err error) { o.TimerPeriod, err = autoDuration(v); return err },
		get:   func(o *Options) string { return autoString(o.TimerPeriod) },
	},
	{
		name:   "includeknown",
		usage:  "attach to and cycle what triggers the known findings (results/known) instead of avoiding it: for reproducing them",
		isBool: true,
		set: func(o *Options, v string) (err error) {
			o.IncludeKnown, err = parseBool(v)
			return err
		},
		get: func(o *Options) string { return strconv.FormatBool(o.IncludeKnown) },
	},
	{
		name:   "modules",
		usage:  "churn: load and unload the modules under /lib/modules/fth (ftrace-direct samples, fth_target) in a loop",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.Modules }),
		get:    getBool(func(o *Options) *bool { return &o.Modules }),
	},
	{
		name:   "delivery",
		usage:  "churn: run the delivery oracle (fth_deliver.ko: numbered calls, every user on the callsite counting them) beside the churn",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.Delivery }),
		get:    getBool(func(o *Options) *bool { return &o.Delivery }),
	},
	{
		name:   "twins",
		usage:  "churn: give each worker a twin attaching, replacing and detaching links on the same function at the same time (two tasks updating one trampoline; default true)",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.Twins }),
		get:    getBool(func(o *Options) *bool { return &o.Twins }),
	},
	{
		name:  "deliverskip",
		usage: "churn: comma-separated delivery-oracle `users` to leave out (default ops-ipmodify, docs/findings.md 8; empty: every user)",
		set: func(o *Options, v string) error {
			o.DeliverSkip = nil
			for _, f := range strings.Split(v, ",") {
				if f = strings.TrimSpace(f); f != "" {
					if !slices.Contains(DeliveryUsers(), f) {
						return fmt.Errorf("no delivery-oracle user %q: the users are %s", f, strings.Join(DeliveryUsers(), ", "))
					}
					o.DeliverSkip = append(o.DeliverSkip, f)
				}
			}
			return nil
		},
		get: func(o *Options) string { return strings.Join(o.DeliverSkip, ",") },
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
		name:  "benchparts",
		usage: "bench: comma-separated `parts` to run (ops, syscall, scaling, multi, multilive, wakeup), or \"all\"; the default is every part but multilive",
		set:   func(o *Options, v string) (err error) { o.BenchParts, err = benchopts.ParseParts(v); return err },
		get:   func(o *Options) string { return strings.Join(o.BenchParts, ",") },
	},
	{
		name:  "opssweep",
		usage: "bench: ftrace-ops `configurations` besides the baseline: relevant:irrelevant[:regs],... or \"full\"",
		set:   func(o *Options, v string) (err error) { o.OpsSweep, err = benchopts.ParseOpsSweep(v); return err },
		get:   func(o *Options) string { return benchopts.FormatOpsSweep(o.OpsSweep) },
	},
	{
		name:  "opscalls",
		usage: "bench: nr_function_calls of each ftrace-ops load (`count`)",
		set: func(o *Options, v string) (err error) {
			o.OpsCalls, err = intRange(v, 1, benchopts.MaxCalls)
			return err
		},
		get: func(o *Options) string { return strconv.Itoa(o.OpsCalls) },
	},
	{
		name:  "syscallcalls",
		usage: "bench: getppid calls per timed run (`count`)",
		set: func(o *Options, v string) (err error) {
			o.SyscallCalls, err = intRange(v, 1, benchopts.MaxCalls)
			return err
		},
		get: func(o *Options) string { return strconv.Itoa(o.SyscallCalls) },
	},
	{
		name:  "scalingn",
		usage: "bench: comma-separated trampoline `counts` of the attach/detach scaling curve",
		set: func(o *Options, v string) (err error) {
			o.ScalingN, err = benchopts.ParseCounts(v, benchopts.MaxCount)
			return err
		},
		get: func(o *Options) string { return benchopts.FormatCounts(o.ScalingN) },
	},
	{
		name:  "multin",
		usage: "bench: comma-separated function `counts` of the tracing_multi and kprobe_multi links",
		set: func(o *Options, v string) (err error) {
			o.MultiN, err = benchopts.ParseCounts(v, benchopts.MaxCount)
			return err
		},
		get: func(o *Options) string { return benchopts.FormatCounts(o.MultiN) },
	},
	{
		name:  "multiliven",
		usage: "bench: comma-separated tracing_multi population `sizes` of the multilive part, grown in turn in one boot, with 200 per-link attaches and detaches timed at each (none: the part is skipped)",
		set: func(o *Options, v string) (err error) {
			o.MultiLiveN = nil
			if v == "" {
				return nil
			}
			o.MultiLiveN, err = benchopts.ParseCounts(v, benchopts.MaxCount)
			return err
		},
		get: func(o *Options) string { return benchopts.FormatCounts(o.MultiLiveN) },
	},
	{
		name:  "fexitevery",
		usage: "storm, campaign, bench: every `k`-th trampoline is an fexit instead of an fentry (0: fentry only)",
		set: func(o *Options, v string) (err error) {
			o.FExitEvery, err = intRange(v, 0, 1<<20)
			return err
		},
		get: func(o *Options) string { return strconv.Itoa(o.FExitEvery) },
	},
	{
		name:   "scalemod",
		usage:  "storm, bench, campaign: load fth_scale.ko (32,768 traceable functions) and count its functions as candidates, for more trampolines than vmlinux has functions; the churn beside it then names vmlinux's functions in tracefs filters by index, keeps the module's functions out of its hot set, and leaves out the filters on a module's functions (the delivery oracle's two tracers, the tracer on fth_target), which the kernel matches by name over the module's symbols",
		isBool: true,
		set:    setBool(func(o *Options) *bool { return &o.ScaleModule }),
		get:    getBool(func(o *Options) *bool { return &o.ScaleModule }),
	},
	{
		name:  "multihold",
		usage: "campaign, churn: `count` of functions held by tracing_multi links (Linux 7.3's BPF_TRACE_FENTRY_MULTI, one shared direct ops) from before the storm to the detach, on functions neither the storm nor the churn touches: vmlinux's first, then fth_scale.ko's with scalemod=true; 0 for none",
		set:   func(o *Options, v string) (err error) { o.MultiHold, err = intRange(v, 0, 1<<20); return err },
		get:   func(o *Options) string { return strconv.Itoa(o.MultiHold) },
	},
	{
		name:  "profile",
		usage: "bench: profile attach and detach inside the guest at the `largest` count, at all counts, or off",
		set:   func(o *Options, v string) (err error) { o.Profile, err = benchopts.ParseProfile(v); return err },
		get:   func(o *Options) string { return o.Profile },
	},
	{
		name:  "wakeupfor",
		usage: "bench: `duration` of each wakeup-latency run (quiet, then under the attach storm)",
		set:   func(o *Options, v string) (err error) { o.WakeupFor, err = duration(v, true); return err },
		get:   func(o *Options) string { return o.WakeupFor.String() },
	},
	{
		name:  "sabotage",
		usage: "test only: \"wrong-ip\", \"skip-count\" or \"drop-call\" makes the func-ip, exact-count or delivery oracle see a failure",
		set: func(o *Options, v string) error {
			switch v {
			case "none", SabotageNone:
				o.Sabotage = SabotageNone
			case SabotageWrongIP, SabotageSkipCount, SabotageDropCall:
				o.Sabotage = v
			default:
				return errors.New(`want "none", "wrong-ip", "skip-count" or "drop-call"`)
			}
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

func lookup(name string) (*field, bool) {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i], true
		}
	}
	return nil, false
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

// FromArgs is the options the agent will run with, as the host gives
// them (--agent-arg key=value, without the fth. prefix): the defaults for
// env with args set on top, in name order, and checked as the agent
// checks them. The host reads what it needs of them from the fields,
// never from args' text, so that host and guest read a value alike.
//
// A value Set refuses comes back as an *ArgError naming its key; options
// that do not go together, as Validate's error.
func FromArgs(args map[string]string, env Env) (Options, error) {
	o := Defaults(env)
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if err := o.Set(k, args[k]); err != nil {
			return o, &ArgError{Key: k, Value: args[k], Err: err}
		}
	}
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// ArgError is FromArgs' error for one argument: Err is Set's (wrapping
// ErrUnknownOption for a name the table does not have).
type ArgError struct {
	Key, Value string
	Err        error
}

func (e *ArgError) Error() string { return e.Err.Error() }
func (e *ArgError) Unwrap() error { return e.Err }

// HostEnv is the env the host parses agent options with (FromArgs): the
// fields it reads do not depend on the guest's CPUs.
var HostEnv = Env{NumCPU: 2, Poweroff: true}

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
	o.ResolveAuto()
	return o, nil
}

// ResolveAuto gives the options left at "auto" their scenario's value: the
// churn runs with the preemption pressure on (ChurnRT threads at RT, and
// ChurnTimerPeriod timers), the storm and the bench without, so that their
// timings stay comparable with earlier runs.
func (o *Options) ResolveAuto() {
	churn := o.Scenario == ScenarioChurn || o.Scenario == ScenarioCampaign
	if o.RT == Auto {
		o.RT = 0
		if churn {
			o.RT = ChurnRT
		}
	}
	if o.TimerPeriod == Auto {
		o.TimerPeriod = 0
		if churn {
			o.TimerPeriod = ChurnTimerPeriod
		}
	}
	if o.Hotplug == Auto {
		// Only the churn reads it; an arch or kernel without hotplug
		// skips it there and records why.
		o.Hotplug = ChurnHotplug
	}
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

// setBool and getBool are a boolean option's set and get, for the field
// that field returns.
func setBool(field func(*Options) *bool) func(*Options, string) error {
	return func(o *Options, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*field(o) = b
		return nil
	}
}

func getBool(field func(*Options) *bool) func(*Options) string {
	return func(o *Options) string { return strconv.FormatBool(*field(o)) }
}
