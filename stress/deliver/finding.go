package deliver

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ftrace-harness/fth/wire/event"
)

// What a finding says went wrong.
const (
	// KindMiss: calls From..To of Caller never reached User, though made
	// inside its window (WinFrom, WinTo].
	KindMiss = "miss"
	// KindDup: call From reached User Count extra times.
	KindDup = "dup"
	// KindGaps: more gaps (Count) than the module keeps; some are unnamed.
	KindGaps = "gaps"
	// KindForeign: User was called Count times for a function it does not
	// trace (the last at IP).
	KindForeign = "foreign"
	// KindLate: User was called Count times while detached.
	KindLate = "late"
	// KindStray: User was called Count times after the kernel refused its
	// attach (a refused ops was listed while the refusal was decided).
	KindStray = "stray"
	// KindLost: the module dropped Count findings (its buffer was full).
	KindLost = "lost"
	// KindCount: a counting user (BPF) saw fewer calls than its window
	// held (Count missing), or more than could have been made.
	KindCount = "count"
	// KindRefused: the kernel refused User's attach (Errno) while no
	// user it excludes was attached (Attached lists those that were).
	KindRefused = "refused"
)

// Finding is one line of the module's findings, or a counting user's
// failed window.
type Finding struct {
	Kind   string
	User   string
	Func   string
	Caller int
	// From..To are the calls concerned; WinFrom, WinTo the window.
	From, To       uint64
	WinFrom, WinTo uint64
	Count          uint64
	IP             uint64
	// Skipped counts a counting user's runs the kernel skipped by design
	// (BPF's recursion guard), already allowed for in Count.
	Skipped uint64
	// Callsite is the function's enabled_functions line when the finding
	// was reported.
	Callsite string
	// Site is the callsite as the caller saw it just before a missed
	// call (the module's "site" line), when the module kept it.
	Site *Site
	// Window is a counting user's window per caller, (BeginDone,
	// EndStarted] read as (after its attach, before its detach].
	Window []Span
	// Transitions are the ones in flight (the user's own excluded),
	// filled by Attribute.
	Transitions []string
	// Errno and Attached describe a refusal (KindRefused).
	Errno    string
	Attached []string
}

// Site is a callsite read by the caller just before call Call: the
// patched instructions (Insn: x86_64 bytes; 32-bit words elsewhere,
// ppc64le's "branch>stub words"), what the live one calls (Target: a
// symbol, "nop", "int3" or "?") and the CALL_OPS literal's ops (Literal:
// "fth_deliver:<user>", a symbol, an address for an ops without one, "-"
// where the arch has no literal).
type Site struct {
	Call                  uint64
	Insn, Target, Literal string
}

func (s Site) String() string {
	out := fmt.Sprintf("callsite just before call %d: %s (%s)", s.Call, s.Insn, s.Target)
	if s.Literal != "-" {
		out += ", ops literal " + s.Literal
	}
	return out
}

// ParseFindings parses the module's findings file. A "site" line belongs
// to the miss before it.
func ParseFindings(s string) ([]Finding, error) {
	var out []Finding
	for _, line := range lines(s) {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] == "site" {
			n, err := strconv.ParseUint(f[4], 10, 64)
			last := len(out) - 1
			if err != nil || last < 0 || out[last].Kind != KindMiss || out[last].User != f[1] ||
				out[last].Func != f[2] || strconv.Itoa(out[last].Caller) != f[3] {
				return nil, fmt.Errorf("deliver: findings line %q follows no miss of its user", line)
			}
			out[last].Site = &Site{Call: n, Insn: f[5], Target: f[6], Literal: f[7]}
			continue
		}
		x, err := parseFinding(f, line)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// parseFinding parses one finding line but a "site" line.
func parseFinding(f []string, line string) (Finding, error) {
	bad := fmt.Errorf("deliver: findings line %q", line)
	nums := func(from int) ([]uint64, error) {
		var n []uint64
		for _, x := range f[from:] {
			v, err := strconv.ParseUint(x, 0, 64)
			if err != nil {
				return nil, bad
			}
			n = append(n, v)
		}
		return n, nil
	}
	switch {
	case len(f) == 8 && (f[0] == KindMiss || f[0] == KindDup):
		n, err := nums(3)
		if err != nil {
			return Finding{}, err
		}
		x := Finding{Kind: f[0], User: f[1], Func: f[2], Caller: int(n[0]), WinFrom: n[3], WinTo: n[4]}
		if f[0] == KindMiss {
			x.From, x.To = n[1], n[2]
		} else {
			x.From, x.To, x.Count = n[1], n[1], n[2]
		}
		return x, nil
	case len(f) == 7 && f[0] == KindGaps:
		n, err := nums(3)
		if err != nil {
			return Finding{}, err
		}
		return Finding{Kind: KindGaps, User: f[1], Func: f[2], Caller: int(n[0]), Count: n[1], WinFrom: n[2], WinTo: n[3]}, nil
	case len(f) == 4 && f[0] == KindForeign:
		n, err := nums(2)
		if err != nil {
			return Finding{}, err
		}
		return Finding{Kind: KindForeign, User: f[1], Count: n[0], IP: n[1]}, nil
	case len(f) == 3 && (f[0] == KindLate || f[0] == KindStray):
		n, err := nums(2)
		if err != nil {
			return Finding{}, err
		}
		return Finding{Kind: f[0], User: f[1], Count: n[0]}, nil
	case len(f) == 2 && f[0] == KindLost:
		n, err := nums(1)
		if err != nil {
			return Finding{}, err
		}
		return Finding{Kind: KindLost, Count: n[0]}, nil
	}
	return Finding{}, bad
}

// Attribute fills f.Transitions with the transitions, other than the
// user's own, that may have run while the calls concerned were made.
func (f *Finding) Attribute(ts []Transition) {
	f.Transitions = nil
	if f.Kind != KindMiss && f.Kind != KindDup && f.Kind != KindCount {
		return
	}
	for _, t := range ts {
		if ownTransition(t.Name, f.User) {
			continue
		}
		if f.Kind == KindCount {
			// A count has no caller: any overlap with the window.
			for c, w := range f.Window {
				if w.EndStarted > w.BeginDone && t.Overlaps(c, w.BeginDone+1, w.EndStarted) {
					f.Transitions = append(f.Transitions, t.Name)
					break
				}
			}
			continue
		}
		if t.Overlaps(f.Caller, f.From, f.To) {
			f.Transitions = append(f.Transitions, t.Name)
		}
	}
}

// ownTransition says whether name is user's own attach or detach, whose
// calls may go either way. The module names them "attach <user>" and
// "detach <user>", the agent "attach <user>#<n>". A user's filter change
// on another function is not: its window on this one stays open.
func ownTransition(name, user string) bool {
	verb, rest, _ := strings.Cut(name, " ")
	if verb != "attach" && verb != "detach" {
		return false
	}
	rest, _, _ = strings.Cut(rest, "#")
	return rest == user
}

// during names the transitions for a title.
func (f Finding) during() string {
	switch len(f.Transitions) {
	case 0:
		return "with no transition on the callsite in flight"
	case 1:
		return "during " + f.Transitions[0]
	default:
		return fmt.Sprintf("during %s (and %d more)", f.Transitions[0], len(f.Transitions)-1)
	}
}

// Title is the finding's title, as the cell's headline shows it.
func (f Finding) Title() string {
	fn := f.Func
	if fn == "" {
		fn = FuncSeq
	}
	switch f.Kind {
	case KindMiss, KindGaps, KindCount:
		return fmt.Sprintf("missed call: %s on %s %s", f.User, fn, f.during())
	case KindDup:
		return fmt.Sprintf("duplicate call: %s on %s %s", f.User, fn, f.during())
	case KindForeign:
		return fmt.Sprintf("misdelivered call: %s called for a function it does not trace", f.User)
	case KindLate:
		return fmt.Sprintf("misdelivered call: %s called after its detach returned", f.User)
	case KindStray:
		return fmt.Sprintf("misdelivered call: %s called after the kernel refused its attach", f.User)
	case KindRefused:
		return fmt.Sprintf("refused attach: %s on %s", f.User, fn)
	default:
		return fmt.Sprintf("delivery oracle lost %d findings", f.Count)
	}
}

// Detail says what was seen, for the event's message.
func (f Finding) Detail() string {
	switch f.Kind {
	case KindMiss:
		return fmt.Sprintf("caller %d: calls %d..%d (%d) missing from the window (%d, %d]", f.Caller, f.From, f.To, f.To-f.From+1, f.WinFrom, f.WinTo)
	case KindGaps:
		return fmt.Sprintf("caller %d: %d gaps in the window (%d, %d]", f.Caller, f.Count, f.WinFrom, f.WinTo)
	case KindDup:
		return fmt.Sprintf("caller %d: call %d seen again, %d duplicates in the window (%d, %d]", f.Caller, f.From, f.Count, f.WinFrom, f.WinTo)
	case KindCount:
		return fmt.Sprintf("%d calls missing: at least %d made in the window, %d counted, %d skipped by the recursion guard", f.Count, f.From, f.To, f.Skipped)
	case KindForeign:
		return fmt.Sprintf("%d calls, the last at %#x", f.Count, f.IP)
	case KindLate, KindStray:
		return fmt.Sprintf("%d calls", f.Count)
	case KindRefused:
		on := "nothing"
		if len(f.Attached) > 0 {
			on = strings.Join(f.Attached, ", ")
		}
		return fmt.Sprintf("the kernel refused it (%s) with %s attached, none of which it excludes", f.Errno, on)
	default:
		return fmt.Sprintf("%d findings lost", f.Count)
	}
}

// Oracle is the finding as a failed delivery-oracle check.
func (f Finding) Oracle() event.Oracle {
	fn := f.Func
	if fn == "" {
		fn = FuncSeq
	}
	msg := f.Title() + ": " + f.Detail()
	if len(f.Transitions) > 1 {
		msg += "; in flight: " + strings.Join(f.Transitions, ", ")
	}
	if f.Site != nil {
		msg += "; " + f.Site.String()
	}
	if f.Callsite != "" {
		msg += "; enabled_functions now: " + f.Callsite
	}
	return event.Oracle{Name: event.OracleDelivery, Function: fn, Title: f.Title(), Msg: msg}
}
