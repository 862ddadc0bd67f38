package console

import (
	"fmt"
	"regexp"

	"github.com/ftrace-harness/fth/results/regs"
)

// Limits that are properties of console output rather than of one pattern.
const (
	// defaultMaxLines bounds a report whose end the detector cannot see.
	defaultMaxLines = 100
	// absorbWindow is how far after a header an absorbed header may come
	// (the die line, the WARNING after an ftrace bug banner).
	absorbWindow = 20
	// detailWindow is how far after a header detail lines are looked for.
	detailWindow = 8
	// bannerWindow is how far a "cut here" banner may precede its header;
	// the WARN() message is printed between them.
	bannerWindow = 3
	// gapLimit is how many unrelated lines in a row end a report that has
	// not reached its call trace yet; lockdep and stall summaries have a few
	// free-form lines, console noise has more.
	gapLimit = 4
)

// pattern is the compiled form of a patternSpec.
type pattern struct {
	kind    Kind
	header  *regexp.Regexp
	details []*regexp.Regexp
	title   string
	fn      funcRule
	// skip is the pattern's own Skip; nil when it has none.
	skip     *regexp.Regexp
	absorb   []*regexp.Regexp
	end      *regexp.Regexp
	untilEnd bool
	maxLines int
}

// ruleSet is everything compiled from the data tables. It is built once and
// never modified.
type ruleSet struct {
	patterns []*pattern
	// banner is "------------[ cut here ]------------" or a "=====" rule,
	// which a report may start at although its header comes after.
	banner *regexp.Regexp
	// frame and armFrame recognise one call-trace frame.
	frame, armFrame *regexp.Regexp
	// bareFrame is a call-trace frame with an address and no symbol
	// ("[<00000000e0a73ec7>] 0xffffffffc01d2036"): module or BPF code
	// kallsyms could not name, still inside the trace.
	bareFrame *regexp.Regexp
	// traceHeader starts a call trace section.
	traceHeader *regexp.Regexp
	// register matches register-dump lines (regs.DumpLine: registers,
	// Code: bytes) and <IRQ>/<TASK> markers, which can sit inside a call
	// trace; regs owns the arches' register forms, marker the rest.
	register, marker *regexp.Regexp
	// symbolOffset is "func+0x1a/0x40" anywhere in a line.
	symbolOffset *regexp.Regexp
	// structural is a line of dashes or equals signs, as lockdep prints, or
	// one starting with a bracketed address ("[ffff...] address between
	// user and kernel address ranges").
	structural *regexp.Regexp
	// ip is the kernel instruction pointer of a register dump
	// (regs.KernelPC); group 1 is its function.
	ip *regexp.Regexp
	// workqueue is "Workqueue: events func".
	workqueue *regexp.Regexp
	// lockAt is a lock site lockdep prints, "at: func+0x" or "at: [<pc>]
	// func+0x"; lockAtNext is a line ending in "at:", whose site is on the
	// next line, and siteLine that next line.
	lockAt, lockAtNext, siteLine *regexp.Regexp
	// stallEntry is the interrupt entry a stall's backtrace passes through
	// into the stalled code: what follows it is what the CPU was doing.
	stallEntry *regexp.Regexp
	// stallAnchors and hangAnchors are the compiled anchor tables, hangSkip
	// the compiled hangSkip.
	stallAnchors []compiledStallAnchor
	hangAnchors  []compiledHangAnchor
	hangSkip     *regexp.Regexp
	// wait matches the skip list's wait class (WaitFrame).
	wait *regexp.Regexp
	// syscallPrefixes are syscallPrefixes().
	syscallPrefixes []string
	// skip matches frames that never name the culprit (every class of the
	// skip list).
	skip *regexp.Regexp
	// skipFault matches the frames skipped even as a faulting IP: the skip
	// list without its context class.
	skipFault *regexp.Regexp
	// skipReport matches the report class alone: reporting machinery,
	// never named even when nothing else is left.
	skipReport *regexp.Regexp
	// trampoline matches BPF and ftrace trampoline glue.
	trampoline *regexp.Regexp
	// funcSuffix is a compiler clone suffix: ".cold", ".isra.0", ".part.3".
	funcSuffix *regexp.Regexp
	// who are the lines that name a report's CPU, task and taint.
	who []*regexp.Regexp
	// boot is a kernel's first line, and orderly what a kernel prints when
	// it was asked to restart: a boot after neither a report nor an
	// orderly restart is an unexpected reboot.
	boot, orderly *regexp.Regexp
	// Title normalisation.
	placeholder, offsets, hexAddr, longHex, number *regexp.Regexp
	bodyPrefixes                                   []string
}

// rules is the compiled rule set.
var rules = mustCompileRules()

func mustCompileRules() *ruleSet {
	rs, err := compileRules(headerPatterns(), skipFramesData, bodyPrefixes())
	if err != nil {
		panic(err)
	}
	return rs
}

// compileRules compiles the data tables; it is separate from
// mustCompileRules so tests can check errors are reported.
func compileRules(specs []patternSpec, skipList string, body []string) (*ruleSet, error) {
	rs := &ruleSet{bodyPrefixes: body}
	var err error
	c := func(expr string) *regexp.Regexp {
		if err != nil {
			return nil
		}
		var re *regexp.Regexp
		re, err = regexp.Compile(expr)
		if err != nil {
			err = fmt.Errorf("compile %q: %w", expr, err)
		}
		return re
	}
	for i, s := range specs {
		p := &pattern{kind: s.Kind, header: c(s.Header), title: s.Title, fn: s.Func, untilEnd: s.UntilEnd, maxLines: s.MaxLines}
		for _, d := range s.Details {
			p.details = append(p.details, c(d))
		}
		for _, a := range s.Absorb {
			p.absorb = append(p.absorb, c(a))
		}
		end := s.End
		if end == "" {
			end = endTrace
		}
		p.end = c(end)
		if s.Skip != "" {
			p.skip = c(`^(?:` + s.Skip + `)$`)
		}
		if p.maxLines == 0 {
			p.maxLines = defaultMaxLines
		}
		if err != nil {
			return nil, fmt.Errorf("pattern %d (%s): %w", i, s.Kind, err)
		}
		rs.patterns = append(rs.patterns, p)
	}
	rs.banner = c(`^-+\[ cut here \]-+$|^={10,}$`)
	rs.frame = c(`^(?:kmemleak:)?\s*(?:<(?:IRQ|EOI|NMI|TASK)>\s+)?(?:\[<?[0-9a-f]{8,}>?\]\s+){0,2}(\?\s+)?([A-Za-z_][\w.]*)(` + offset + `|\s+[\w./-]+\.[chS]:\d+|\s+\[inline\])`)
	rs.armFrame = c(`^\s*\[<[0-9a-f]+>\] \(([A-Za-z_][\w.]*)(?:` + offset + `)?\) from `)
	rs.bareFrame = c(`^\s*(?:\[<?[0-9a-f]{8,}>?\]\s+){1,2}0x[0-9a-f]+\s*$`)
	rs.traceHeader = c(`^(?:kmemleak:)?\s*(?:Call [Tt]race|Backtrace|backtrace(?: \(crc [0-9a-f]+\))?):?\s*$`)
	rs.register = regs.DumpLine()
	rs.marker = c(`^(?:</?(?:IRQ|TASK|NMI|EOI|SOFTIRQ)>|[0-9a-f]{4}:\s)`)
	rs.symbolOffset = c(`\b[A-Za-z_][\w.]*` + offset)
	rs.structural = c(`^[-=*]{5,}|^\[<?[0-9a-f]{8,}>?\]`)
	rs.ip = regs.KernelPC()
	for _, w := range whoLines() {
		rs.who = append(rs.who, c(w))
	}
	rs.boot = c(`^Linux version \d+\.\d+\S* \(`)
	rs.orderly = c(`^(?:reboot: (?:Restarting system|Power down|System halted)|Restarting system\.?$|kexec_core: Starting new kernel|Starting new kernel|Rebooting in \d+ seconds)`)
	rs.workqueue = c(`^Workqueue: \S+ ([A-Za-z_][\w.]*)`)
	rs.lockAt = c(`\bat: (?:\[<[0-9a-f]+>\] )?([A-Za-z_][\w.]*)\+0x`)
	rs.lockAtNext = c(`\bat:$`)
	rs.siteLine = c(`^\s*(?:\[<[0-9a-f]+>\] )?([A-Za-z_][\w.]*)\+0x`)
	rs.stallEntry = c(`apic_timer_interrupt|^Exception stack|el1h_64_irq`)
	for _, a := range stallAnchors() {
		rs.stallAnchors = append(rs.stallAnchors, compiledStallAnchor{frame: c(`^(?:` + a.Frame + `)$`), self: a.Self})
	}
	for _, a := range hangAnchors() {
		rs.hangAnchors = append(rs.hangAnchors, compiledHangAnchor{frame: c(`^(?:` + a.Frame + `)$`), title: a.Title})
	}
	rs.hangSkip = c(`^(?:` + hangSkip + `)$`)
	rs.syscallPrefixes = syscallPrefixes()
	if err != nil {
		return nil, err
	}
	entries, err := parseSkipList(skipList)
	if err != nil {
		return nil, err
	}
	if rs.skip, err = skipRegexp(entries, skipReport, skipHelper, skipTrampoline, skipContext); err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	if rs.skipFault, err = skipRegexp(entries, skipReport, skipHelper, skipTrampoline); err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	if rs.skipReport, err = skipRegexp(entries, skipReport); err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	if rs.wait, err = skipRegexp(entries, skipWait); err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	if rs.trampoline, err = skipRegexp(entries, skipTrampoline); err != nil {
		return nil, fmt.Errorf("skip list: %w", err)
	}
	rs.funcSuffix = c(`(?:\.(?:cold|isra|constprop|part|llvm|lto_priv|\d+))+$`)
	rs.placeholder = c(`\{[a-z]+\}`)
	rs.offsets = c(offset)
	rs.hexAddr = c(`0x[0-9a-fA-F]+`)
	rs.longHex = c(`\b[0-9a-f]{8,}\b`)
	rs.number = c(`\b\d+\b`)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

type compiledStallAnchor struct {
	frame *regexp.Regexp
	self  bool
}

type compiledHangAnchor struct {
	frame *regexp.Regexp
	title string
}

// matchHeader returns the first pattern whose header matches text, and the
// header's named groups.
func (rs *ruleSet) matchHeader(text string) (*pattern, map[string]string) {
	if text == "" {
		return nil, nil
	}
	for _, p := range rs.patterns {
		m := p.header.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		return p, namedGroups(p.header, m, nil)
	}
	return nil, nil
}

// namedGroups adds re's non-empty named groups from match m to into.
func namedGroups(re *regexp.Regexp, m []string, into map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for i, name := range re.SubexpNames() {
		if name != "" && m[i] != "" {
			if _, ok := into[name]; !ok {
				into[name] = m[i]
			}
		}
	}
	return into
}
