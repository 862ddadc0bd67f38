package deliver

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/oracle"
	"github.com/ftrace-harness/fth/stress/tally"
	"github.com/ftrace-harness/fth/stress/tracefs"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// streamDeliver is the delivery churn's seeded stream.
const streamDeliver = 0x66746864656c6976

// maxDeliveryEvents bounds the failure events one run emits: a broken
// kernel misses calls in every window, and the first ones say it all.
const maxDeliveryEvents = 20

// The tracefs instances whose tracers are the delivery churn's toggles.
const (
	deliverFnInstance    = "fth_deliver_fn"
	deliverGraphInstance = "fth_deliver_graph"
)

// Companion is what a companion of the churn (this oracle, the module
// churn of stress/modchurn) takes from the churn it runs beside.
type Companion struct {
	// W receives the companion's events and log lines.
	W *emit.Writer
	// Opts are the run's options (the seed, includeknown, the
	// sabotages, each companion's own).
	Opts options.Options
	// Top is tracefs's top level, of which the companion's tracer
	// instances are made; its enabled_functions describes a callsite.
	Top tracefs.FS
	// Loader loads the companion's BPF programs, counting in its oracle
	// map.
	Loader *oracle.Loader
	// Rec times and counts the module loads and unloads.
	Rec *tally.Recorder
	// NoNameFilter says why a tracefs filter cannot name a module's
	// function here ("" if it can): the tracers that filter a module's
	// functions are left out with it.
	NoNameFilter string
	// OracleFail records a failed check, whose event is already emitted,
	// for the run's verdict.
	OracleFail func(event.Oracle)
}

// Env is what Run takes from the churn it runs beside.
type Env struct {
	Companion
	// LinkUpdate says BPF_LINK_UPDATE works on tracing links (7.3.4
	// refuses it: EINVAL), so that fentry and fexit are replaced in
	// place.
	LinkUpdate bool
	// OpeningDone is called once the churn's opening is over (not at all
	// when the churn never starts).
	OpeningDone func()
}

// Run loads fth_deliver.ko and runs the delivery churn (Churn) on its
// callsite with the agent's users and the module's until ctx ends, then
// emits the oracle's summary and unloads the module.
func Run(ctx context.Context, env Env) {
	w := env.W
	sum := event.Oracle{Name: event.OracleDelivery}
	emitSummary := func() { _ = w.Emit(event.Event{Kind: event.KindOracle, Oracle: &sum}) }
	fail := func(o event.Oracle) {
		_ = w.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
		env.OracleFail(o)
	}
	path := filepath.Join(modload.DefaultDir, ModuleName+".ko")
	if err := modload.Load(path, ""); err != nil {
		sum.Skipped = fmt.Sprintf("load %s: %v", path, err)
		emit.Logf(w, "delivery: %s", sum.Skipped)
		emitSummary()
		return
	}
	modload.LogLoaded(w, ModuleName)
	defer func() {
		if err := modload.UnloadRetry(env.Rec, ModuleName, 20); err != nil {
			emit.Logf(w, "delivery: unload: %v", err)
		}
	}()
	mod := Module{Dir: DefaultDir}
	if env.Opts.Sabotage == options.SabotageDropCall {
		if err := mod.Sabotage(options.SabotageDropEvery); err != nil {
			emit.Logf(w, "delivery: sabotage: %v", err)
		}
		emit.Logf(w, "delivery: SABOTAGE drop-call: every user drops one call in %d", options.SabotageDropEvery)
	}

	groups := ModuleUsers()
	counted := map[string]Counted{}
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, ModuleName, []string{FuncSeq})
	if err != nil || len(addrs) == 0 {
		emit.Logf(w, "delivery: no kallsyms address for %s (%v): BPF users do not check func-ip", FuncSeq, err)
	}
	ml := env.Loader.WithAddrs(addrs)
	for _, kind := range []oracle.Kind{oracle.FEntry, oracle.FExit} {
		b := newBPFCounted(ml, kind, fail)
		counted[kind.String()] = b
		if env.LinkUpdate {
			counted[kind.String()] = bpfUpdater{b}
		}
		groups[kind.String()] = GroupDirect
	}
	toggles := map[string]Toggle{}
	for _, t := range []struct {
		inst, tracer, name string
		group              Group
	}{
		{deliverFnInstance, tracefs.Function, "function-tracer", "function-tracer"},
		{deliverGraphInstance, tracefs.FunctionGraph, "graph-tracer", GroupFgraph},
	} {
		inst, err := env.Top.Instance(t.inst)
		if err != nil {
			emit.Logf(w, "delivery: %s: %v", t.name, err)
			continue
		}
		_ = inst.SetBufferKB(64)
		defer func() { _ = inst.Reset(); _ = env.Top.RemoveInstance(t.inst) }()
		toggles[t.name] = tracerToggle{fs: inst, tracer: t.tracer}
		groups[t.name] = t.group
	}

	// Churn calls Fail from one goroutine at a time (under its lock).
	emitted := 0
	skip := map[string]string{}
	for _, u := range env.Opts.DeliverSkip {
		skip[u] = "left out (deliverskip=" + strings.Join(env.Opts.DeliverSkip, ",") + ")"
		if f, ok := known.ByDeliverUser(u); ok {
			skip[u] += ": known finding " + f.ID + " (docs/findings.md): " + f.Title
		}
	}
	if env.NoNameFilter != "" {
		// The tracer toggles filter fth_deliver's function, a module's.
		for u := range toggles {
			if _, ok := skip[u]; !ok {
				skip[u] = env.NoNameFilter
			}
		}
	}
	external := map[string]External{}
	if why := NoLivepatch(); why != "" {
		skip[UserLivepatch] = why
	} else {
		external[UserLivepatch] = NewKLPUser(ctx, env.Rec, env.W)
	}
	var avoid []Avoid
	if !env.Opts.IncludeKnown {
		for _, f := range known.All() {
			for _, c := range f.DeliverChanges {
				avoid = append(avoid, Avoid{User: c.Attach, Beside: c.Beside, Why: "known finding " + f.ID + " (docs/findings.md)"})
			}
		}
	}
	res, err := Churn(ctx, Config{
		Mod: mod, Counted: counted, Toggles: toggles, External: external, Groups: groups, Skip: skip, Avoid: avoid,
		Opening: Opening(), OpeningDone: env.OpeningDone,
		Rng: rand.New(rand.NewPCG(uint64(env.Opts.Seed), streamDeliver)),
		Fail: func(o event.Oracle) {
			if emitted++; emitted <= maxDeliveryEvents {
				fail(o)
			}
		},
		Logf: func(format string, args ...any) { emit.Logf(w, format, args...) },
		Callsite: func() string {
			b, err := os.ReadFile(filepath.Join(env.Top.Root, "enabled_functions"))
			if err != nil {
				return ""
			}
			return CallsiteLine(string(b))
		},
	})
	if err != nil {
		emit.Logf(w, "delivery: %v", err)
	}
	sum.Checks = int(res.Checked)
	sum.Failures = res.Failures
	sum.OK = res.Failures == 0
	sum.Msg = res.Summary()
	if err != nil && res.Steps == 0 {
		sum.Skipped = err.Error()
	}
	emit.Logf(w, "delivery: %d steps, %d calls checked, %d failures; %s", res.Steps, res.Checked, res.Failures, sum.Msg)
	names := slices.Sorted(maps.Keys(groups))
	ev := res.Event(names)
	_ = w.Emit(event.Event{Kind: event.KindDelivery, Delivery: &ev})
	emitSummary()
}

// Summary says which users attached, which the kernel could not
// provide, and the states and edges covered: the oracle's summary
// message.
func (r Result) Summary() string {
	var users []string
	for _, u := range slices.Sorted(maps.Keys(r.Attaches)) {
		users = append(users, fmt.Sprintf("%s %d", u, r.Attaches[u]))
	}
	for _, u := range slices.Sorted(maps.Keys(r.Refused)) {
		if r.Attaches[u] == 0 {
			users = append(users, fmt.Sprintf("%s refused %d", u, r.Refused[u]))
		}
	}
	var failed []string
	for _, u := range slices.Sorted(maps.Keys(r.Failed)) {
		failed = append(failed, fmt.Sprintf("%s %d", u, r.Failed[u]))
	}
	var skipped []string
	for _, u := range slices.Sorted(maps.Keys(r.Skipped)) {
		skipped = append(skipped, u+" ("+r.Skipped[u]+")")
	}
	var avoided []string
	for _, u := range slices.Sorted(maps.Keys(r.Avoided)) {
		avoided = append(avoided, fmt.Sprintf("%s %d", u, r.Avoided[u]))
	}
	var updates []string
	for _, u := range slices.Sorted(maps.Keys(r.Updates)) {
		updates = append(updates, fmt.Sprintf("%s %d", u, r.Updates[u]))
	}
	s := "attached: " + strings.Join(users, ", ")
	if len(updates) > 0 {
		s += "; updated: " + strings.Join(updates, ", ")
	}
	if len(failed) > 0 {
		s += "; findings: " + strings.Join(failed, ", ")
	}
	if len(skipped) > 0 {
		s += "; skipped: " + strings.Join(skipped, ", ")
	}
	if len(avoided) > 0 {
		s += "; attaches not made (a known finding's trigger): " + strings.Join(avoided, ", ")
	}
	s += "; states: " + EdgeTable(r.States) + "; edges: " + EdgeTable(r.Edges)
	if len(r.OrderGoal) > 0 {
		missing := event.MissingOrders(r.OrderGoal, r.Orders)
		s += fmt.Sprintf("; registration orders %d of %d", len(r.OrderGoal)-len(missing), len(r.OrderGoal))
		if len(missing) > 0 {
			s += " (not made: " + strings.Join(missing, "; ") + ")"
		}
	}
	return s
}
