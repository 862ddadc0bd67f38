package options

import (
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftrace-harness/fth/wire/benchopts"
	"github.com/ftrace-harness/fth/wire/event"
)

var env4 = Env{NumCPU: 4, Poweroff: true}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []KV
	}{
		{"empty", "", nil},
		{"no fth keys", "console=ttyS0 root=/dev/vda quiet", nil},
		{"simple", "console=ttyS0 fth.n=100 fth.seed=42\n", []KV{
			{"fth.n", "100", true}, {"fth.seed", "42", true},
		}},
		{"bare key", "fth.poweroff quiet", []KV{{"fth.poweroff", "", false}}},
		{"quoted value", `fth.events="/tmp/a b" x=1`, []KV{{"fth.events", "/tmp/a b", true}}},
		{"quoted param", `"fth.crash=sysrq-c" panic=-1`, []KV{{"fth.crash", "sysrq-c", true}}},
		{"tabs and repeats", "fth.n=1\tfth.n=2", []KV{{"fth.n", "1", true}, {"fth.n", "2", true}}},
		{"after double dash", "quiet -- fth.hold=1s", []KV{{"fth.hold", "1s", true}}},
		{"empty value", "fth.events=", []KV{{"fth.events", "", true}}},
		{"prefix must match", "xfth.n=3 fthn=3", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseCmdline(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCmdline(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o, err := Parse(nil, "", env4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := withChurnDefaults(Options{N: 2000, Hold: 5 * time.Second, Detach: All, Threads: 8, Stall: 20 * time.Second, LogLevel: 7, Poweroff: true, MaxArgs: 6})
	if o.RT != 0 || o.TimerPeriod != 0 {
		t.Errorf("the storm's defaults have RT %d and timers every %s, want no preemption pressure", o.RT, o.TimerPeriod)
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("defaults = %+v, want %+v", o, want)
	}
	if d := Defaults(Env{}); d.Threads != 2 || d.Poweroff || d.LogLevel != 0 {
		t.Errorf("Defaults(zero env) = %+v, want 2 threads, no poweroff and the console log level left alone", d)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		cmdline string
		check   func(t *testing.T, o Options)
		wantErr string // substring; "" means success
	}{
		{
			name:    "cmdline sets everything",
			cmdline: "console=ttyS0 fth.n=all fth.seed=-7 fth.hold=1m fth.detach=10 fth.threads=3 fth.stall=2s fth.crash=sysrq-c fth.events=/dev/vport1p1 fth.poweroff=false fth.maxargs=8",
			check: func(t *testing.T, o Options) {
				want := withChurnDefaults(Options{N: All, Seed: -7, Hold: time.Minute, Detach: 10, Threads: 3, Stall: 2 * time.Second, Crash: CrashSysrqC, LogLevel: 7, Events: "/dev/vport1p1", Poweroff: false, MaxArgs: 8})
				if !reflect.DeepEqual(o, want) {
					t.Errorf("got %+v, want %+v", o, want)
				}
			},
		},
		{
			name:    "flags override cmdline",
			args:    []string{"-n", "5", "-hold=0s", "-poweroff=false"},
			cmdline: "fth.n=100 fth.hold=9s fth.seed=3",
			check: func(t *testing.T, o Options) {
				if o.N != 5 || o.Hold != 0 || o.Seed != 3 || o.Poweroff {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name:    "last cmdline key wins",
			cmdline: "fth.n=1 fth.n=2",
			check: func(t *testing.T, o Options) {
				if o.N != 2 {
					t.Errorf("n = %d, want 2", o.N)
				}
			},
		},
		{
			name:    "bare bool key",
			cmdline: "fth.poweroff",
			args:    nil,
			check: func(t *testing.T, o Options) {
				if !o.Poweroff {
					t.Error("poweroff = false")
				}
			},
		},
		{
			name: "bare bool flag",
			args: []string{"-poweroff"},
			check: func(t *testing.T, o Options) {
				if !o.Poweroff {
					t.Error("poweroff = false")
				}
			},
		},
		{
			name:    "aliases",
			cmdline: "fth.crash=none fth.events=auto fth.detach=0 fth.n=0",
			check: func(t *testing.T, o Options) {
				if o.Crash != CrashNone || o.Events != "" || o.Detach != 0 || o.N != 0 {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "bad n cmdline", cmdline: "fth.n=lots", wantErr: `cmdline fth.n="lots": want "all" or an integer >= 0`},
		{name: "negative n", cmdline: "fth.n=-3", wantErr: "fth.n"},
		{name: "bad seed", cmdline: "fth.seed=1.5", wantErr: `fth.seed="1.5": want a 64-bit integer`},
		{name: "bad hold", cmdline: "fth.hold=5", wantErr: `fth.hold="5": want a duration`},
		{name: "negative hold", cmdline: "fth.hold=-1s", wantErr: "fth.hold"},
		{name: "zero stall", cmdline: "fth.stall=0s", wantErr: `fth.stall="0s": want a duration > 0`},
		{name: "bad detach", cmdline: "fth.detach=some", wantErr: "fth.detach"},
		{name: "zero threads", cmdline: "fth.threads=0", wantErr: "fth.threads"},
		{
			name:    "crash hung-task",
			cmdline: "fth.crash=hung-task",
			check: func(t *testing.T, o Options) {
				if o.Crash != CrashHungTask {
					t.Errorf("Crash = %q, want %q", o.Crash, CrashHungTask)
				}
			},
		},
		{name: "deliverskip typo", cmdline: "fth.deliverskip=ops,livepach", wantErr: `no delivery-oracle user "livepach": the users are direct, fentry, fexit`},
		{
			name:    "deliverskip",
			cmdline: "fth.deliverskip=livepatch,fentry",
			check: func(t *testing.T, o Options) {
				if !slices.Equal(o.DeliverSkip, []string{"livepatch", "fentry"}) {
					t.Errorf("DeliverSkip = %q", o.DeliverSkip)
				}
			},
		},
		{name: "bad crash", cmdline: "fth.crash=sysrq-b", wantErr: `fth.crash="sysrq-b": want "none", "sysrq-c", "hung-task", "rt-inversion", "lkdtm:<TYPE>"`},
		{
			name:    "crash lkdtm",
			cmdline: "fth.crash=lkdtm:REFCOUNT_DEC_ZERO",
			check: func(t *testing.T, o Options) {
				if o.Crash != "lkdtm:REFCOUNT_DEC_ZERO" {
					t.Errorf("Crash = %q", o.Crash)
				}
			},
		},
		{name: "lkdtm lower case", cmdline: "fth.crash=lkdtm:warning", wantErr: `LKDTM type "warning": want upper case`},
		{name: "lkdtm empty", cmdline: "fth.crash=lkdtm:", wantErr: `LKDTM type "": want upper case`},
		{
			name:    "crash bug",
			cmdline: "fth.crash=bug:bad-unlock",
			check: func(t *testing.T, o Options) {
				if o.Crash != "bug:bad-unlock" {
					t.Errorf("Crash = %q", o.Crash)
				}
			},
		},
		{name: "unknown bug", cmdline: "fth.crash=bug:double-free", wantErr: `no injected bug "double-free": want one of bad-unlock, held-lock-freed`},
		{name: "loglevel too high", cmdline: "fth.loglevel=9", wantErr: `fth.loglevel="9": want an integer from 0 to 8`},
		{
			name:    "loglevel 0 keeps init's",
			cmdline: "fth.loglevel=0",
			check: func(t *testing.T, o Options) {
				if o.LogLevel != 0 {
					t.Errorf("LogLevel = %d, want 0", o.LogLevel)
				}
			},
		},
		{name: "bad poweroff", cmdline: "fth.poweroff=maybe", wantErr: "fth.poweroff"},
		{name: "maxargs too big", cmdline: "fth.maxargs=13", wantErr: "fth.maxargs"},
		{name: "unknown key", cmdline: "fth.hodl=5s", wantErr: "fth.hodl: unknown key"},
		{name: "missing value", cmdline: "fth.n", wantErr: "fth.n: missing value"},
		{name: "bad flag", args: []string{"-threads=x"}, wantErr: "-threads"},
		{name: "unknown flag", args: []string{"-bogus"}, wantErr: "bogus"},
		{name: "stray argument", args: []string{"extra"}, wantErr: `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Parse(tt.args, tt.cmdline, env4, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

func TestArgsRoundTrip(t *testing.T) {
	orig := Options{N: 17, Seed: 99, Hold: 1500 * time.Millisecond, Detach: 3, Threads: 5, Stall: 7 * time.Second, Crash: CrashSysrqC, Events: "/tmp/with space", Poweroff: true, MaxArgs: 4,
		Scenario: ScenarioChurn, Hot: 7, Churn: 90 * time.Second, Cycles: 3, Workers: 4, ExactCalls: 500, ExactEvery: 2 * time.Second, PreemptEvery: 0, Mixed: false, Hotplug: 4 * time.Second,
		RT: 3, TimerPeriod: 250 * time.Microsecond, Modules: false, Delivery: true, ModHold: 1500 * time.Millisecond, Sabotage: SabotageSkipCount,
		BenchParts: []string{benchopts.Syscall, benchopts.Wakeup}, OpsSweep: []benchopts.OpsPoint{{Relevant: 0, Irrelevant: 5, SaveRegs: true}, {Relevant: 3, Irrelevant: 0, SaveRegs: false}}, OpsCalls: 1000, SyscallCalls: 77,
		ScalingN: []int{10, 20}, MultiN: []int{5}, WakeupFor: 1500 * time.Millisecond, Profile: benchopts.ProfileAll,
		RaceTarget: RaceCallsite, RaceAction: RaceDetach, InjectFrom: InjectRandom, Injections: 3, Window: 250 * time.Millisecond}
	args := orig.Args()
	if len(args) != len(Names()) {
		t.Fatalf("Args has %d keys, want %d", len(args), len(Names()))
	}
	// Through Set.
	got := Defaults(Env{NumCPU: 1})
	for k, v := range args {
		if err := got.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, orig) {
		t.Errorf("Set(Args()) = %+v, want %+v", got, orig)
	}
	// Through the kernel command line.
	got, err := Parse(nil, "console=ttyS0 "+orig.Cmdline(), Env{NumCPU: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, orig) {
		t.Errorf("Parse(Cmdline()) = %+v, want %+v\ncmdline: %s", got, orig, orig.Cmdline())
	}
	// Defaults print in their documented form.
	def := Defaults(env4)
	a := def.Args()
	for k, want := range map[string]string{"n": "2000", "detach": "all", "crash": "none", "events": "auto", "hold": "5s", "stall": "20s", "threads": "8", "seed": "0", "poweroff": "true", "maxargs": "6",
		"scenario": "storm", "hot": "16", "churn": "1m0s", "cycles": "0", "workers": "2", "exactcalls": "1000", "exactevery": "5s", "preemptevery": "3s", "mixed": "true", "hotplug": "auto", "rt": "auto", "timerperiod": "auto"} {
		if a[k] != want {
			t.Errorf("Args()[%s] = %q, want %q", k, a[k], want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := Defaults(env4)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"n", func(o *Options) { o.N = -2 }, "option n"},
		{"detach", func(o *Options) { o.Detach = -5 }, "option detach"},
		{"hold", func(o *Options) { o.Hold = -time.Second }, "option hold"},
		{"threads", func(o *Options) { o.Threads = 0 }, "option threads"},
		{"stall", func(o *Options) { o.Stall = 0 }, "option stall"},
		{"crash", func(o *Options) { o.Crash = "boom" }, "option crash"},
		{"maxargs", func(o *Options) { o.MaxArgs = 99 }, "option maxargs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.mutate(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	if err := good.Set("nope", "1"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Set(nope) = %v", err)
	}
}

func TestResolveSeed(t *testing.T) {
	now := time.Unix(0, 12345)
	o := Options{}
	o.ResolveSeed(now)
	if o.Seed != 12345 {
		t.Errorf("seed = %d", o.Seed)
	}
	o.ResolveSeed(time.Unix(0, 999))
	if o.Seed != 12345 {
		t.Errorf("a set seed changed to %d", o.Seed)
	}
	z := Options{}
	z.ResolveSeed(time.Unix(0, 0))
	if z.Seed == 0 {
		t.Error("seed stayed 0")
	}
}

// withChurnDefaults sets the churn-scenario options of o to their defaults,
// so that literals written for the storm options compare equal to Defaults.
func withChurnDefaults(o Options) Options {
	d := Defaults(Env{})
	o.Scenario, o.Hot, o.Churn, o.Cycles, o.Workers = d.Scenario, d.Hot, d.Churn, d.Cycles, d.Workers
	o.ExactCalls, o.ExactEvery, o.PreemptEvery, o.Mixed, o.Hotplug = d.ExactCalls, d.ExactEvery, d.PreemptEvery, d.Mixed, d.Hotplug
	o.RT, o.TimerPeriod, o.RTReserve, o.Modules, o.ModHold, o.Sabotage = d.RT, d.TimerPeriod, d.RTReserve, d.Modules, d.ModHold, d.Sabotage
	o.ModList, o.Budget, o.Delivery, o.Twins, o.DeliverSkip = d.ModList, d.Budget, d.Delivery, d.Twins, d.DeliverSkip
	o.BenchParts, o.OpsSweep, o.OpsCalls, o.SyscallCalls = d.BenchParts, d.OpsSweep, d.OpsCalls, d.SyscallCalls
	o.ScalingN, o.MultiN, o.WakeupFor, o.Profile = d.ScalingN, d.MultiN, d.WakeupFor, d.Profile
	o.RaceTarget, o.RaceAction, o.InjectFrom, o.Injections, o.Window = d.RaceTarget, d.RaceAction, d.InjectFrom, d.Injections, d.Window
	o.ResolveAuto()
	return o
}

func TestChurnOptions(t *testing.T) {
	o, err := Parse(nil, "fth.scenario=churn fth.hot=4 fth.churn=10s fth.cycles=2 fth.workers=1 fth.exactcalls=0 fth.exactevery=1s fth.preemptevery=0s fth.mixed=false fth.hotplug=7s", env4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Scenario != ScenarioChurn || o.Hot != 4 || o.Churn != 10*time.Second || o.Cycles != 2 || o.Workers != 1 ||
		o.ExactCalls != 0 || o.ExactEvery != time.Second || o.PreemptEvery != 0 || o.Mixed || o.Hotplug != 7*time.Second {
		t.Errorf("got %+v", o)
	}
	if o, err := Parse(nil, "fth.mixed", env4, io.Discard); err != nil || !o.Mixed {
		t.Errorf("bare fth.mixed = %+v, %v", o.Mixed, err)
	}
	for cmdline, want := range map[string]string{
		"fth.scenario=hammer":                 `fth.scenario="hammer": want "storm", "churn", "bench", "race", "campaign", "repro" or "standalone"`,
		"fth.hot=0":                           "fth.hot",
		"fth.hot=5000":                        "fth.hot",
		"fth.churn=-1s":                       "fth.churn",
		"fth.cycles=-1":                       "fth.cycles",
		"fth.workers=0":                       "fth.workers",
		"fth.exactcalls=x":                    "fth.exactcalls",
		"fth.exactevery=0s":                   "fth.exactevery",
		"fth.preemptevery=soon":               "fth.preemptevery",
		"fth.hotplug=-2s":                     "fth.hotplug",
		"fth.scenario=churn fth.churn=0s":     "churn=0 needs cycles > 0",
		"fth.scenario=repro":                  "scenario=repro needs repro=<sequence> (ipmodify-filter, ipmodify-register, direct-unregister-free, direct-unregister-live, direct-unregister-free-tracefs, direct-unregister-live-tracefs, mapper-remove-free, mapper-remove-live, eagain-free, eagain-peer, ipmodify-mid-update, ipmodify-mid-update-peer, refused-direct, refused-direct-accepted)",
		"fth.repro=nosuch":                    `fth.repro="nosuch": "nosuch": want one of ipmodify-filter, ipmodify-register`,
		"fth.scenario=storm fth.multihold=10": "option multihold: the tracing_multi population is held under the churn or the campaign; scenario=storm has neither",
		"fth.multihold=-1":                    "fth.multihold",
	} {
		if _, err := Parse(nil, cmdline, env4, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", cmdline, err, want)
		}
	}
	// churn=0 is fine with a cycle bound, and in the storm scenario.
	for _, cmdline := range []string{"fth.scenario=churn fth.churn=0s fth.cycles=5", "fth.churn=0s", "fth.scenario=campaign fth.multihold=38000"} {
		if _, err := Parse(nil, cmdline, env4, io.Discard); err != nil {
			t.Errorf("Parse(%q) = %v", cmdline, err)
		}
	}
}

func TestFuncsFromCmdline(t *testing.T) {
	o, err := Parse(nil, "console=ttyS0 fth.funcs=rcu_read_unlock_special,,tlb_finish_mmu fth.n=5", env4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"rcu_read_unlock_special", "tlb_finish_mmu"}; !reflect.DeepEqual(o.Funcs, want) {
		t.Errorf("Funcs = %q, want %q", o.Funcs, want)
	}
	if got := o.Args()["funcs"]; got != "rcu_read_unlock_special,tlb_finish_mmu" {
		t.Errorf("Args()[funcs] = %q: a repro must carry the list", got)
	}
}

func TestSabotageValues(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{"none", SabotageNone, ""},
		{"wrong-ip", SabotageWrongIP, ""},
		{"skip-count", SabotageSkipCount, ""},
		{"drop-call", SabotageDropCall, ""},
		{"bogus", "", `want "none", "wrong-ip", "skip-count" or "drop-call"`},
	} {
		o, err := Parse(nil, "fth.sabotage="+tt.in, env4, io.Discard)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("sabotage=%s: err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || o.Sabotage != tt.want {
			t.Errorf("sabotage=%s: got %q, %v; want %q", tt.in, o.Sabotage, err, tt.want)
		}
	}
}

func TestBenchOptions(t *testing.T) {
	o, err := Parse(nil, "fth.scenario=bench fth.benchparts=wakeup,ops fth.opssweep=1:0,10:100:regs fth.opscalls=500 fth.syscallcalls=9 fth.scalingn=100,5000 fth.multin=7 fth.wakeupfor=5s", env4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.Scenario != ScenarioBench || o.OpsCalls != 500 || o.SyscallCalls != 9 || o.WakeupFor != 5*time.Second {
		t.Errorf("got %+v", o)
	}
	// Parts run in BenchParts order whatever the order given.
	if want := []string{benchopts.Ops, benchopts.Wakeup}; !reflect.DeepEqual(o.BenchParts, want) {
		t.Errorf("BenchParts = %q, want %q", o.BenchParts, want)
	}
	if want := []benchopts.OpsPoint{{Relevant: 1, Irrelevant: 0, SaveRegs: false}, {Relevant: 10, Irrelevant: 100, SaveRegs: true}}; !reflect.DeepEqual(o.OpsSweep, want) {
		t.Errorf("OpsSweep = %+v, want %+v", o.OpsSweep, want)
	}
	if !reflect.DeepEqual(o.ScalingN, []int{100, 5000}) || !reflect.DeepEqual(o.MultiN, []int{7}) {
		t.Errorf("ScalingN = %v, MultiN = %v", o.ScalingN, o.MultiN)
	}
	def := Defaults(env4)
	if got := def.Args(); got["benchparts"] != "ops,syscall,scaling,multi,wakeup" || got["opssweep"] != "1:0,2:0,10:0,1:10,1:100,1:0:regs" ||
		got["scalingn"] != "100,500,1000,2000,5000,10000" || got["multin"] != "100,1000" || got["wakeupfor"] != "10s" {
		t.Errorf("default bench args = %v", got)
	}
	if o, err := Parse(nil, "fth.benchparts=all fth.opssweep=", env4, io.Discard); err != nil || len(o.BenchParts) != len(benchopts.Parts()) || len(o.OpsSweep) != 0 {
		t.Errorf("benchparts=all opssweep= : %+v, %v", o, err)
	}
	for cmdline, want := range map[string]string{
		"fth.benchparts=ops,bogus": `unknown part "bogus"`,
		"fth.opssweep=1":           "want relevant:irrelevant",
		"fth.opssweep=1:2:x":       "want relevant:irrelevant",
		"fth.opssweep=-1:0":        "op counts must be",
		"fth.opssweep=1:5000":      "op counts must be",
		"fth.opscalls=0":           "fth.opscalls",
		"fth.syscallcalls=x":       "fth.syscallcalls",
		"fth.scalingn=100,0":       `"0": want integers`,
		"fth.multin=a":             `"a": want integers`,
		"fth.wakeupfor=0s":         "fth.wakeupfor",
	} {
		if _, err := Parse(nil, cmdline, env4, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", cmdline, err, want)
		}
	}
}

func TestOpsSweep(t *testing.T) {
	full, err := benchopts.ParseOpsSweep("full")
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != 18 {
		t.Fatalf("full sweep has %d points, want 3 relevant x 3 irrelevant x 2 save_regs", len(full))
	}
	seen := map[benchopts.OpsPoint]bool{}
	for _, p := range full {
		seen[p] = true
	}
	for _, rel := range []int{1, 2, 10} {
		for _, irr := range []int{0, 10, 100} {
			for _, regs := range []bool{false, true} {
				if !seen[benchopts.OpsPoint{Relevant: rel, Irrelevant: irr, SaveRegs: regs}] {
					t.Errorf("full sweep lacks %v", benchopts.OpsPoint{Relevant: rel, Irrelevant: irr, SaveRegs: regs})
				}
			}
		}
	}
	// The text form round-trips.
	back, err := benchopts.ParseOpsSweep(benchopts.FormatOpsSweep(full))
	if err != nil || !reflect.DeepEqual(back, full) {
		t.Errorf("round trip = %v, %v", back, err)
	}
	if got, _ := benchopts.ParseOpsSweep(" 2:3 , ,4:0:regs"); !reflect.DeepEqual(got, []benchopts.OpsPoint{{Relevant: 2, Irrelevant: 3, SaveRegs: false}, {Relevant: 4, Irrelevant: 0, SaveRegs: true}}) {
		t.Errorf("spaces and empty items: %v", got)
	}
}

// The churn runs with the preemption pressure by default; the storm and
// the bench without; an explicit value wins in either.
func TestPressureDefaultsPerScenario(t *testing.T) {
	cases := []struct {
		cmdline string
		rt      int
		timer   time.Duration
	}{
		{"fth.scenario=churn", ChurnRT, ChurnTimerPeriod},
		{"fth.scenario=storm", 0, 0},
		{"fth.scenario=bench", 0, 0},
		{"fth.scenario=churn fth.rt=0 fth.timerperiod=0", 0, 0},
		{"fth.scenario=storm fth.rt=3 fth.timerperiod=1ms", 3, time.Millisecond},
		{"fth.scenario=storm fth.rt=auto", 0, 0},
	}
	if o, _ := Parse(nil, "fth.scenario=churn", env4, io.Discard); o.Hotplug != ChurnHotplug {
		t.Errorf("churn hotplug %s, want %s", o.Hotplug, ChurnHotplug)
	}
	for _, c := range cases {
		o, err := Parse(nil, c.cmdline, env4, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", c.cmdline, err)
		}
		if o.RT != c.rt || o.TimerPeriod != c.timer {
			t.Errorf("%s: rt %d, timerperiod %s; want %d, %s", c.cmdline, o.RT, o.TimerPeriod, c.rt, c.timer)
		}
	}
}

// racetarget resolves per arch: auto is the trampoline in the race
// scenario and every freed-early or patching target in the campaign, all
// is every target the arch has, and a target the arch cannot run is
// refused with the arch's reason.
func TestRaceTargets(t *testing.T) {
	for _, tc := range []struct {
		target, goarch string
		campaign       bool
		want           []string
		wantErr        string
	}{
		{target: RaceAuto, goarch: "amd64", want: []string{RaceTrampoline}},
		{target: RaceAuto, goarch: "amd64", campaign: true, want: []string{RaceTrampoline, RaceFexitTrampoline, RaceOpsTrampoline, RaceInt3}},
		{target: RaceAll, goarch: "amd64", want: []string{RaceTrampoline, RaceFexitTrampoline, RaceOpsTrampoline, RaceInt3}},
		{target: RaceAll, goarch: "arm64", want: []string{RaceTrampoline, RaceFexitTrampoline, RaceCallsite, RaceCallOps, RaceLiteral}},
		{target: RaceAll, goarch: "riscv64", want: []string{RaceTrampoline, RaceFexitTrampoline, RaceCallsite, RaceCallOps, RaceLiteral}},
		{target: RaceAuto, goarch: "riscv64", campaign: true, want: []string{RaceTrampoline, RaceFexitTrampoline, RaceLiteral}},
		{target: RaceAuto, goarch: "arm64", campaign: true, want: []string{RaceTrampoline, RaceFexitTrampoline, RaceLiteral}},
		{target: RaceAuto, goarch: "ppc64le", campaign: true, want: []string{RaceTrampoline, RaceLiteral}},
		{target: RaceLiteral, goarch: "amd64", want: []string{RaceLiteral}, wantErr: "needs a CALL_OPS literal"},
		{target: RaceLiteral, goarch: "ppc64le", want: []string{RaceLiteral}},
		{target: RaceCallOps, goarch: "amd64", want: []string{RaceCallOps}, wantErr: "CALL_OPS literal load"},
		{target: RaceCallOps, goarch: "ppc64le", want: []string{RaceCallOps}},
		{target: RaceAll, goarch: "ppc64le", want: []string{RaceTrampoline, RaceFexitTrampoline, RaceCallOps, RaceLiteral}},
		{target: "int3,trampoline", goarch: "amd64", want: []string{RaceInt3, RaceTrampoline}},
		{target: RaceFexitTrampoline, goarch: "riscv64", want: []string{RaceFexitTrampoline}},
		{target: RaceInt3, goarch: "arm64", want: []string{RaceInt3}, wantErr: "needs x86's INT3 patching"},
		{target: RaceOpsTrampoline, goarch: "riscv64", want: []string{RaceOpsTrampoline}, wantErr: "per-ftrace_ops trampolines"},
		{target: RaceCallsite, goarch: "amd64", want: []string{RaceCallsite}, wantErr: "two-instruction callsite"},
	} {
		got := RaceTargets(tc.target, tc.goarch, tc.campaign)
		if tc.campaign && tc.goarch == "ppc64le" && slices.Contains(got, RaceFexitTrampoline) {
			t.Errorf("the campaign on %s races fexittramp, which has not been run there", tc.goarch)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("RaceTargets(%q, %s, campaign %v) = %v, want %v", tc.target, tc.goarch, tc.campaign, got, tc.want)
		}
		err := CheckRaceTargets(tc.target, tc.goarch)
		if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckRaceTargets(%q, %s) = %v, want an error with %q", tc.target, tc.goarch, err, tc.wantErr)
		}
	}
}

// TestFromArgs reads agent options as the agent's option table does, so
// that the host judges a known finding (includeknown) or builds a module
// (scalemod) as the guest was told; a value the agent would refuse is
// refused here too.
func TestFromArgs(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "1": true, "t": true, "TRUE": true, "false": false, "0": false, "": false, "yes": false} {
		o, err := FromArgs(map[string]string{"includeknown": v, "scalemod": v}, HostEnv)
		if (err == nil && o.IncludeKnown && o.ScaleModule) != want {
			t.Errorf("includeknown=scalemod=%q: IncludeKnown %v ScaleModule %v (err %v), want %v", v, o.IncludeKnown, o.ScaleModule, err, want)
		}
	}
	o, err := FromArgs(map[string]string{"scenario": "churn", "churn": "90s", "repro": ReproDirectUnregisterLive}, HostEnv)
	if err != nil || o.Scenario != event.ScenarioChurn || o.Churn != 90*time.Second || o.Repro != ReproDirectUnregisterLive {
		t.Errorf("FromArgs: scenario %q churn %v repro %q, err %v", o.Scenario, o.Churn, o.Repro, err)
	}
	if _, err := FromArgs(map[string]string{"churn": "soon"}, HostEnv); err == nil {
		t.Error("churn=soon: no error")
	}
	if _, err := FromArgs(map[string]string{"nosuch": "1"}, HostEnv); !errors.Is(err, ErrUnknownOption) {
		t.Errorf("nosuch=1: %v, want ErrUnknownOption", err)
	}
}

// RacePort and KernelArgs answer what a cell needs from its options: the
// race port for the race scenario, for the campaign where the arch can
// inject, and for the repro sequences that hold vCPUs; a repro sequence's
// kernel parameters.
func TestCellNeeds(t *testing.T) {
	for _, tc := range []struct {
		args     map[string]string
		canRace  bool
		port     bool
		kernArgs int
	}{
		{map[string]string{"scenario": "race"}, false, true, 0},
		{map[string]string{"scenario": "campaign"}, true, true, 0},
		{map[string]string{"scenario": "campaign"}, false, false, 0},
		{map[string]string{"scenario": "churn"}, true, false, 0},
		{map[string]string{"scenario": "repro", "repro": ReproDirectUnregisterFree}, true, true, 1},
		{map[string]string{"scenario": "repro", "repro": ReproIPModifyFilter}, true, false, 0},
	} {
		o, err := FromArgs(tc.args, HostEnv)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := o.RacePort(tc.canRace); got != tc.port {
			t.Errorf("%v (can race %v): RacePort %v, want %v", tc.args, tc.canRace, got, tc.port)
		}
		if got := o.KernelArgs(); len(got) != tc.kernArgs {
			t.Errorf("%v: KernelArgs %v, want %d", tc.args, got, tc.kernArgs)
		}
	}
}

// TestRaceWalkAll: the campaign walks both trampoline kinds whole on
// x86_64, outside the shares; the other targets, and the other arches,
// take shares.
func TestRaceWalkAll(t *testing.T) {
	for _, tc := range []struct {
		target, goarch string
		want           bool
	}{
		{RaceFexitTrampoline, "amd64", true},
		{RaceTrampoline, "amd64", true},
		{RaceTrampoline, "riscv64", false},
		{RaceOpsTrampoline, "amd64", false},
		{RaceInt3, "amd64", false},
		{"nosuch", "amd64", false},
	} {
		if got := RaceWalkAll(tc.target, tc.goarch); got != tc.want {
			t.Errorf("RaceWalkAll(%s, %s) = %v, want %v", tc.target, tc.goarch, got, tc.want)
		}
	}
}
