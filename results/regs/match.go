package regs

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// families are the register patterns of every arch at once, built from
// Formats by build: each exists here only.
type families struct {
	kernelPC, rawPC, codeReg, link, dumpLine, user, qemuPC *regexp.Regexp
	qemuSP                                                 []QEMUReg
}

// built is every Format's families, compiled once.
var built = mustBuild(Formats())

func mustBuild(fs []Format) *families {
	b, err := build(fs)
	if err != nil {
		panic(err)
	}
	return b
}

// build compiles the families of fs; it is separate from mustBuild so a
// test can see a bad Format reported.
func build(fs []Format) (*families, error) {
	var (
		codeNames, links, eqPC, wordPC []string
		pcForms, anyForms              = map[Form][]string{}, map[Form][]string{}
		users                          []string
		sps                            []QEMUReg
	)
	for _, f := range fs {
		for i, regs := range [][]Reg{f.PC, f.Link} {
			for _, r := range regs {
				if r.Name == "" || len(r.Forms) == 0 {
					return nil, fmt.Errorf("register format %s: register %q has no name or no form", f.Arch, r.Name)
				}
				codeNames = append(codeNames, r.Name)
				if i == 1 {
					links = append(links, r.Name)
				}
				for _, form := range r.Forms {
					if form < Colon || form > IsAt {
						return nil, fmt.Errorf("register format %s: %s has unknown form %d", f.Arch, r.Name, form)
					}
					if i == 0 {
						pcForms[form] = append(pcForms[form], r.Name)
					}
					anyForms[form] = append(anyForms[form], r.Name)
				}
			}
		}
		if f.User != "" {
			users = append(users, regexp.QuoteMeta(f.User))
		}
		switch q := f.QEMUPC; {
		case q.Label == "":
		case q.Skip != 0:
			return nil, fmt.Errorf("register format %s: QEMU's program counter must lead its line, not follow %d words", f.Arch, q.Skip)
		case q.Eq:
			eqPC = append(eqPC, q.Label)
		default:
			wordPC = append(wordPC, q.Label)
		}
		if f.QEMUSP.Label != "" {
			sps = append(sps, f.QEMUSP)
		}
	}
	b := &families{qemuSP: sps}
	var err error
	c := func(expr string) *regexp.Regexp {
		if err != nil {
			return nil
		}
		re, cerr := regexp.Compile(expr)
		if cerr != nil {
			err = fmt.Errorf("register patterns: compile %q: %w", expr, cerr)
		}
		return re
	}
	colon, bracket, isAt := alt(pcForms[Colon]), alt(pcForms[Bracket]), alt(pcForms[IsAt])
	// The symbolized line: a Colon register may carry x86's code
	// segment ("RIP: 0010:") and the addresses older kernels printed
	// before the symbol ("RIP: 0010:[<ffffffff81>]  [<ffffffff81>] func",
	// "pc : [<ffff800008>] func").
	b.kernelPC = c(`^(?:` + colon + `\s*: (?:[0-9a-f]{4}:)?(?:\[<[0-9a-f]+>\]\s+){0,2}|` + bracket + ` \[[0-9a-f]+\]\s+|` + isAt + ` is at )([A-Za-z_][\w.]*)\+0x`)
	// The unsymbolized value, anywhere in a report: no symbol covered it.
	b.rawPC = c(`(?m)(?:\b` + colon + ` ?: +(?:[0-9a-f]{4}:)?|\b` + bracket + ` \[|\b` + isAt + ` is at )(?:0x)?([0-9a-f]{8,16})\b`)
	b.codeReg = c(`^\s*` + group(codeNames) + `(?:\s*:|\s+\[|\s+is at\s)`)
	b.link = c(`^` + alt(links) + `$`)
	// Any "name: value" register, the Code: bytes, and the arch forms
	// whose value is a symbol, the link register's with the PC's ("LR
	// [c000000000293cd8] func+0x", "LR is at func+0x").
	b.dumpLine = c(`^(?:[A-Za-z][A-Za-z0-9_]{0,7}\s{0,2}:\s*(?:[0-9a-fA-F]{4,}\b|\[<)|Code: |` +
		alt(anyForms[Bracket]) + ` \[|` + alt(anyForms[IsAt]) + ` is at )`)
	b.user = c(`^(?:` + strings.Join(users, "|") + `)`)
	b.qemuPC = c(`^\s*(?:` + group(eqPC) + `=|` + group(wordPC) + `\s+)([0-9a-fA-F]{16})\b`)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// names sorts and dedupes register names, longer first so no name can
// shadow another it prefixes.
func names(ns []string) []string {
	ns = slices.Clone(ns)
	slices.SortFunc(ns, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	ns = slices.Compact(ns)
	for i, n := range ns {
		ns[i] = regexp.QuoteMeta(n)
	}
	return ns
}

// alt is a non-capturing alternation of ns.
func alt(ns []string) string { return `(?:` + strings.Join(names(ns), "|") + `)` }

// group is a capturing alternation of ns.
func group(ns []string) string { return `(` + strings.Join(names(ns), "|") + `)` }

// KernelPC matches the line of a register dump that names the kernel's
// program counter by its symbol, on every arch: "RIP: 0010:func+0x12/0x40",
// "pc : func+0x", "epc : func+0x", "NIP [c000…] func+0x", "PC is at
// func+0x". Group 1 is the function. It is anchored at the line's start.
func KernelPC() *regexp.Regexp { return built.kernelPC }

// RawPC finds, anywhere in a multi-line report, a program counter printed
// as an address: "RIP: 0010:0xffffffffc0201000" when no symbol covers it,
// "pc : ffff800080012340", "NIP:  c000000000293cdc", "NIP [c000…]". Group
// 1 is the address's hex digits.
func RawPC() *regexp.Regexp { return built.rawPC }

// CodeReg matches a register-dump line that leads with a register holding
// a code address (a program counter or link register) in any arch's form,
// after optional blanks. Group 1 is the register's name; IsLink says
// whether its value is a return address.
func CodeReg() *regexp.Regexp { return built.codeReg }

// IsLink says whether name, as CodeReg's group 1, is a link register.
func IsLink(name string) bool { return built.link.MatchString(name) }

// DumpLine matches a line of a register dump with its leading blanks
// removed: any "name: value" register ("RSP: 0018:ffffc900…", "x29:
// ffff…"), the Code: bytes, and the forms whose value is a symbol ("NIP
// […]", "LR is at …").
func DumpLine() *regexp.Regexp { return built.dumpLine }

// UserMode matches the register line of a task interrupted in user mode.
func UserMode() *regexp.Regexp { return built.user }

// QEMUPC reads the program counter from a line of QEMU's `info
// registers`: its name as QEMU prints it and its 16 hex digits. The
// kernel's own dumps never match (they spell "pc :", "NIP:", "RIP: ").
func QEMUPC(line string) (name, value string, ok bool) {
	m := built.qemuPC.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1] + m[2], m[3], true
}

// QEMUSP reads a stack pointer from a line of QEMU's `info registers`, as
// its hex digits, in any arch's form: the first on the line wins.
func QEMUSP(line string) (string, bool) {
	f := strings.Fields(line)
	for j, w := range f {
		for _, r := range built.qemuSP {
			if r.Eq {
				if v, ok := strings.CutPrefix(w, r.Label+"="); ok {
					return v, true
				}
			} else if w == r.Label && j+1+r.Skip < len(f) {
				return f[j+1+r.Skip], true
			}
		}
	}
	return "", false
}
