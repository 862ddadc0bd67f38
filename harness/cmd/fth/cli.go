package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"
)

// help is what `fth <command> -h` prints above the flags: how the command
// is called and what it does. More, if set, follows the flags.
type help struct {
	Usage string
	About string
	More  func(w io.Writer)
	// Refused explains flags other commands have and this one does not
	// take, by name: why, and what to do instead.
	Refused map[string]string
	// Positional says the command takes arguments besides its flags;
	// without it a stray word is a usage error (see noArgs).
	Positional bool
}

// newFlagSet returns a flag set that prints nothing by itself: help goes
// to stdout (so `fth run -h | grep` works) and errors come back as usage
// errors of one line, not a dump of every flag.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. -h prints the command's help on stdout
// and returns flag.ErrHelp (exit 0); a bad flag is a usage error naming it,
// with the closest flag fs has. Flags may come before or after positional
// arguments (`fth triage LOG --json`), as in most Go-free CLIs.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, h help) error {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printHelp(stdout, fs, h)
				return flag.ErrHelp
			}
			if why, ok := refused(err, h); ok {
				return fmt.Errorf("%w: fth %s: %s", errUsage, fs.Name(), why)
			}
			return fmt.Errorf("%w: fth %s: %v%s (run 'fth %s -h' for its flags)", errUsage, fs.Name(), err, suggestFlag(fs, err), fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			// The flag package ate the "--" that ended the flags: what
			// follows is positional, flags of another command
			// included (fth bisect ... -- <fth run flags>).
			positional = append(positional, rest...)
			break
		}
		if rest[0] == "--" {
			positional = append(positional, rest[1:]...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Parse again with the positional arguments alone, so fs.Args() and
	// fs.NArg() are what callers expect.
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return err
	}
	if !h.Positional {
		return noArgs(fs)
	}
	return nil
}

func printHelp(w io.Writer, fs *flag.FlagSet, h help) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", h.Usage, strings.TrimSpace(h.About))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if h.More != nil {
		fmt.Fprintln(w)
		h.More(w)
	}
}

// refused explains an undefined flag the command refuses on purpose.
func refused(err error, h help) (string, bool) {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return "", false
	}
	name = strings.TrimLeft(name, "-")
	why, ok := h.Refused[name]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("--%s: %s", name, why), true
}

// suggestFlag finds the flag a misspelt one probably meant.
func suggestFlag(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !ok {
		return ""
	}
	name = strings.TrimLeft(name, "-")
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s, ok := closest(name, names); ok {
		return fmt.Sprintf("; did you mean --%s?", s)
	}
	return ""
}

// noArgs refuses positional arguments for a command that takes none, and
// says what a stray word probably meant: `fth run riscv64` once built
// x86_64 and dropped every flag after the word.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() == 0 {
		return nil
	}
	word := fs.Arg(0)
	hint := ""
	if a, ok := archSuggestion(word); ok && fs.Lookup("arch") != nil {
		hint = fmt.Sprintf("; did you mean --arch %s?", a)
	} else if fs.Lookup(strings.TrimLeft(word, "-")) == nil {
		if s, ok := closest(strings.TrimLeft(word, "-"), flagNames(fs)); ok {
			hint = fmt.Sprintf("; did you mean --%s?", s)
		}
	}
	return fmt.Errorf("%w: fth %s: unexpected argument %q%s (fth %s takes only flags)", errUsage, fs.Name(), word, hint, fs.Name())
}

func flagNames(fs *flag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// closest returns the candidate nearest to s by edit distance, if it is
// near enough to be a typo: at most a third of its length, and 1 for short
// words.
func closest(s string, candidates []string) (string, bool) {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, len(s)/3)
	if best == "" || bestD > limit {
		// A prefix is a suggestion too: "riscv" for "riscv64".
		var prefixed []string
		for _, c := range candidates {
			if len(s) >= 3 && strings.HasPrefix(strings.ToLower(c), strings.ToLower(s)) {
				prefixed = append(prefixed, c)
			}
		}
		if len(prefixed) == 1 {
			return prefixed[0], true
		}
		return "", false
	}
	return best, true
}

// editDistance is the optimal string alignment distance between a and b:
// Levenshtein's insertions, deletions and substitutions, plus swapping two
// neighbours, the commonest typo ("rnu").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// version is what `fth --version` prints: the module version and VCS
// revision Go stamped into the binary, and the Go that built it.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "fth (no build information)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if settings["vcs.modified"] == "true" {
			v += "+dirty"
		}
	}
	return fmt.Sprintf("fth %s (%s)", v, info.GoVersion)
}

// commandNames lists the subcommands, for suggestions.
func commandNames() []string {
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
