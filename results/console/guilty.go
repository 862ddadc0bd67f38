package console

import "strings"

// flowKind is what a line of a report adds to its flow.
type flowKind int

const (
	flowIP    flowKind = iota // an instruction pointer line (RIP:, pc :, ...)
	flowFrame                 // a reliable call-trace frame
	flowEntry                 // an interrupt entry into the stalled code
	flowTrace                 // a "Call Trace:" header: another stack starts
)

// flowItem is one line of a report's flow; fn is set for flowIP and
// flowFrame.
type flowItem struct {
	kind flowKind
	fn   string
}

// skips reports whether r's title never names fn: the skip list's every
// class, or the pattern's own Skip.
func (r *report) skips(fn string) bool {
	return skippedFrame(fn) || (r.pat.skip != nil && r.pat.skip.MatchString(fn))
}

// skipsFault reports whether r's title never names fn even where it
// trapped or warned: the skip list without its context class, or the
// pattern's own Skip.
func (r *report) skipsFault(fn string) bool {
	return rules.skipFault.MatchString(fn) || (r.pat.skip != nil && r.pat.skip.MatchString(fn))
}

// stackUseful is the first frame of the first call trace r's title may
// name; with afterIRQ, after the interrupt section if it has one.
func (r *report) stackUseful(afterIRQ bool) string {
	return r.stack.useful(afterIRQ, r.skips)
}

// orIP returns fn, or when the stack had nothing better the instruction
// pointer itself, unless it is reporting machinery: a BUG in __slab_free
// with no call trace is still better titled by __slab_free than by nothing.
func (r *report) orIP(fn string) string {
	if fn == "" && len(r.ips) > 0 && !rules.skipReport.MatchString(r.ips[0]) {
		return r.ips[0]
	}
	return fn
}

// function chooses the function the title names: the guilty frame, a
// syscall by its name rather than its arch's wrapper's.
func (r *report) function() string {
	return syscallName(r.guilty())
}

func (r *report) guilty() string {
	switch r.pat.fn {
	case funcGroup:
		// The kernel names a function in the header; when that is a helper
		// or machinery (a WARN in refcount_warn_saturate, a KASAN report in
		// memcpy), the stack says who called it. Locking and scheduling
		// code named there is kept, as a faulting IP is (a WARN in
		// __switch_to is __switch_to's own check), unless the pattern's
		// Skip says the check is about its caller.
		fn := cleanFunc(r.groups["func"])
		if fn == "" || !r.skipsFault(fn) {
			return fn
		}
		if caller := r.stackUseful(false); caller != "" {
			return caller
		}
		return fn
	case funcSite:
		return cleanFunc(r.groups["func"])
	case funcIP:
		if len(r.ips) > 0 && !r.skips(r.ips[0]) {
			return r.ips[0]
		}
		return r.orIP(r.stackUseful(true))
	case funcFault:
		if len(r.ips) > 0 && !r.skipsFault(r.ips[0]) {
			return r.ips[0]
		}
		return r.orIP(r.stackUseful(true))
	case funcAccess:
		fn := cleanFunc(r.groups["func"])
		if fn == "" && len(r.ips) > 0 {
			fn = r.ips[0]
		}
		if fn != "" && !r.skips(fn) {
			return fn
		}
		if caller := r.stackUseful(true); caller != "" {
			return caller
		}
		if r.groups["func"] != "" {
			return fn
		}
		return r.orIP("")
	case funcStack:
		return r.stackUseful(false)
	case funcWorkqueue:
		return r.workqueue
	case funcHeldLock:
		if len(r.lockAts) > 0 {
			return r.lockAts[0]
		}
		return r.stackUseful(false)
	case funcAcquire:
		if fn := firstUseful(r.lockAts[:min(2, len(r.lockAts))], r.skips); fn != "" {
			return fn
		}
		return r.stackUseful(false)
	case funcStall:
		if fn := r.stalled(); fn != "" {
			return fn
		}
		if len(r.ips) > 0 && !r.skips(r.ips[0]) {
			return r.ips[0]
		}
		return r.orIP(r.stackUseful(true))
	case funcHang:
		if fn := r.hung(); fn != "" {
			return fn
		}
		return r.stackUseful(false)
	}
	return ""
}

// stalledFrames are the frames of what a stalled CPU was doing, top
// first: after the first interrupt entry into it, its instruction pointer
// and the frames up to the next call trace; without an interrupt entry
// (a soft lockup's own register dump), the first instruction pointer and
// the first call trace.
func (r *report) stalledFrames() []string {
	start := -1
	for i, it := range r.flow {
		if it.kind == flowEntry {
			start = i + 1
			break
		}
	}
	var out []string
	if start >= 0 {
		for _, it := range r.flow[start:] {
			if it.kind == flowTrace {
				break
			}
			if it.kind == flowIP || it.kind == flowFrame {
				out = append(out, it.fn)
			}
		}
		return out
	}
	inTrace := false
	for _, it := range r.flow {
		switch {
		case it.kind == flowIP && len(out) == 0 && !inTrace:
			out = append(out, it.fn)
		case it.kind == flowTrace && inTrace:
			return out
		case it.kind == flowTrace:
			inTrace = true
		case it.kind == flowFrame && inTrace:
			out = append(out, it.fn)
		}
	}
	return out
}

// stalled names a stall by the frame below its first dispatcher
// (stallAnchors), "" when the stack reaches none.
func (r *report) stalled() string {
	var frames []string
	for _, fn := range r.stalledFrames() {
		if !r.skips(fn) {
			frames = append(frames, fn)
		}
	}
	for i, fn := range frames {
		for _, a := range rules.stallAnchors {
			if !a.frame.MatchString(syscallName(fn)) {
				continue
			}
			switch {
			case a.self:
				return "smp_call_function"
			case i == 0:
				return fn
			}
			return frames[i-1]
		}
	}
	return ""
}

// WaitFrame says that a frame of a stuck task's stack is how it waits
// (scheduling, sleeping, locks, completions, interrupt and task entry),
// never what it waits for: the frames a hung task's title passes over
// (the skip list, skipframes.txt, and hangSkip) and the skip list's wait
// class. results/hang reads blocked tasks with it. fn is a bare symbol
// (no offset).
func WaitFrame(fn string) bool {
	fn = rules.funcSuffix.ReplaceAllString(fn, "")
	return skippedFrame(fn) || rules.wait.MatchString(fn) || rules.hangSkip.MatchString(syscallName(fn))
}

// hung names a hung task by the wait its victims share (hangAnchors), or
// by the first frame of its stack that is not how it waits.
func (r *report) hung() string {
	var frames []string
	for _, fn := range r.stack.stack() {
		if !r.skips(fn) {
			frames = append(frames, fn)
		}
	}
	for _, fn := range frames {
		for _, a := range rules.hangAnchors {
			if a.frame.MatchString(syscallName(fn)) {
				if a.title != "" {
					return a.title
				}
				return fn
			}
		}
	}
	for _, fn := range frames {
		if !rules.hangSkip.MatchString(syscallName(fn)) {
			return fn
		}
	}
	return ""
}

// syscallName strips the one syscall wrapper prefix (syscallPrefixes)
// that leaves fn shortest.
func syscallName(fn string) string {
	best := fn
	for _, p := range rules.syscallPrefixes {
		if s := strings.TrimPrefix(fn, p); len(s) < len(best) && s != "" {
			best = s
		}
	}
	return best
}
