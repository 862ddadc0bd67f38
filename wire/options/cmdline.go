package options

import "strings"

// KV is one fth.* parameter from the kernel command line.
type KV struct {
	// Key is the full key, including CmdlinePrefix.
	Key string
	// Value is the text after '=', with quotes removed.
	Value string
	// HasValue is false for a bare key ("fth.poweroff"), which the kernel
	// passes with no value.
	HasValue bool
}

// ParseCmdline returns the fth.* parameters of a kernel command line in the
// order they appear; other parameters are ignored. It splits the line the way
// the kernel's next_arg does: whitespace separates parameters except inside
// double quotes, and quotes around a value or around a whole parameter are
// removed. A key given twice yields two KVs, so the last one wins when
// applied, as for kernel parameters.
func ParseCmdline(cmdline string) []KV {
	var out []KV
	for _, tok := range splitCmdline(cmdline) {
		key, val, hasVal := strings.Cut(tok, "=")
		if !strings.HasPrefix(key, CmdlinePrefix) {
			continue
		}
		if hasVal {
			val = unquote(val)
		}
		out = append(out, KV{Key: key, Value: val, HasValue: hasVal})
	}
	return out
}

// splitCmdline splits s into parameters. A parameter wholly enclosed in
// quotes ("a=b c") loses its quotes, as in the kernel.
func splitCmdline(s string) []string {
	var (
		out     []string
		cur     strings.Builder
		inQuote bool
		started bool
	)
	flush := func() {
		if started {
			t := cur.String()
			if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' && !strings.Contains(t[1:len(t)-1], `"`) {
				t = t[1 : len(t)-1]
			} else if len(t) >= 1 && t[0] == '"' && !strings.Contains(t[1:], `"`) {
				t = t[1:] // unterminated quote: the kernel takes the rest
			}
			out = append(out, t)
		}
		cur.Reset()
		started = false
	}
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			cur.WriteRune(r)
			started = true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
			flush()
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	flush()
	return out
}

// unquote removes the quotes the kernel removes from a value: a leading quote
// and its matching trailing one.
func unquote(v string) string {
	if strings.HasPrefix(v, `"`) {
		v = v[1:]
		v = strings.TrimSuffix(v, `"`)
	}
	return v
}
