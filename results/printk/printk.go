// Package printk finds the prefix the kernel's printk puts before each
// console line ("[   12.345678][  T123] text": the time stamp, then the
// caller id when CONFIG_PRINTK_CALLER is on), after whatever a serial
// line put before it. Every reader of console logs splits lines here, so
// that a new prefix form is taught once.
package printk

import "regexp"

// prefix allows junk before the stamp (a line another CPU cut short, a
// QEMU message) but not a quote or brace: a stamp inside a JSON or quoted
// message is not this line's.
var prefix = regexp.MustCompile(`^[^"{}]*?\[\s*(\d+\.\d+)\](?:\[\s*([TC]\d+)\])? ?`)

// Prefix is where a line's printk prefix is.
type Prefix struct {
	// Start and End delimit it, junk before the stamp included: the
	// message is line[End:].
	Start, End int
	// Stamp is the time stamp as printed ("12.345678"); Caller the
	// caller id ("T123", "C1"), "" when the line has none.
	Stamp, Caller string
}

// Split finds line's prefix; false when it has none.
func Split(line string) (Prefix, bool) {
	m := prefix.FindStringSubmatchIndex(line)
	if m == nil {
		return Prefix{}, false
	}
	p := Prefix{Start: m[0], End: m[1], Stamp: line[m[2]:m[3]]}
	if m[4] >= 0 {
		p.Caller = line[m[4]:m[5]]
	}
	return p, true
}

// Text is line without its prefix: the message, or line itself.
func Text(line string) string {
	if p, ok := Split(line); ok {
		return line[p.End:]
	}
	return line
}
