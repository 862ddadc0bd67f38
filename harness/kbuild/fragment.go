package kbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrBadFragment is wrapped by every fragment syntax error.
var ErrBadFragment = errors.New("bad kconfig fragment")

// Setting is one symbol assignment requested by a fragment.
type Setting struct {
	// Symbol is the name without the CONFIG_ prefix.
	Symbol string
	// Value is as written in .config: "y", "m", "n", a number or a quoted string.
	// "# CONFIG_X is not set" is Value "n".
	Value string
	// Origin is file:line, for error messages.
	Origin string
}

// Fragment is one kconfigs/ file.
type Fragment struct {
	// Name is the path relative to the kconfigs directory, e.g. "preempt/full".
	Name     string
	Settings []Setting
	// Left are the settings this kernel version is not asked for
	// (ForVersion); part of the cache key when there are any.
	Left []Gated
	// Text is the raw content, part of the build's cache key.
	Text []byte
}

// Gate says that the fragments ask for a symbol only from a kernel series
// on: one line of kconfigs/versions.
type Gate struct {
	Symbol string
	// Fragment, when set, limits the gate to that fragment's setting
	// ("arch/arm64"): a symbol one arch gains later than the others.
	Fragment string
	// From is the first kernel series asked, "6.14".
	From string
	// Why is the line's reason, said wherever the setting is left out.
	Why    string
	Origin string
}

// Gated is a setting a kernel version is not asked for, and its gate.
type Gated struct {
	Setting
	Gate Gate
}

// GatesFile is the kconfigs file of version gates. Where a symbol's
// dependencies change between kernel versions, it says from which series
// the fragments' setting of it is asked; ForVersion leaves the setting out
// before that, and every caller says so: nothing is dropped silently.
const GatesFile = "versions"

var (
	setRe   = regexp.MustCompile(`^CONFIG_([A-Za-z0-9_]+)=(.*)$`)
	unsetRe = regexp.MustCompile(`^# CONFIG_([A-Za-z0-9_]+) is not set$`)
	valueRe = regexp.MustCompile(`^([ymn]|-?[0-9]+|0x[0-9a-fA-F]+|"([^"\\]|\\.)*")$`)
)

// ParseFragment parses a fragment's text. name is used in errors.
func ParseFragment(name string, text []byte) (Fragment, error) {
	f := Fragment{Name: name, Text: text}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		origin := fmt.Sprintf("%s:%d", name, n)
		if m := unsetRe.FindStringSubmatch(line); m != nil {
			f.Settings = append(f.Settings, Setting{Symbol: m[1], Value: "n", Origin: origin})
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := setRe.FindStringSubmatch(line)
		if m == nil {
			return Fragment{}, fmt.Errorf("%w: %s: %q is not a CONFIG_<SYMBOL>=<value> line, a \"# CONFIG_<SYMBOL> is not set\" line or a comment", ErrBadFragment, origin, line)
		}
		if !valueRe.MatchString(m[2]) {
			return Fragment{}, fmt.Errorf("%w: %s: CONFIG_%s has value %q; use y, m, n, a number or a \"quoted string\"", ErrBadFragment, origin, m[1], m[2])
		}
		f.Settings = append(f.Settings, Setting{Symbol: m[1], Value: m[2], Origin: origin})
	}
	return f, sc.Err()
}

// gateRe is one line of kconfigs/versions: SYMBOL, optionally @fragment,
// the first series, why.
var gateRe = regexp.MustCompile(`^([A-Z0-9_]+)(?:@([a-z0-9_/-]+))?\s+([0-9]+\.[0-9]+)\s+(\S.*)$`)

// LoadGates reads dir's GatesFile; no file is no gates.
func LoadGates(dir string) ([]Gate, error) {
	text, err := os.ReadFile(filepath.Join(dir, GatesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gates []Gate
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		origin := fmt.Sprintf("%s:%d", GatesFile, n)
		m := gateRe.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "CONFIG_") {
			return nil, fmt.Errorf("%w: %s: %q is not \"SYMBOL[@fragment] X.Y reason\" (the fragments, or that one, ask for CONFIG_SYMBOL from Linux X.Y on)", ErrBadFragment, origin, line)
		}
		gates = append(gates, Gate{Symbol: m[1], Fragment: m[2], From: m[3], Why: m[4], Origin: origin})
	}
	return gates, sc.Err()
}

// LoadForVersion is LoadFragments, then ForVersion with dir's gates.
func LoadForVersion(dir string, names []string, version string) ([]Fragment, []Gated, error) {
	frags, err := LoadFragments(dir, names)
	if err != nil {
		return nil, nil, err
	}
	gates, err := LoadGates(dir)
	if err != nil {
		return nil, nil, err
	}
	frags, left := ForVersion(frags, gates, version)
	return frags, left, nil
}

// ForVersion returns frags as a tree of version ("6.12.117") is asked
// them: a setting of a gated symbol before its series is moved to its
// fragment's Left, and all of those are returned, for the caller to say.
func ForVersion(frags []Fragment, gates []Gate, version string) ([]Fragment, []Gated) {
	out := make([]Fragment, len(frags))
	var left []Gated
	for i, f := range frags {
		var keep []Setting
		f.Left = nil
		for _, s := range f.Settings {
			g, ok := gateFor(gates, s.Symbol, f.Name)
			if ok && !versionAtLeast(version, g.From) {
				f.Left = append(f.Left, Gated{Setting: s, Gate: g})
				continue
			}
			keep = append(keep, s)
		}
		f.Settings = keep
		left = append(left, f.Left...)
		out[i] = f
	}
	return out, left
}

func gateFor(gates []Gate, symbol, fragment string) (Gate, bool) {
	for _, g := range gates {
		if g.Symbol == symbol && (g.Fragment == "" || g.Fragment == fragment) {
			return g, true
		}
	}
	return Gate{}, false
}

// EffectiveText is f's text as merge_config.sh must read it: the lines of
// the settings left out (Left) become comments.
func (f Fragment) EffectiveText() []byte {
	drop := map[string]bool{}
	for _, g := range f.Left {
		drop[g.Origin] = true
	}
	var b bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(f.Text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if drop[fmt.Sprintf("%s:%d", f.Name, n)] {
			line = "# (not asked of this kernel version, kconfigs/" + GatesFile + ") " + line
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// String says what a left-out setting is and why, for logs and plans.
func (g Gated) String() string {
	return fmt.Sprintf("CONFIG_%s=%s (%s) is asked only from Linux %s (%s: %s)", g.Symbol, g.Value, g.Origin, g.Gate.From, g.Gate.Origin, g.Gate.Why)
}

// versionAtLeast reports whether version ("6.12.117", "7.3") is series
// from ("6.14") or later; an unreadable version counts as the newest.
func versionAtLeast(version, from string) bool {
	v, okV := majorMinor(version)
	f, okF := majorMinor(from)
	if !okV || !okF {
		return true
	}
	return v[0] > f[0] || (v[0] == f[0] && v[1] >= f[1])
}

func majorMinor(s string) ([2]int, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	var out [2]int
	for i := range out {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return [2]int{}, false
		}
		out[i] = n
	}
	return out, true
}

// LoadFragments reads the named fragments from dir (the kconfigs directory).
func LoadFragments(dir string, names []string) ([]Fragment, error) {
	frags := make([]Fragment, 0, len(names))
	for _, name := range names {
		if name == GatesFile {
			return nil, fmt.Errorf("%w: %q is the version gates file, not a fragment: %s", ErrBadFragment, name, available(dir))
		}
		text, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: fragment %q not found under %s: %s", ErrBadFragment, name, dir, available(dir))
		}
		if err != nil {
			return nil, fmt.Errorf("read fragment %s: %w", name, err)
		}
		f, err := ParseFragment(name, text)
		if err != nil {
			return nil, err
		}
		frags = append(frags, f)
	}
	return frags, nil
}

func available(dir string) string {
	var names []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".md") && filepath.Base(path) != GatesFile {
			rel, _ := filepath.Rel(dir, path)
			names = append(names, rel)
		}
		return nil
	})
	sort.Strings(names)
	if len(names) == 0 {
		return "the directory has no fragments"
	}
	return "available: " + strings.Join(names, ", ")
}

// Merge returns the effective request of frags: later fragments override
// earlier ones, as merge_config.sh does.
func Merge(frags []Fragment) []Setting {
	idx := map[string]int{}
	var out []Setting
	for _, f := range frags {
		for _, s := range f.Settings {
			if i, ok := idx[s.Symbol]; ok {
				out[i] = s
				continue
			}
			idx[s.Symbol] = len(out)
			out = append(out, s)
		}
	}
	return out
}
