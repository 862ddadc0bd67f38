package console

import "strings"

// cleanFunc strips compiler clone suffixes (".cold", ".isra.0",
// ".constprop.0", ".part.3") so a function has one name across builds.
func cleanFunc(fn string) string {
	return rules.funcSuffix.ReplaceAllString(fn, "")
}

// skippedFrame reports whether fn is reporting, locking, scheduling or
// interrupt machinery rather than the code a report is about.
func skippedFrame(fn string) bool {
	return rules.skip.MatchString(fn)
}

// traceState is where a stackTracker is in the report's first call trace.
type traceState int

const (
	traceBefore traceState = iota
	traceInside
	traceAfter
)

// stackTracker collects a report's first call trace from its lines.
type stackTracker struct {
	state  traceState
	frames []string
	// lastKey is the last reliable frame's function and offset, to drop
	// the same frame printed twice in a row.
	lastKey string
	// irqEnd is the index of the first frame after an interrupt section
	// ("</IRQ>", "<EOI>"), -1 if there was none: the interrupted code, which
	// is what a lockup or stall is about.
	irqEnd int
	// implicit holds the first run of frames when no "Call Trace:" header
	// precedes them, as riscv prints them.
	implicit        []string
	implicitStarted bool
	implicitDone    bool
}

func newStackTracker() stackTracker {
	return stackTracker{irqEnd: -1}
}

// add feeds one line of the report's own context.
func (t *stackTracker) add(cls lineClass, f frame, text string) {
	if cls == classFrame && !f.unreliable {
		if f.key != "" && f.key == t.lastKey {
			return
		}
		t.lastKey = f.key
	}
	switch cls {
	case classTraceHeader:
		switch t.state {
		case traceBefore:
			t.state = traceInside
		case traceInside:
			t.state = traceAfter
		}
		t.endImplicit()
	case classFrame:
		switch {
		case t.state == traceInside:
			if f.irqExit {
				t.markIRQEnd()
			}
			if !f.unreliable {
				t.frames = append(t.frames, f.fn)
			}
		case t.state == traceBefore && !t.implicitDone:
			t.implicitStarted = true
			if !f.unreliable {
				t.implicit = append(t.implicit, f.fn)
			}
		}
	case classRegister:
		if t.state == traceInside && (strings.Contains(text, "</IRQ>") || strings.Contains(text, "<EOI>")) {
			t.markIRQEnd()
		}
	default:
		if t.state == traceInside {
			t.state = traceAfter
		}
		t.endImplicit()
	}
}

func (t *stackTracker) markIRQEnd() {
	if t.irqEnd < 0 {
		t.irqEnd = len(t.frames)
	}
}

func (t *stackTracker) endImplicit() {
	if t.implicitStarted {
		t.implicitDone = true
	}
}

// stack returns the explicit call trace, or the implicit one if the report
// has no "Call Trace:" section.
func (t *stackTracker) stack() []string {
	s := t.frames
	if len(s) == 0 {
		s = t.implicit
	}
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

// useful returns the first frame that skip does not reject. With
// afterIRQ it prefers frames after the interrupt section.
func (t *stackTracker) useful(afterIRQ bool, skip func(string) bool) string {
	if afterIRQ && t.irqEnd >= 0 && len(t.frames) > 0 {
		if fn := firstUseful(t.frames[t.irqEnd:], skip); fn != "" {
			return fn
		}
	}
	return firstUseful(t.stack(), skip)
}

func firstUseful(frames []string, skip func(string) bool) string {
	for _, fn := range frames {
		if !skip(fn) {
			return fn
		}
	}
	return ""
}
