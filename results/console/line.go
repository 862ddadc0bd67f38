package console

import (
	"strings"

	"github.com/ftrace-harness/fth/results/printk"
)

// consoleLine is one log line split into what the detector works with.
type consoleLine struct {
	num int
	raw string
	// ctx is the printk caller id ("T123", "C1"), "" when the line has none.
	// Lines of one context belong together even when CPUs interleave.
	ctx string
	// text is the message after the timestamp and caller id, right-trimmed.
	text string
}

// maxCutShort bounds the cut-short fragment splitLine drops before a
// second timestamp: longer text before one is a message that quotes it.
const maxCutShort = 16

func splitLine(num int, raw string) consoleLine {
	raw = strings.TrimRight(raw, "\r")
	l := consoleLine{num: num, raw: raw, text: raw}
	if p, ok := printk.Split(raw); ok {
		l.ctx = p.Caller
		l.text = raw[p.End:]
		// A line another CPU cut short ("B" of a "BUG: ...") and a
		// whole new line after it: the message is the new line's.
		// powerpc's churn oops printed "[ts] B[ts] BUG: Kernel NULL
		// pointer dereference on read at 0x00000128".
		if p, ok := printk.Split(l.text); ok && p.End-p.Start <= maxCutShort+len("[ 99999.999999] ") {
			if p.Caller != "" {
				l.ctx = p.Caller
			}
			l.text = l.text[p.End:]
		}
	}
	l.text = strings.TrimRight(l.text, " \t")
	return l
}

// lineClass is what a line is to a report that is open when it arrives.
type lineClass int

const (
	// classBlank is an empty message; it neither continues nor ends a report.
	classBlank lineClass = iota
	// classFrame is a call-trace frame.
	classFrame
	// classTraceHeader is "Call Trace:" and its spellings.
	classTraceHeader
	// classRegister is a register dump line, a Code: line or an <IRQ>-style
	// marker; these interrupt a call trace without ending it.
	classRegister
	// classBody is any other line that is part of a report.
	classBody
	// classOther is a line a report does not explain.
	classOther
)

// frame is one parsed call-trace frame.
type frame struct {
	fn string
	// key is the function with its offset ("rb_erase+0x16e/0x248"): the
	// same key twice in a row is one frame printed twice (riscv's epc and
	// ra frames), not recursion.
	key        string
	unreliable bool
	// irqExit marks the first frame after an interrupt section ("<EOI>"
	// prefix on old kernels).
	irqExit bool
}

// classify says what text is. For frames it also returns the parsed frame.
func classify(text string) (lineClass, frame) {
	if text == "" {
		return classBlank, frame{}
	}
	if f, ok := parseFrame(text); ok {
		return classFrame, f
	}
	if rules.traceHeader.MatchString(text) {
		return classTraceHeader, frame{}
	}
	trimmed := strings.TrimLeft(text, " \t")
	if rules.register.MatchString(trimmed) || rules.marker.MatchString(trimmed) {
		return classRegister, frame{}
	}
	if trimmed != text {
		// Indented text is a continuation: lockdep chains, KASAN object
		// descriptions, "(ftrace buffer empty)".
		return classBody, frame{}
	}
	for _, p := range rules.bodyPrefixes {
		if strings.HasPrefix(text, p) {
			return classBody, frame{}
		}
	}
	if rules.structural.MatchString(text) || rules.symbolOffset.MatchString(text) {
		return classBody, frame{}
	}
	if strings.Contains(text, " lock held by ") || strings.Contains(text, " locks held by ") {
		return classBody, frame{}
	}
	return classOther, frame{}
}

// parseFrame parses a call-trace frame in any of the supported spellings:
// "  func+0x1a/0x40", " ? func+0x1a/0x40", " [<ffffffff81000000>] func+0x1a/0x40",
// "[c0000000] [c0000001] func+0x1a/0x40 (unreliable)", " func lib/x.c:77 [inline]",
// "[<80c1e5e8>] (func) from [<80c1eb20>] (caller+0x60/0xdc)".
func parseFrame(text string) (frame, bool) {
	if m := rules.armFrame.FindStringSubmatch(text); m != nil {
		return frame{fn: cleanFunc(m[1])}, true
	}
	m := rules.frame.FindStringSubmatch(text)
	if m == nil {
		if rules.bareFrame.MatchString(text) {
			// No name to title by: kept in the trace, like a "? " frame.
			return frame{unreliable: true}, true
		}
		return frame{}, false
	}
	return frame{
		fn:         cleanFunc(m[2]),
		key:        m[2] + m[3],
		unreliable: m[1] != "" || strings.HasSuffix(text, "(unreliable)"),
		irqExit:    strings.HasPrefix(strings.TrimLeft(text, " \t"), "<EOI>"),
	}, true
}
