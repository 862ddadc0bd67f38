package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/results/known"
	"github.com/ftrace-harness/fth/stress/attach"
	"github.com/ftrace-harness/fth/stress/deliver"
	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/ksyms"
	"github.com/ftrace-harness/fth/stress/livepatch"
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

// runDelivery loads fth_deliver.ko and runs the delivery churn on its
// callsite until ctx ends, then emits the oracle's summary and unloads the
// module. linkUpdate says BPF_LINK_UPDATE works on tracing links (7.3.4
// refuses it: EINVAL), so that fentry and fexit are replaced in place.
// openingDone is called once the churn's opening is over (not at all
// when the churn never starts).
func (a *agent) runDelivery(ctx context.Context, top tracefs.FS, loader *oracle.Loader, rec *tally.Recorder, linkUpdate bool, openingDone func()) {
	sum := event.Oracle{Name: event.OracleDelivery}
	emitSummary := func() { _ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &sum}) }
	path := filepath.Join(modload.DefaultDir, deliver.ModuleName+".ko")
	if err := modload.Load(path, ""); err != nil {
		sum.Skipped = fmt.Sprintf("load %s: %v", path, err)
		emit.Logf(a.w, "delivery: %s", sum.Skipped)
		emitSummary()
		return
	}
	a.logModule(deliver.ModuleName)
	defer func() {
		if err := modload.UnloadRetry(rec, deliver.ModuleName, 20); err != nil {
			emit.Logf(a.w, "delivery: unload: %v", err)
		}
	}()
	mod := deliver.Module{Dir: deliver.DefaultDir}
	if a.opts.Sabotage == options.SabotageDropCall {
		if err := mod.Sabotage(options.SabotageDropEvery); err != nil {
			emit.Logf(a.w, "delivery: sabotage: %v", err)
		}
		emit.Logf(a.w, "delivery: SABOTAGE drop-call: every user drops one call in %d", options.SabotageDropEvery)
	}

	groups := deliver.ModuleUsers()
	counted := map[string]deliver.Counted{}
	addrs, err := ksyms.ReadModule(ksyms.DefaultPath, deliver.ModuleName, []string{deliver.FuncSeq})
	if err != nil || len(addrs) == 0 {
		emit.Logf(a.w, "delivery: no kallsyms address for %s (%v): BPF users do not check func-ip", deliver.FuncSeq, err)
	}
	ml := loader.WithAddrs(addrs)
	for _, kind := range []oracle.Kind{oracle.FEntry, oracle.FExit} {
		b := &bpfCounted{a: a, l: ml, kind: kind, link: -1}
		counted[kind.String()] = b
		if linkUpdate {
			counted[kind.String()] = bpfUpdater{b}
		}
		groups[kind.String()] = deliver.GroupDirect
	}
	toggles := map[string]deliver.Toggle{}
	for _, t := range []struct {
		inst, tracer, name string
		group              deliver.Group
	}{
		{deliverFnInstance, tracefs.Function, "function-tracer", "function-tracer"},
		{deliverGraphInstance, tracefs.FunctionGraph, "graph-tracer", deliver.GroupFgraph},
	} {
		inst, err := top.Instance(t.inst)
		if err != nil {
			emit.Logf(a.w, "delivery: %s: %v", t.name, err)
			continue
		}
		_ = inst.SetBufferKB(64)
		defer func() { _ = inst.Reset(); _ = top.RemoveInstance(t.inst) }()
		toggles[t.name] = tracerToggle{fs: inst, tracer: t.tracer}
		groups[t.name] = t.group
	}

	// Churn calls Fail from one goroutine at a time (under its lock).
	emitted := 0
	skip := map[string]string{}
	for _, u := range a.opts.DeliverSkip {
		skip[u] = "left out (deliverskip=" + strings.Join(a.opts.DeliverSkip, ",") + ")"
		if f, ok := known.ByDeliverUser(u); ok {
			skip[u] += ": known finding " + f.ID + " (docs/findings.md): " + f.Title
		}
	}
	if a.opts.ScaleModule {
		// The tracer toggles filter fth_deliver's function, a module's:
		// no index names it.
		for u := range toggles {
			if _, ok := skip[u]; !ok {
				skip[u] = scaleNameFilter
			}
		}
	}
	external := map[string]deliver.External{}
	if why := livepatchUser(); why != "" {
		skip[deliver.UserLivepatch] = why
	} else {
		external[deliver.UserLivepatch] = klpUser{a: a, ctx: ctx, rec: rec}
	}
	var avoid []deliver.Avoid
	if !a.opts.IncludeKnown {
		for _, f := range known.All() {
			for _, c := range f.DeliverChanges {
				avoid = append(avoid, deliver.Avoid{User: c.Attach, Beside: c.Beside, Why: "known finding " + f.ID + " (docs/findings.md)"})
			}
		}
	}
	res, err := deliver.Churn(ctx, deliver.Config{
		Mod: mod, Counted: counted, Toggles: toggles, External: external, Groups: groups, Skip: skip, Avoid: avoid,
		Opening: deliver.Opening(), OpeningDone: openingDone,
		Rng: rand.New(rand.NewPCG(uint64(a.opts.Seed), streamDeliver)),
		Fail: func(o event.Oracle) {
			if emitted++; emitted <= maxDeliveryEvents {
				_ = a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
				a.oracleFail(o)
			}
		},
		Logf: func(format string, args ...any) { emit.Logf(a.w, format, args...) },
		Callsite: func() string {
			b, err := os.ReadFile(filepath.Join(top.Root, "enabled_functions"))
			if err != nil {
				return ""
			}
			return deliver.CallsiteLine(string(b))
		},
	})
	if err != nil {
		emit.Logf(a.w, "delivery: %v", err)
	}
	sum.Checks = int(res.Checked)
	sum.Failures = res.Failures
	sum.OK = res.Failures == 0
	sum.Msg = deliverySummary(res)
	if err != nil && res.Steps == 0 {
		sum.Skipped = err.Error()
	}
	emit.Logf(a.w, "delivery: %d steps, %d calls checked, %d failures; %s", res.Steps, res.Checked, res.Failures, sum.Msg)
	names := slices.Sorted(maps.Keys(groups))
	ev := res.Event(names)
	_ = a.w.Emit(event.Event{Kind: event.KindDelivery, Delivery: &ev})
	emitSummary()
}

// deliverySummary says which users attached, which the kernel could not
// provide, and the states and edges covered.
func deliverySummary(r deliver.Result) string {
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
	s += "; states: " + deliver.EdgeTable(r.States) + "; edges: " + deliver.EdgeTable(r.Edges)
	if len(r.OrderGoal) > 0 {
		missing := event.MissingOrders(r.OrderGoal, r.Orders)
		s += fmt.Sprintf("; registration orders %d of %d", len(r.OrderGoal)-len(missing), len(r.OrderGoal))
		if len(missing) > 0 {
			s += " (not made: " + strings.Join(missing, "; ") + ")"
		}
	}
	return s
}

// bpfCounted is a func-ip fentry or fexit program on FuncSeq, counting in
// the oracle map's slot for its kind.
type bpfCounted struct {
	a    *agent
	l    *oracle.Loader
	kind oracle.Kind
	link int
	prev oracle.Counters
	slot uint32
	// progs are the programs of the attachment in place, kept open for
	// their recursion-miss counts; missed sums those of detached ones.
	progs  []*ebpf.Program
	missed uint64
}

func (b *bpfCounted) key() string { return oracle.Key(b.kind, deliver.FuncSeq) }

func (b *bpfCounted) Attach() error {
	ld, err := b.l.Load(deliver.FuncSeq, b.kind, b.key())
	if err != nil {
		return err
	}
	b.slot = ld.FuncIP.Slot
	b.prev, _ = b.l.Map.Read(b.slot)
	fd, errno := attach.LinkCreate(ld.Prog.FD(), b.kind.LinkType())
	if errno != 0 {
		ld.Prog.Close()
		return fmt.Errorf("BPF_LINK_CREATE: %w: %w", deliver.ErrRefused, errno)
	}
	b.link = fd
	b.progs = append(b.progs, ld.Prog)
	return nil
}

func (b *bpfCounted) Detach() error {
	if b.link < 0 {
		return nil
	}
	err := unix.Close(b.link)
	b.link = -1
	for _, p := range b.progs {
		if st, serr := p.Stats(); serr == nil {
			b.missed += st.RecursionMisses
		}
		p.Close()
	}
	b.progs = nil
	if exp, ok := b.l.Expected(deliver.FuncSeq); ok && b.l.Checking() {
		if cur, rerr := b.l.Map.Read(b.slot); rerr == nil {
			if o := oracle.CheckFuncIP(deliver.FuncSeq, b.kind, exp, b.prev, cur); !o.OK {
				_ = b.a.w.Emit(event.Event{Kind: event.KindOracle, Oracle: &o})
				b.a.oracleFail(o)
			}
		}
	}
	return err
}

// Missed is how many runs the kernel skipped because the program was
// already running on that CPU (BPF's per-CPU recursion guard: a caller
// preempted inside the program, another caller on its CPU): by design,
// not a lost call. Complete once the user is detached.
func (b *bpfCounted) Missed() (uint64, error) { return b.missed, nil }

// bpfUpdater is a bpfCounted that can be replaced in place.
type bpfUpdater struct{ *bpfCounted }

// Update replaces the attached program with a new one counting in the
// same slot (BPF_LINK_UPDATE): the trampoline is regenerated and the
// callsite's direct call modified, a transition for every other user.
func (b bpfUpdater) Update() error { return b.update() }

func (b *bpfCounted) update() error {
	if b.link < 0 {
		return fmt.Errorf("%s: not attached", b.kind)
	}
	ld, err := b.l.Load(deliver.FuncSeq, b.kind, b.key())
	if err != nil {
		return err
	}
	if errno := attach.LinkUpdate(b.link, ld.Prog.FD()); errno != 0 {
		ld.Prog.Close()
		return fmt.Errorf("BPF_LINK_UPDATE: %w", errno)
	}
	b.progs = append(b.progs, ld.Prog)
	return nil
}

func (b *bpfCounted) Hits() (uint64, error) {
	slot, err := b.l.Map.Slot(b.key())
	if err != nil {
		return 0, err
	}
	c, err := b.l.Map.Read(slot)
	return c.Hits, err
}

// tracerToggle switches a tracer filtered to FuncSeq on and off in an
// instance of its own.
type tracerToggle struct {
	fs     tracefs.FS
	tracer string
}

func (t tracerToggle) On() error {
	if err := t.fs.SetFilter(deliver.FuncSeq); err != nil {
		return err
	}
	return t.fs.SetTracer(t.tracer)
}

func (t tracerToggle) Off() error { return t.fs.SetTracer(tracefs.Nop) }

// klpModule is the delivery oracle's livepatch (stress/kmod-klp).
const klpModule = "fth_klp"

// klpPath is klpModule's file in the image.
const klpPath = modload.DefaultDir + "/" + klpModule + ".ko"

// livepatchUser says why the livepatch user cannot run here ("" if it
// can): no module file, or a kernel without CONFIG_LIVEPATCH.
func livepatchUser() string {
	if _, err := os.Stat(klpPath); err != nil {
		return klpModule + ".ko is not in the image"
	}
	return livepatch.Supported(livepatch.DefaultDir)
}

// klpUser attaches the livepatch user by loading fth_klp.ko and detaches
// it by disabling the patch and unloading the module, each waiting out
// the per-task transition (up to a minute: a task is switched only when
// the patched function is off its stack).
type klpUser struct {
	a   *agent
	ctx context.Context
	rec *tally.Recorder
}

func (k klpUser) patch() livepatch.Patch {
	return livepatch.Patch{
		Dir: livepatch.DefaultDir, Name: klpModule, Timeout: time.Minute,
		Load: func() error {
			return k.rec.Time(modload.OpLoad, klpModule, func() error {
				return modload.Load(klpPath, "")
			})
		},
		Unload: func() error { return modload.UnloadRetry(k.rec, klpModule, 50) },
	}
}

func (k klpUser) Attach() error {
	if err := k.patch().Enable(k.ctx); err != nil {
		return err
	}
	k.a.logModule(klpModule)
	return nil
}

func (k klpUser) Detach() error { return k.patch().Disable(context.WithoutCancel(k.ctx)) }
