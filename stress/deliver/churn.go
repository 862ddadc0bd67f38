package deliver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/internal/ctxsleep"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// Counted is a user the agent attaches itself that counts its hits but
// cannot read the call numbers: a BPF fentry or fexit program. Its window
// is judged by bounds (see checkCount).
type Counted interface {
	// Attach attaches the user; Detach detaches it.
	Attach() error
	Detach() error
	// Hits is the user's running total of calls received.
	Hits() (uint64, error)
	// Missed is the user's running total of calls the kernel skipped by
	// design (BPF's per-CPU recursion guard), complete after Detach.
	Missed() (uint64, error)
}

// Updater is a Counted user that can replace itself while attached (a
// BPF link update). Its window stays open through the update: a call
// reaches the old program or the new one, which count together.
type Updater interface {
	Update() error
}

// External attaches and detaches a user of the module that another module
// carries (livepatch: loading fth_klp.ko enables its patch, disabling and
// unloading it detaches). The module judges it like its own users; Churn
// brackets each call with the module's halves (Module.External).
type External interface {
	Attach() error
	Detach() error
}

// Toggle is a user that changes the callsite but counts nothing the
// oracle can read: a function or function_graph tracer in an instance
// filtered to FuncSeq (its ring buffer drops under this load).
type Toggle interface {
	On() error
	Off() error
}

// Group names the ftrace_ops a user dispatches through, which decides the
// callsite's state: users of one group share one ops.
type Group string

// Groups beyond a module ops user's own name.
const (
	GroupDirect Group = "direct" // BPF trampolines: a direct call
	GroupKprobe Group = "kprobe" // kprobe_ftrace_ops, shared by kprobes and kretprobes
	GroupFgraph Group = "fgraph" // fgraph's ops, shared by fprobe and function_graph
)

// ModuleUsers are the users fth_deliver.ko offers, with their groups.
func ModuleUsers() map[string]Group {
	return map[string]Group{
		"ops": "ops", "ops-regs": "ops-regs", "ops-ipmodify": "ops-ipmodify",
		"ops-recursion": "ops-recursion", "ops-multi": "ops-multi", "ops-notrace": "ops-notrace",
		"kprobe": GroupKprobe, "kretprobe": GroupKprobe, "fprobe": GroupFgraph,
		// One direct call per function: it excludes the BPF trampoline.
		"direct": GroupDirect,
		// fth_klp.ko's patch: klp's own IPMODIFY ops, one per function.
		"livepatch": "livepatch",
	}
}

// ErrRefused marks an attach the kernel refused (a Counted user's
// BPF_LINK_CREATE errno), as opposed to one the harness could not make.
var ErrRefused = errors.New("refused by the kernel")

// excludes lists the users the kernel lets only one of onto a function at
// a time: one direct call per function, so fth_deliver's own direct call
// and a BPF trampoline refuse each other. A Counted user's refusal with
// none of its pair attached is a finding (a direct_functions entry or a
// record's flag left behind by a user that went). Only Counted users are
// judged: a module user's ctl write can fail in the module itself.
var excludes = map[string][]string{
	"fentry": {"direct"},
	"fexit":  {"direct"},
}

// AgentUsers are the users the agent attaches itself: the BPF programs
// (Counted) and the tracers (Toggle).
func AgentUsers() []string { return []string{"fentry", "fexit", "function-tracer", "graph-tracer"} }

// UserNames are every user the delivery churn knows, sorted: the wire's
// list, which ModuleUsers and AgentUsers cover (TestUserNames).
func UserNames() []string { return options.DeliveryUsers() }

// State names the callsite's dispatch state for the set of groups
// attached: nop; one ops (the CALL_OPS literal's single ops, or an x86 ops
// trampoline); the list (ftrace_ops_list_func); a direct call alone; a
// direct call with other ops.
func State(groups map[Group]int) string {
	ops, direct := 0, false
	for g, n := range groups {
		if n == 0 {
			continue
		}
		if g == GroupDirect {
			direct = true
		} else {
			ops++
		}
	}
	switch {
	case direct && ops > 0:
		return "direct+ops"
	case direct:
		return "direct"
	case ops > 1:
		return "list"
	case ops == 1:
		return "one-ops"
	default:
		return "nop"
	}
}

// checkEvery is the period of checkpoints between steps.
const checkEvery = 500 * time.Millisecond

// Config is what Churn needs.
type Config struct {
	Mod Module
	// Skip names users not to attach, with the reason reported for each.
	Skip map[string]string
	// Avoid are attaches the churn does not make (a known finding's
	// trigger): the users stay in, that one change is never made.
	Avoid []Avoid
	// Counted and Toggles are the agent's users by name, with groups.
	Counted map[string]Counted
	Toggles map[string]Toggle
	// External drives the module's external users by name; one without a
	// driver here is skipped.
	External map[string]External
	Groups   map[string]Group
	Rng      *rand.Rand
	// Pause is the time between steps, so that calls are made in every
	// state (default 10ms).
	Pause time.Duration
	// Opening are changes made in this order before the walk, each held
	// for OpeningHold (default 300ms) so that calls run in every state it
	// passes through; a user the churn leaves out is passed over. Opening
	// gives the sequences a bug is known to need (Opening's doc).
	// Steps made with FilterStep change a filter instead.
	Opening     []string
	OpeningHold time.Duration
	// OpeningDone, when set, is called once the opening is over: every
	// step made or passed over, or ctx ended.
	OpeningDone func()
	// Fail receives every failed check as it is found, from one
	// goroutine at a time.
	Fail func(event.Oracle)
	// Callsite, when set, describes the callsite as the kernel sees it
	// when a finding is reported (its enabled_functions line): read then,
	// not at the moment of the miss.
	Callsite func() string
	Logf     func(format string, args ...any)
}

// Avoid is the attach of User while every user of Beside is attached,
// with Why the churn does not make it.
type Avoid struct {
	User   string
	Beside []string
	Why    string
}

// Result is what a churn did and covered.
type Result struct {
	Steps int
	// Checked counts the calls judged (module users and counted ones).
	Checked  uint64
	Failures int
	// Attaches and Refused count per user; Skipped says why a user could
	// not be attached at all.
	Attaches, Refused map[string]int
	// Updates counts link updates (Updater) and filter changes.
	Updates map[string]int
	// Failed counts each user's findings.
	Failed  map[string]int
	Skipped map[string]string
	// Avoided counts the attaches not made (Config.Avoid), by user.
	Avoided map[string]int
	// States and Edges count the callsite's states entered and the
	// transitions between them ("one-ops -> list").
	States, Edges map[string]int
	// Orders counts the registration orders of the direct call and each
	// other group made (event.DeliveryOrder); OrderGoal is every one the
	// churn's users can make, sorted.
	Orders    map[string]int
	OrderGoal []string
}

type churn struct {
	// mu guards history and the findings' reporting: the checkpoint
	// goroutine drains while a step may be blocked in the kernel.
	mu       sync.Mutex
	cfg      Config
	attached map[string]bool
	filtered map[string]bool
	groups   map[Group]int
	history  []Transition
	res      Result
	// counted users' windows in flight.
	open map[string]countWindow
	seq  int
	// tries counts the picks aimed at each edge not yet taken.
	tries map[string]int
}

// newChurn is a churn of cfg with nothing attached and nothing counted.
func newChurn(cfg Config) *churn {
	return &churn{
		cfg: cfg, attached: map[string]bool{}, filtered: map[string]bool{}, groups: map[Group]int{},
		open: map[string]countWindow{}, tries: map[string]int{},
		res: Result{Attaches: map[string]int{}, Refused: map[string]int{}, Updates: map[string]int{}, Failed: map[string]int{}, Skipped: map[string]string{},
			Avoided: map[string]int{}, States: map[string]int{}, Edges: map[string]int{}, Orders: map[string]int{}},
	}
}

type countWindow struct {
	before Calls  // read before the attach began
	after  Calls  // read after it returned
	hits   uint64 // the user's totals before the attach
	missed uint64
}

// Churn attaches and detaches every user on fth_deliver_seq in a seeded
// random order until ctx ends, judging each window, then detaches all.
func Churn(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Pause <= 0 {
		cfg.Pause = 10 * time.Millisecond
	}
	c := newChurn(cfg)
	users, err := cfg.Mod.Users()
	if err != nil {
		return c.res, fmt.Errorf("deliver: %w", err)
	}
	var names []string
	for _, u := range users {
		if why := skipReason(u, cfg); why != "" {
			c.res.Skipped[u.Name] = why
			continue
		}
		names = append(names, u.Name)
		if u.Name == "ops-multi" {
			c.filtered[u.Name] = true
		}
	}
	// The agent's own users are left out as the module's are.
	for _, n := range append(slices.Sorted(maps.Keys(cfg.Counted)), slices.Sorted(maps.Keys(cfg.Toggles))...) {
		if why := cfg.Skip[n]; why != "" {
			c.res.Skipped[n] = why
			continue
		}
		names = append(names, n)
	}
	c.res.OrderGoal = orderGoal(names, cfg.Groups)
	c.res.States[State(c.groups)]++
	if err := cfg.Mod.Run(true); err != nil {
		return c.res, fmt.Errorf("deliver: start callers: %w", err)
	}
	// A step can wait seconds for ftrace_lock (thousands of trampolines
	// attached): checkpoints go on meanwhile, so that a miss is reported
	// when it happens.
	cctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(checkEvery)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-t.C:
				c.drain()
			}
		}
	}()
	defer func() { stop(); wg.Wait() }()
	if cfg.OpeningHold <= 0 {
		cfg.OpeningHold = 300 * time.Millisecond
	}
	for _, step := range cfg.Opening {
		n, filter := strings.CutPrefix(step, filterStep)
		n, on := strings.CutPrefix(n, onStep)
		n, off := strings.CutPrefix(n, offStep)
		if ctx.Err() != nil || !slices.Contains(names, n) || c.avoided(n) || (filter && !c.filterable(n)) ||
			(on && c.attached[n]) || (off && !c.attached[n]) {
			continue
		}
		if filter {
			c.changeFilter(n)
		} else {
			c.toggle(n)
		}
		c.drain()
		c.res.Steps++
		ctxsleep.Sleep(ctx, cfg.OpeningHold)
	}
	if cfg.OpeningDone != nil {
		cfg.OpeningDone()
	}
	for _, a := range cfg.Avoid {
		verb := "is"
		if len(a.Beside) > 1 {
			verb = "are"
		}
		cfg.Logf("deliver: the churn does not attach %s while %s %s attached: %s", a.User, strings.Join(a.Beside, " and "), verb, a.Why)
	}
	for ctx.Err() == nil {
		if n := c.pick(names); n != "" {
			c.step(n)
		}
		c.drain()
		c.res.Steps++
		select {
		case <-ctx.Done():
		case <-time.After(cfg.Pause):
		}
	}
	stop()
	wg.Wait()
	for _, name := range slices.Sorted(maps.Keys(c.attached)) {
		if c.attached[name] {
			c.toggle(name)
		}
	}
	c.drain()
	rerr := cfg.Mod.Run(false)
	if users, err := cfg.Mod.Users(); err == nil {
		for _, u := range users {
			c.res.Checked += u.Checked
		}
	}
	return c.res, rerr
}

// Opening is the churn's default opening. First the function's one
// direct call changes hands: fth_deliver's own direct call comes and
// goes, and a BPF trampoline comes and goes, so that whatever the leaving
// direct user's bookkeeping keeps (a direct_functions entry, a record's
// flag) shows at once as that trampoline refused or misdelivered. Then an
// ops alone on the callsite (x86: its own trampoline) has a kprobe join
// it and leave, a live call retargeted each way, and its filter grows and
// shrinks with the kprobe beside it and alone: an ops that stays attached
// must be called throughout. While its filter holds fth_deliver_other,
// ops-multi joins it there, so that the other function's callsite calls
// the list function, and ops-notrace (both functions in its filter, the
// other in its notrace hash) comes and goes: the list function must pass
// it over for the other function (ftrace_ops_test()'s notrace rule; a
// random walk met this state in 1 of 2 campaigns, 2026-11-29). Then both ways of the sharing handshake between an
// IPMODIFY ops and a BPF trampoline that calls the original, each made
// and unmade with calls running: a fexit attached before the livepatch is
// asked to share (its image rebuilt to call the original through the
// moved return address); a livepatch detached beside it is asked to stop;
// a fexit attached beside the livepatch shares from the start. Last the
// direct call changes hands the other way: the BPF trampoline goes,
// fth_deliver's own direct call comes and goes, and a trampoline comes
// back. A random walk makes these orders only by luck. In the campaign,
// with thousands of trampolines live, a change took seconds on a slow
// machine and the churn's budget ended after 8 of them (2026-11-28): the
// campaign waits for the opening (Config.OpeningDone).
//
// Then both registration orders of the direct call and every other
// group (OrderUsers): with the fentry on, one user of each group joins
// it; the fentry leaves and comes back, joining them all at once; they
// leave. A group's bug that bites in one order alone (riscv64's
// trampolines each have an ops of their own, called by the list function
// in the order they came) is then met in both.
func Opening() []string {
	out := []string{"direct", "direct", "fentry", "fentry",
		"ops-recursion", "kprobe", FilterStep("ops-recursion"),
		"ops-multi", "ops-notrace", "ops-notrace", "ops-multi",
		"kprobe", FilterStep("ops-recursion"), "ops-recursion",
		"fexit", UserLivepatch, UserLivepatch, UserLivepatch, "fexit", "fexit", UserLivepatch,
		"fexit", "direct", "direct", "fentry"}
	// The fentry is on: each group joins it; the fentry leaves and comes
	// back; they leave.
	for _, u := range OrderUsers() {
		out = append(out, onStep+u)
	}
	out = append(out, offStep+"fentry", onStep+"fentry")
	for _, u := range OrderUsers() {
		out = append(out, offStep+u)
	}
	return out
}

// OrderUsers are the users the opening makes the registration orders
// with, one of each group but the direct call's and ops-ipmodify's,
// which the campaign leaves out by default (a known finding's trigger)
// and the walk aims at where it is in.
func OrderUsers() []string {
	return []string{"ops", "ops-regs", "ops-recursion", "ops-multi", "ops-notrace", "kprobe", "fprobe", "function-tracer", UserLivepatch}
}

// onStep and offStep prefix an opening step that attaches a user, or
// detaches it, and is passed over when the user already is so (a refused
// attach earlier leaves it off): a plain step toggles.
const (
	onStep  = "on "
	offStep = "off "
)

// filterStep prefixes an opening step that changes a module ops's filter
// instead of attaching or detaching it (FilterStep).
const filterStep = "filter "

// FilterStep is the opening step that adds fth_deliver_other to user's
// filter, or takes it out again, while user stays attached; it is passed
// over when user is not attached then.
func FilterStep(user string) string { return filterStep + user }

// skipReason says why the churn leaves module user u out, "" if it does
// not: the kernel cannot provide it, the agent was told to, or it is
// external with no driver.
func skipReason(u User, cfg Config) string {
	noDriver := ""
	if u.External && cfg.External[u.Name] == nil {
		noDriver = "carried by another module, which this agent does not drive"
	}
	return cmp.Or(u.Skip, cfg.Skip[u.Name], noDriver)
}

// pick chooses the next user to change. Half the time it aims at what is
// not yet covered: a user never attached (CI's 3-minute churn on a slow
// machine made 54 walk steps and never attached kretprobe, seed
// 1795847572169310018), else a change of the callsite's state not yet
// made (event.DeliveryEdges), if one user can make it: some edges need
// one of two users out of a dozen picked in one state, and a 3-minute
// random walk missed them (CI, seed 1795701389606142079). Otherwise,
// with k users attached it detaches one with probability k/(k+2), so
// that the walk hovers around two users and reaches nop, one ops and a
// direct call alone as often as the list: a uniform pick over a dozen
// users sits at half of them.
func (c *churn) pick(names []string) string {
	names = slices.DeleteFunc(slices.Clone(names), c.avoided)
	if len(names) == 0 {
		return ""
	}
	if c.cfg.Rng.IntN(2) == 0 {
		if n, ok := c.neverAttached(names); ok {
			return n
		}
		if n, ok := c.uncovered(names); ok {
			return n
		}
		if n, ok := c.unordered(names); ok {
			return n
		}
	}
	var on, off []string
	for _, n := range names {
		if c.attached[n] {
			on = append(on, n)
		} else {
			off = append(off, n)
		}
	}
	if len(off) == 0 || (len(on) > 0 && c.cfg.Rng.IntN(len(on)+2) >= 2) {
		return on[c.cfg.Rng.IntN(len(on))]
	}
	return off[c.cfg.Rng.IntN(len(off))]
}

// avoided reports whether attaching name now is a change Config.Avoid
// names, and counts it.
func (c *churn) avoided(name string) bool {
	if c.attached[name] {
		return false
	}
	for _, a := range c.cfg.Avoid {
		if a.User == name && !slices.ContainsFunc(a.Beside, func(b string) bool { return !c.attached[b] }) {
			c.res.Avoided[name]++
			return true
		}
	}
	return false
}

// neverAttached returns, at random, a detached user never attached yet
// whose attach the kernel has refused fewer than maxTries times.
func (c *churn) neverAttached(names []string) (string, bool) {
	var left []string
	for _, n := range names {
		if !c.attached[n] && c.res.Attaches[n] == 0 && c.res.Refused[n] < maxTries {
			left = append(left, n)
		}
	}
	if len(left) == 0 {
		return "", false
	}
	return left[c.cfg.Rng.IntN(len(left))], true
}

// maxTries is how often the walk aims at an uncovered edge from its
// source state, or at a user's first attach, before it leaves it to
// chance: the kernel may refuse the attach that makes it.
const maxTries = 3

// aimDepth is how many changes ahead the walk looks for an uncovered
// edge: "direct -> nop" from the list takes three.
const aimDepth = 3

// uncovered returns a user whose change starts a shortest path, of at most
// aimDepth changes, whose last change takes an edge not yet taken; among
// several, one at random.
func (c *churn) uncovered(names []string) (string, bool) {
	if !slices.ContainsFunc(event.DeliveryEdges(), func(e string) bool { return c.res.Edges[e] == 0 && c.tries[e] < maxTries }) {
		return "", false
	}
	order := c.cfg.Rng.Perm(len(names))
	for depth := 1; depth <= aimDepth; depth++ {
		for _, i := range order {
			n := names[i]
			if e, ok := c.reaches(c.attached, c.groups, n, names, depth); ok {
				if depth == 1 {
					c.tries[e]++
				}
				return n, true
			}
		}
	}
	return "", false
}

// reaches reports whether changing name, then depth-1 more users, can take
// an uncovered edge last; and that edge when depth is 1.
func (c *churn) reaches(attached map[string]bool, groups map[Group]int, name string, names []string, depth int) (string, bool) {
	from := State(groups)
	groups = maps.Clone(groups)
	if attached[name] {
		groups[c.cfg.Groups[name]]--
	} else {
		groups[c.cfg.Groups[name]]++
	}
	to := State(groups)
	if depth == 1 {
		e := from + " -> " + to
		return e, to != from && c.res.Edges[e] == 0 && c.tries[e] < maxTries
	}
	attached = maps.Clone(attached)
	attached[name] = !attached[name]
	for _, n := range names {
		if _, ok := c.reaches(attached, groups, n, names, depth-1); ok {
			return "", true
		}
	}
	return "", false
}

// orderGoal is every registration order the users names can make: the
// direct call first and each other group second, and the other way.
func orderGoal(names []string, groups map[string]Group) []string {
	direct := slices.ContainsFunc(names, func(n string) bool { return groups[n] == GroupDirect })
	if !direct {
		return nil
	}
	var out []string
	for _, n := range names {
		if g := groups[n]; g != GroupDirect && g != "" {
			for _, o := range []string{event.DeliveryOrder(string(GroupDirect), string(g)), event.DeliveryOrder(string(g), string(GroupDirect))} {
				if !slices.Contains(out, o) {
					out = append(out, o)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// unordered returns a user whose change makes a registration order of
// the direct call and another group not made yet, or leads to one: with
// the direct call on, a group joining it, else the direct call leaving
// so that it can join a group it has not joined; with it off, the direct
// call joining a group attached, else such a group attaching first. A
// covering change is aimed at maxTries times at most (the kernel may
// refuse it).
func (c *churn) unordered(names []string) (string, bool) {
	missing := func(first, second Group) bool {
		o := event.DeliveryOrder(string(first), string(second))
		return slices.Contains(c.res.OrderGoal, o) && c.res.Orders[o] == 0 && c.tries[o] < maxTries
	}
	var joins, directOn, directOff, firsts []string
	var joinOrders []string
	// waiting are the orders of an attached group the direct call has
	// not joined yet.
	var waiting []string
	for g, k := range c.groups {
		if g != GroupDirect && k > 0 && missing(g, GroupDirect) {
			waiting = append(waiting, event.DeliveryOrder(string(g), string(GroupDirect)))
		}
	}
	for _, n := range names {
		g := c.cfg.Groups[n]
		switch {
		case g == GroupDirect && c.attached[n]:
			directOn = append(directOn, n)
		case g == GroupDirect:
			directOff = append(directOff, n)
		case c.attached[n] || c.groups[g] > 0:
		case c.groups[GroupDirect] > 0 && missing(GroupDirect, g):
			joins = append(joins, n)
			joinOrders = append(joinOrders, event.DeliveryOrder(string(GroupDirect), string(g)))
		case c.groups[GroupDirect] == 0 && missing(g, GroupDirect):
			firsts = append(firsts, n)
		}
	}
	aim := func(from []string) (string, bool) {
		if len(from) == 0 {
			return "", false
		}
		return from[c.cfg.Rng.IntN(len(from))], true
	}
	switch {
	case len(joins) > 0:
		i := c.cfg.Rng.IntN(len(joins))
		c.tries[joinOrders[i]]++
		return joins[i], true
	case c.groups[GroupDirect] > 0 && len(waiting) > 0:
		return aim(directOn)
	case c.groups[GroupDirect] == 0 && len(waiting) > 0:
		for _, o := range waiting {
			c.tries[o]++
		}
		return aim(directOff)
	case c.groups[GroupDirect] == 0:
		return aim(firsts)
	}
	return "", false
}

// step changes one user: an attached ops user sometimes changes its
// filter instead of detaching.
func (c *churn) step(name string) {
	if c.filterable(name) && c.cfg.Rng.IntN(3) == 0 {
		c.changeFilter(name)
		return
	}
	if name == "direct" && c.attached[name] && c.cfg.Rng.IntN(3) == 0 {
		if err := c.cfg.Mod.Modify(name); err != nil {
			c.cfg.Logf("deliver: modify %s: %v", name, err)
			return
		}
		c.res.Updates[name]++
		return
	}
	if u, ok := c.cfg.Counted[name].(Updater); ok && c.attached[name] && c.cfg.Rng.IntN(3) == 0 {
		c.seq++
		t := fmt.Sprintf("update %s#%d", name, c.seq)
		if err := c.cfg.Mod.Begin(t); err != nil {
			c.cfg.Logf("deliver: log the transition: %v", err)
			return
		}
		err := u.Update()
		_ = c.cfg.Mod.End(t)
		if err != nil {
			c.cfg.Logf("deliver: %s: %v", t, err)
			return
		}
		c.res.Updates[name]++
		return
	}
	c.toggle(name)
}

// filterable reports whether name's filter can change now: an attached
// module ops with a filter of one function and its other (not ops-multi,
// on both, nor ops-notrace, whose notrace hash holds the other).
func (c *churn) filterable(name string) bool {
	return c.attached[name] && c.isModuleOps(name) && name != "ops-multi" && name != "ops-notrace"
}

// changeFilter adds fth_deliver_other to name's filter, or takes it out:
// the ops stays attached to fth_deliver_seq throughout.
func (c *churn) changeFilter(name string) {
	add := !c.filtered[name]
	if err := c.cfg.Mod.Filter(name, add); err != nil {
		c.cfg.Logf("deliver: filter %v %s: %v", add, name, err)
		return
	}
	c.filtered[name] = add
	c.res.Updates[name]++
}

// judgeRefusal reports a Counted user's attach the kernel refused with
// nothing attached that it excludes.
func (c *churn) judgeRefusal(name string, err error) {
	if c.cfg.Counted[name] == nil || !errors.Is(err, ErrRefused) {
		return
	}
	var on []string
	for _, n := range slices.Sorted(maps.Keys(c.attached)) {
		if !c.attached[n] {
			continue
		}
		if slices.Contains(excludes[name], n) {
			return
		}
		on = append(on, n)
	}
	errno := "error"
	var en unix.Errno
	if errors.As(err, &en) {
		errno = unix.ErrnoName(en)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainTransitions()
	c.fail(Finding{Kind: KindRefused, User: name, Func: FuncSeq, Errno: errno, Attached: on})
}

func (c *churn) isModuleOps(name string) bool {
	return strings.HasPrefix(name, "ops")
}

// toggle attaches name if detached and detaches it if attached.
func (c *churn) toggle(name string) {
	on := !c.attached[name]
	var err error
	switch {
	case c.cfg.Counted[name] != nil:
		err = c.countedToggle(name, on)
	case c.cfg.External[name] != nil:
		err = c.externalToggle(name, on)
	case c.cfg.Toggles[name] != nil:
		err = c.agentTransition(name, on, func() error {
			if on {
				return c.cfg.Toggles[name].On()
			}
			return c.cfg.Toggles[name].Off()
		})
	case on:
		err = c.cfg.Mod.Attach(name)
	default:
		err = c.cfg.Mod.Detach(name)
	}
	if err != nil {
		if on {
			c.res.Refused[name]++
			c.judgeRefusal(name, err)
		}
		c.cfg.Logf("deliver: %s %s: %v", verb(on), name, err)
		if on {
			return
		}
		// A failed detach leaves it attached as far as we know.
		return
	}
	c.record(name, on)
}

// record notes that name was attached (on) or detached, and the change of
// the callsite's state it made.
func (c *churn) record(name string, on bool) {
	before := State(c.groups)
	c.attached[name] = on
	g := c.cfg.Groups[name]
	if on {
		if c.groups[g] == 0 {
			c.recordOrders(g)
		}
		c.groups[g]++
		c.res.Attaches[name]++
	} else {
		// A module ops user keeps its filter across a detach.
		c.groups[g]--
	}
	after := State(c.groups)
	c.res.States[after]++
	if after != before {
		c.res.Edges[before+" -> "+after]++
	}
}

// recordOrders counts the registration orders group g's first user makes
// as it joins the callsite: the direct call joining every other group
// there, or g joining the direct call.
func (c *churn) recordOrders(g Group) {
	for h, k := range c.groups {
		if k == 0 || h == g || (g != GroupDirect && h != GroupDirect) {
			continue
		}
		c.res.Orders[event.DeliveryOrder(string(h), string(g))]++
	}
}

func verb(on bool) string {
	if on {
		return "attach"
	}
	return "detach"
}

// agentTransition logs fn, a change the agent makes, as a transition.
func (c *churn) agentTransition(name string, on bool, fn func() error) error {
	c.seq++
	t := fmt.Sprintf("%s %s#%d", verb(on), name, c.seq)
	if err := c.cfg.Mod.Begin(t); err != nil {
		return fmt.Errorf("log the transition: %w", err)
	}
	err := fn()
	if eerr := c.cfg.Mod.End(t); eerr != nil && err == nil {
		err = fmt.Errorf("log the transition's end: %w", eerr)
	}
	return err
}

// externalToggle attaches or detaches an external user between the
// module's halves. A failed attach is aborted (nothing attached); a failed
// detach still ends: the module judges the window up to the detach's
// start, and a patch that stays applied shows as calls after it.
func (c *churn) externalToggle(name string, on bool) error {
	u := c.cfg.External[name]
	if on {
		if err := c.cfg.Mod.External(name, "attach-begin"); err != nil {
			return err
		}
		if err := u.Attach(); err != nil {
			if aerr := c.cfg.Mod.External(name, "attach-abort"); aerr != nil {
				c.cfg.Logf("deliver: %s: %v", name, aerr)
			}
			return err
		}
		return c.cfg.Mod.External(name, "attach-end")
	}
	if err := c.cfg.Mod.External(name, "detach-begin"); err != nil {
		return err
	}
	err := u.Detach()
	if eerr := c.cfg.Mod.External(name, "detach-end"); eerr != nil && err == nil {
		err = eerr
	}
	if err != nil {
		// Judged and closed in the module: no longer attached for the walk.
		c.record(name, false)
		return err
	}
	return nil
}

// totals reads a counting user's running totals.
func totals(u Counted) (hits, missed uint64, err error) {
	if hits, err = u.Hits(); err != nil {
		return 0, 0, err
	}
	missed, err = u.Missed()
	return hits, missed, err
}

func (c *churn) countedToggle(name string, on bool) error {
	u := c.cfg.Counted[name]
	if on {
		before, err := c.cfg.Mod.Calls()
		if err != nil {
			return err
		}
		hits, missed, err := totals(u)
		if err != nil {
			return err
		}
		if err := c.agentTransition(name, true, u.Attach); err != nil {
			return err
		}
		after, err := c.cfg.Mod.Calls()
		if err != nil {
			return err
		}
		c.open[name] = countWindow{before: before, after: after, hits: hits, missed: missed}
		return nil
	}
	w := c.open[name]
	pre, err := c.cfg.Mod.Calls()
	if err != nil {
		return err
	}
	if err := c.agentTransition(name, false, u.Detach); err != nil {
		return err
	}
	post, err := c.cfg.Mod.Calls()
	if err != nil {
		return err
	}
	hits, missed, err := totals(u)
	if err != nil {
		return err
	}
	delete(c.open, name)
	f, lower, ok := checkCount(name, w, pre, post, hits-w.hits, missed-w.missed)
	c.res.Checked += lower
	if !ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		// Transitions of the window may not have been drained yet.
		c.drainTransitions()
		f.Attribute(c.history)
		c.fail(f)
	}
	return nil
}

// checkCount judges a counting user's window: every call begun after its
// attach returned and done before its detach began (lower) must be
// counted or skipped by design (missed); no more than every call that
// could have overlapped the window (upper) may be counted.
func checkCount(user string, w countWindow, pre, post Calls, hits, missed uint64) (Finding, uint64, bool) {
	var lower, upper uint64
	win := make([]Span, len(pre))
	for i := range pre {
		if i < len(w.after) && pre[i].Done > w.after[i].Started {
			lower += pre[i].Done - w.after[i].Started
			win[i] = Span{BeginDone: w.after[i].Started, EndStarted: pre[i].Done}
		}
		if i < len(w.before) && i < len(post) {
			upper += post[i].Started - w.before[i].Done
		}
	}
	f := Finding{Kind: KindCount, User: user, Func: FuncSeq, From: lower, To: hits, Skipped: missed, Window: win}
	switch {
	case hits+missed < lower:
		f.Count = lower - hits - missed
		return f, lower, false
	case hits > upper:
		f.Kind = KindDup
		f.Count = hits - upper
		f.From, f.To = 0, 0
		return f, lower, false
	}
	return f, lower, true
}

func (c *churn) drainTransitions() {
	ts, err := c.cfg.Mod.Transitions()
	if err != nil {
		c.cfg.Logf("deliver: transitions: %v", err)
		return
	}
	c.history = append(c.history, ts...)
	// Attribution looks back one window at most; keep the log bounded.
	if n := len(c.history); n > 4096 {
		c.history = slices.Clone(c.history[n-2048:])
	}
}

// drain reads the module's findings and reports each.
func (c *churn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cfg.Mod.Check(); err != nil {
		c.cfg.Logf("deliver: check: %v", err)
	}
	c.drainTransitions()
	fs, err := c.cfg.Mod.Findings()
	if err != nil {
		c.cfg.Logf("deliver: findings: %v", err)
		return
	}
	for _, f := range fs {
		f.Attribute(c.history)
		c.fail(f)
	}
}

func (c *churn) fail(f Finding) {
	if c.cfg.Callsite != nil {
		f.Callsite = c.cfg.Callsite()
	}
	c.res.Failures++
	c.res.Failed[f.User]++
	c.cfg.Fail(f.Oracle())
}

// Event is the result as the agent reports it; names are every user
// Churn was given.
func (r Result) Event(names []string) event.Delivery {
	d := event.Delivery{Steps: r.Steps, Checked: r.Checked, States: r.States, Edges: r.Edges, Orders: r.Orders, OrderGoal: r.OrderGoal}
	for _, n := range names {
		d.Users = append(d.Users, event.DeliveryUser{Name: n, Attaches: r.Attaches[n], Refused: r.Refused[n], Updates: r.Updates[n], Failed: r.Failed[n], Skipped: r.Skipped[n]})
	}
	return d
}

// EdgeTable formats edge counts for a log line, most frequent first.
func EdgeTable(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var out []kv
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].v != out[j].v {
			return out[i].v > out[j].v
		}
		return out[i].k < out[j].k
	})
	var b strings.Builder
	for i, x := range out {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", x.k, x.v)
	}
	return b.String()
}
