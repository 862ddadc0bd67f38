package console

import "strings"

// renderTitle fills a title template. Groups other than the function are
// normalised, so that one bug gets one title however many CPUs, pids,
// addresses and seconds its reports mention. Without a function the
// " in {func}" part is dropped rather than left dangling.
func renderTitle(tmpl string, groups map[string]string, fn string) string {
	if fn == "" {
		tmpl = strings.ReplaceAll(tmpl, " in {func}", "")
	}
	out := rules.placeholder.ReplaceAllStringFunc(tmpl, func(ph string) string {
		name := ph[1 : len(ph)-1]
		switch name {
		case "func":
			return fn
		case "fixed":
			// A message the kernel prints verbatim, digits included
			// ("refcount_t: addition on 0"): nothing in it varies.
			return groups[name]
		}
		return normalizeValue(groups[name])
	})
	return strings.Join(strings.Fields(out), " ")
}

// normalizeValue replaces what varies between runs of the same bug:
// symbol offsets are dropped, addresses become ADDR, numbers become NUM.
func normalizeValue(s string) string {
	s = rules.offsets.ReplaceAllString(s, "")
	s = rules.hexAddr.ReplaceAllString(s, "ADDR")
	s = rules.longHex.ReplaceAllStringFunc(s, func(h string) string {
		// A long word of hex letters only ("deadbeef") may be a word;
		// addresses always have digits.
		if strings.ContainsAny(h, "0123456789") {
			return "ADDR"
		}
		return h
	})
	return rules.number.ReplaceAllString(s, "NUM")
}
