package console

import (
	_ "embed"
	"fmt"
	"regexp"
	"strings"
)

// skipFramesData is the skip list: which stack frames never name the
// culprit, one class and regexp a line (see the file's own header).
//
//go:embed skipframes.txt
var skipFramesData string

// skipClass is where a skipped frame is skipped.
type skipClass string

const (
	// skipReport: printk, WARN/BUG plumbing, sanitizers, unwinders; skipped
	// everywhere, even as the faulting instruction pointer.
	skipReport skipClass = "report"
	// skipHelper: mem*/str*, allocator, refcount and list helpers; skipped
	// everywhere, since their caller is to blame.
	skipHelper skipClass = "helper"
	// skipTrampoline: BPF and ftrace trampoline glue; skipped everywhere and
	// reported as the finding's Trampoline.
	skipTrampoline skipClass = "trampoline"
	// skipContext: locking, scheduling and interrupt entry; skipped in a
	// stack, kept as a faulting instruction pointer.
	skipContext skipClass = "context"
	// skipWait: task entry and sleeping primitives; skipped only where a
	// stuck task's stack is read for where it is stuck (WaitFrame), never
	// in a report's title, where they name a stall's syscall or thread.
	skipWait skipClass = "wait"
)

// skipEntry is one line of the skip list.
type skipEntry struct {
	class skipClass
	expr  string
	why   string
	line  int
}

// parseSkipList reads the skip list's text: "<class> <regexp> # why" a
// line, blank lines and "#" comments ignored. Every entry must say why.
func parseSkipList(text string) ([]skipEntry, error) {
	var out []skipEntry
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		body, why, ok := strings.Cut(line, "#")
		fields := strings.Fields(body)
		if !ok || strings.TrimSpace(why) == "" || len(fields) != 2 {
			return nil, fmt.Errorf("skip list line %d: want \"<class> <regexp> # why\", got %q", i+1, line)
		}
		c := skipClass(fields[0])
		switch c {
		case skipReport, skipHelper, skipTrampoline, skipContext, skipWait:
		default:
			return nil, fmt.Errorf("skip list line %d: unknown class %q", i+1, fields[0])
		}
		if _, err := regexp.Compile(fields[1]); err != nil {
			return nil, fmt.Errorf("skip list line %d: %w", i+1, err)
		}
		out = append(out, skipEntry{class: c, expr: fields[1], why: strings.TrimSpace(why), line: i + 1})
	}
	return out, nil
}

// skipRegexp joins the entries of the given classes into one anchored
// regexp; nil when there are none.
func skipRegexp(entries []skipEntry, classes ...skipClass) (*regexp.Regexp, error) {
	var exprs []string
	for _, e := range entries {
		for _, c := range classes {
			if e.class == c {
				exprs = append(exprs, e.expr)
			}
		}
	}
	if len(exprs) == 0 {
		return regexp.Compile(`^$.`)
	}
	return regexp.Compile(`^(?:` + strings.Join(exprs, "|") + `)$`)
}
