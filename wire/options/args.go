package options

import (
	"maps"
	"slices"
	"strings"
)

// Args are agent options as the host carries them for one cell: the
// text it was given (--agent-arg key=value, a matrix file, a recorded
// request), which goes on the kernel command line and into result.json
// as given, and what the agent makes of it (FromArgs), which the host
// reads as fields. The zero value is no argument: every option at its
// default.
//
// Only the given text travels to the guest, never the host's defaults:
// a default that depends on the guest (its CPU count) is the guest's to
// choose.
type Args struct {
	given map[string]string
	opts  Options
	// parsed says opts holds FromArgs(given), so that the zero value
	// reads as the defaults.
	parsed bool
}

// NewArgs parses given as the agent will (FromArgs with HostEnv); its
// error names the argument refused (*ArgError) or the options that do
// not go together.
func NewArgs(given map[string]string) (Args, error) {
	o, err := FromArgs(given, HostEnv)
	if err != nil {
		return Args{}, err
	}
	return Args{given: maps.Clone(given), opts: o, parsed: true}, nil
}

// Options is what the agent makes of the arguments.
func (a Args) Options() Options {
	if !a.parsed {
		return Defaults(HostEnv)
	}
	return a.opts
}

// Given returns the arguments as given, in a new map.
func (a Args) Given() map[string]string { return maps.Clone(a.given) }

// Has says the option name was given, rather than left at its default.
func (a Args) Has(name string) bool {
	_, ok := a.given[name]
	return ok
}

// With returns a copy of a with the option name set to value, parsed as
// NewArgs parses.
func (a Args) With(name, value string) (Args, error) {
	g := maps.Clone(a.given)
	if g == nil {
		g = map[string]string{}
	}
	g[name] = value
	return NewArgs(g)
}

// Cmdline returns the kernel parameters that pass the arguments to the
// agent (fth.<name>=<value>), in name order, so that two runs of one
// cell have the same command line.
func (a Args) Cmdline() []string { return pairs(a.given, CmdlinePrefix) }

// String is the arguments as key=value words in name order, or
// "(defaults)".
func (a Args) String() string {
	if len(a.given) == 0 {
		return "(defaults)"
	}
	return Format(a.given)
}

// Format writes agent arguments as key=value words in name order.
func Format(given map[string]string) string { return strings.Join(pairs(given, ""), " ") }

// pairs are given's prefix+key=value words, in name order.
func pairs(given map[string]string, prefix string) []string {
	out := make([]string, 0, len(given))
	for _, k := range slices.Sorted(maps.Keys(given)) {
		out = append(out, prefix+k+"="+given[k])
	}
	return out
}
