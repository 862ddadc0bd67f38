package matrix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ftrace-harness/fth/harness/arch"
	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/runner"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// AllArches expands to every row of the arch table, in table order.
const AllArches = "all"

// ErrBadFile is wrapped by every matrix-file error.
var ErrBadFile = errors.New("bad matrix file")

// Spec is a whole matrix: which arches, which variants, and how every cell
// runs. Build one with ParseFile, or set fields from flags with ParseArches
// and ParseVariants.
type Spec struct {
	Arches []arch.Arch
	// Variants holds variant names and the keywords DefaultVariants and
	// AllVariants, in the order cells run.
	Variants []string
	// Custom holds variants a matrix file defines for itself.
	Custom []Variant
	// Toolchains and QEMUs are the toolchain and emulator axes: each arch
	// × variant runs with every toolchain, and each of those under every
	// QEMU, in the order given. DefaultSpec has default alone: each arch's
	// measured best (arch.Arch.DefaultToolchain, DefaultQEMU).
	Toolchains []kbuild.Compiler
	QEMUs      []qemu.Emulator
	// Parallel bounds the cells in flight (builds are serialised anyway).
	Parallel int
	Params   Params
}

// Params is what every cell of a matrix runs with.
type Params struct {
	// Scenario is what the guest runs.
	Scenario event.Scenario
	// Agent holds the guest agent's options (n, hold, detach, seed ...).
	Agent    map[string]string
	Accel    qemu.Accel
	CPUs     int
	MemoryMB int
	// Deadline and Silence are per boot, before the arch's timeout scale.
	Deadline time.Duration
	Silence  time.Duration
}

// DefaultDetach is how many of the attached trampolines a default cell
// detaches one by one with timing; the rest go with the guest when it
// reboots. Each detach waits for an RCU-tasks grace period: ~17 ms on x86_64
// but ~0.5 s on riscv64 under TCG, where detaching all 2,000 took 19 of the
// cell's 22 minutes. 200 still gives a detach distribution with a p99, and
// detaching them while the hammer runs is what stresses the free path.
const DefaultDetach = 200

// DefaultParams are a cell's defaults, the one home of them: fth run's
// flags, a matrix cell, a mutant's campaign, the bench and the board VM
// take theirs from here, so that they all boot the same guest.
func DefaultParams() Params {
	return Params{
		Scenario: event.ScenarioCampaign,
		Agent:    map[string]string{"n": "2000", "hold": "5s", "detach": strconv.Itoa(DefaultDetach)},
		Accel:    qemu.AccelAuto,
		CPUs:     2,
		MemoryMB: 1024,
		Deadline: 30 * time.Minute,
		Silence:  90 * time.Second,
	}
}

// DefaultSpec is every arch's default variants with DefaultParams.
func DefaultSpec() Spec {
	return Spec{
		Arches: arch.All(), Variants: []string{DefaultVariants}, Parallel: 1, Params: DefaultParams(),
		Toolchains: []kbuild.Compiler{kbuild.CompilerDefault}, QEMUs: []qemu.Emulator{qemu.EmulatorDefault},
	}
}

// ParseToolchains turns --toolchain names into the toolchain axis, in the
// order given, each once.
func ParseToolchains(names []string) ([]kbuild.Compiler, error) {
	var out []kbuild.Compiler
	for _, n := range names {
		c, err := kbuild.ParseCompiler(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: none given", kbuild.ErrBadCompiler)
	}
	return out, nil
}

// ParseQEMUs turns --qemu names into the emulator axis, in the order
// given, each once.
func ParseQEMUs(names []string) ([]qemu.Emulator, error) {
	var out []qemu.Emulator
	for _, n := range names {
		e, err := qemu.ParseEmulator(strings.TrimSpace(n))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: none given", qemu.ErrBadEmulator)
	}
	return out, nil
}

// NeedsRoot reports whether a cell of s runs a toolchain or QEMU from the
// toolchain root.
func (s Spec) NeedsRoot() bool {
	for _, a := range s.Arches {
		tcs, qs := s.axesFor(a)
		if slices.ContainsFunc(tcs, kbuild.Compiler.InRoot) || slices.ContainsFunc(qs, qemu.Emulator.InRoot) {
			return true
		}
	}
	return false
}

// axesFor is the toolchain and QEMU axes for a: default resolved to the
// arch row's choice, each choice once, in the order given; empty axes are
// the default.
func (s Spec) axesFor(a arch.Arch) ([]kbuild.Compiler, []qemu.Emulator) {
	return resolveAxis(s.Toolchains, a, kbuild.CompilerDefault), resolveAxis(s.QEMUs, a, qemu.EmulatorDefault)
}

// resolveAxis resolves each choice of an axis for a, each once, in order;
// an empty axis is def's.
func resolveAxis[T interface {
	~string
	Resolve(arch.Arch) T
}](axis []T, a arch.Arch, def T) []T {
	var out []T
	for _, c := range axis {
		if c = c.Resolve(a); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []T{def.Resolve(a)}
	}
	return out
}

// ParseArches turns arch names (or AllArches) into arch rows, in the order
// given, each once.
func ParseArches(names []string) ([]arch.Arch, error) {
	var out []arch.Arch
	add := func(a arch.Arch) {
		if !slices.ContainsFunc(out, func(b arch.Arch) bool { return b.Name == a.Name }) {
			out = append(out, a)
		}
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == AllArches {
			for _, a := range arch.All() {
				add(a)
			}
			continue
		}
		a, err := arch.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("%w, or %s", err, AllArches)
		}
		add(a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no architectures given: name some of %s, or %s", archNames(), AllArches)
	}
	return out, nil
}

// ParseVariants checks variant names (and the keywords) against the built-ins
// and custom, and returns them trimmed, in order.
func ParseVariants(names []string, custom []Variant) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n != DefaultVariants && n != AllVariants {
			if _, err := Lookup(n, custom); err != nil {
				return nil, err
			}
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no variants given: use %s, %s, or names from %s", ErrUnknownVariant, DefaultVariants, AllVariants, strings.Join(variantNames(custom), ", "))
	}
	return out, nil
}

// fileKeys are fileSpec's yaml keys, for errors.
var fileKeys = []string{"arches", "variants", "toolchain", "qemu", "scenario", "agent", "accel", "cpus", "mem", "deadline", "silence", "parallel"}

// fileSpec is the matrix file's shape on disk.
type fileSpec struct {
	Arches    stringList           `yaml:"arches"`
	Variants  variantList          `yaml:"variants"`
	Toolchain stringList           `yaml:"toolchain"`
	QEMU      stringList           `yaml:"qemu"`
	Scenario  string               `yaml:"scenario"`
	Agent     map[string]yaml.Node `yaml:"agent"`
	Accel     string               `yaml:"accel"`
	CPUs      int                  `yaml:"cpus"`
	Mem       int                  `yaml:"mem"`
	Deadline  time.Duration        `yaml:"deadline"`
	Silence   time.Duration        `yaml:"silence"`
	Parallel  int                  `yaml:"parallel"`
}

// LoadFile reads a matrix file (see ParseFile).
func LoadFile(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: %w", ErrBadFile, err)
	}
	return ParseFile(path, b)
}

// ParseFile parses a matrix file; name is used in errors. Keys it does not
// know are errors (a typo must not silently run the defaults), and anything
// left out takes DefaultSpec's value:
//
//	arches: [x86_64, arm64]          # or: all
//	variants: [default, lazy]        # names, default, all, or definitions:
//	  # - {name: my-kasan, fragments: [ftrace/direct-calls, debug/kasan], preempt: full}
//	toolchain: [host, gcc-14]        # host, gcc-12, gcc-14, clang-19, clang-21
//	qemu: [host, "11.1"]             # host, 7.2, 11.1
//	scenario: storm
//	agent: {n: 2000, hold: 5s, detach: all}
//	accel: auto
//	cpus: 2
//	mem: 1024
//	deadline: 30m
//	silence: 90s
//	parallel: 1
func ParseFile(name string, data []byte) (Spec, error) {
	var f fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Spec{}, fmt.Errorf("%w %s: %w (known keys: %s)", ErrBadFile, name, err, strings.Join(fileKeys, ", "))
	}
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w %s: "+format, append([]any{ErrBadFile, name}, args...)...)
	}
	s := DefaultSpec()
	for _, v := range f.Variants.custom {
		if err := v.validate(); err != nil {
			return bad("variants: %w", err)
		}
		if slices.ContainsFunc(s.Custom, func(c Variant) bool { return c.Name == v.Name }) {
			return bad("variants: %q is defined twice", v.Name)
		}
		s.Custom = append(s.Custom, v)
	}
	if len(f.Arches) > 0 {
		a, err := ParseArches(f.Arches)
		if err != nil {
			return bad("arches: %w", err)
		}
		s.Arches = a
	}
	if len(f.Variants.names) > 0 {
		v, err := ParseVariants(f.Variants.names, s.Custom)
		if err != nil {
			return bad("variants: %w", err)
		}
		s.Variants = v
	}
	if len(f.Toolchain) > 0 {
		tcs, err := ParseToolchains(f.Toolchain)
		if err != nil {
			return bad("toolchain: %w", err)
		}
		s.Toolchains = tcs
	}
	if len(f.QEMU) > 0 {
		qs, err := ParseQEMUs(f.QEMU)
		if err != nil {
			return bad("qemu: %w", err)
		}
		s.QEMUs = qs
	}
	if f.Scenario != "" {
		sc, err := event.ParseScenario(f.Scenario)
		if err != nil {
			return bad("scenario: %v", err)
		}
		s.Params.Scenario = sc
	}
	for _, k := range slices.Sorted(maps.Keys(f.Agent)) {
		n := f.Agent[k]
		if n.Kind != yaml.ScalarNode || k == "" || strings.ContainsAny(k+n.Value, " \t=") {
			return bad("agent.%s (line %d): want a single word or number, as the agent takes key=value without spaces", k, n.Line)
		}
		s.Params.Agent[k] = n.Value
	}
	if f.Accel != "" {
		a, err := qemu.ParseAccel(f.Accel)
		if err != nil {
			return bad("accel: %w", err)
		}
		s.Params.Accel = a
	}
	for _, num := range []struct {
		key string
		v   int
		dst *int
	}{{"cpus", f.CPUs, &s.Params.CPUs}, {"mem", f.Mem, &s.Params.MemoryMB}, {"parallel", f.Parallel, &s.Parallel}} {
		if num.v < 0 {
			return bad("%s: %d is negative", num.key, num.v)
		}
		if num.v > 0 {
			*num.dst = num.v
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
		dst *time.Duration
	}{{"deadline", f.Deadline, &s.Params.Deadline}, {"silence", f.Silence, &s.Params.Silence}} {
		if d.v < 0 {
			return bad("%s: %s is negative", d.key, d.v)
		}
		if d.v > 0 {
			*d.dst = d.v
		}
	}
	return s, nil
}

// stringList accepts a YAML sequence of strings or a single string.
type stringList []string

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// variantList accepts a single name, or a sequence whose items are names or
// variant definitions (mappings with Variant's fields). A definition is also
// run, in its place in the list.
type variantList struct {
	names  []string
	custom []Variant
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *variantList) UnmarshalYAML(n *yaml.Node) error {
	items := []*yaml.Node{n}
	if n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for _, it := range items {
		switch it.Kind {
		case yaml.ScalarNode:
			l.names = append(l.names, it.Value)
		case yaml.MappingNode:
			var v Variant
			if err := decodeStrict(it, &v); err != nil {
				return err
			}
			l.custom = append(l.custom, v)
			l.names = append(l.names, v.Name)
		default:
			return fmt.Errorf("line %d: a variant is a name or a mapping with name, fragments, preempt, needs, selectable", it.Line)
		}
	}
	return nil
}

// variantKeys are the keys a variant definition may have (Variant's yaml tags).
var variantKeys = []string{"name", "doc", "fragments", "preempt", "needs", "selectable"}

// decodeStrict decodes a variant definition, rejecting keys it does not
// know, which Node.Decode alone does not.
func decodeStrict(n *yaml.Node, out *Variant) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !slices.Contains(variantKeys, k.Value) {
			return fmt.Errorf("line %d: variant key %q is not one of %s", k.Line, k.Value, strings.Join(variantKeys, ", "))
		}
	}
	if err := n.Decode(out); err != nil {
		return fmt.Errorf("variant at line %d: %w", n.Line, err)
	}
	return nil
}

func archNames() string {
	var s []string
	for _, n := range arch.Names() {
		s = append(s, string(n))
	}
	return strings.Join(s, ", ")
}

// Expand turns a spec into cells, resolved against t: for each arch in order,
// its variants in order (DefaultVariants and AllVariants expanded for that
// arch), each once, and each of those with every toolchain and then every
// QEMU of the axes. Skipped cells are included, with their reasons.
func Expand(s Spec, t *Tree) ([]Cell, error) {
	agent, err := s.Params.agentArgs()
	if err != nil {
		return nil, err
	}
	var cells []Cell
	for _, a := range s.Arches {
		tcs, qs := s.axesFor(a)
		for _, n := range s.variantsFor(a) {
			v, err := Lookup(n, s.Custom)
			if err != nil {
				return nil, err
			}
			for _, tc := range tcs {
				for _, q := range qs {
					c, err := ResolveWith(a, v, t, tc)
					if err != nil {
						return nil, err
					}
					c.Name += runner.AxesSuffix("", q)
					c.Run.Name, c.Run.QEMU = c.Name, q
					if c.Skip == "" {
						c.Skip = sameAs(a, v, tc, q, tcs, qs)
					}
					cells = append(cells, s.Params.fill(c, agent))
				}
			}
		}
	}
	return cells, nil
}

// sameAs says why the cell of tc and q repeats an earlier cell of the same
// axes, or "": a toolchain or QEMU named explicitly that is what host
// already is (gcc-12 on x86_64, clang-19 on riscv64, QEMU 7.2) runs the
// same kernel on the same emulator as the host cell, so only one of them
// runs.
func sameAs(a arch.Arch, v Variant, tc kbuild.Compiler, q qemu.Emulator, tcs []kbuild.Compiler, qs []qemu.Emulator) string {
	if !tc.IsHost() && tc.For(a) == kbuild.CompilerHost.For(a) && slices.ContainsFunc(tcs, kbuild.Compiler.IsHost) {
		return fmt.Sprintf("--toolchain %s is what host builds %s with: the same kernel as cell %s", tc, a.Name, CellName(a, v)+runner.AxesSuffix("", q))
	}
	if !q.IsHost() && q.Same(qemu.EmulatorHost) && slices.ContainsFunc(qs, qemu.Emulator.IsHost) {
		return fmt.Sprintf("--qemu %s is the host's QEMU (Debian 12's): the same emulator as cell %s", q, CellName(a, v)+runner.AxesSuffix(tc, ""))
	}
	return ""
}

// agentArgs are the agent options every cell of a matrix runs with: the
// scenario option and the label agree, whichever of the two the matrix
// file or --agent-arg set.
func (p Params) agentArgs() (options.Args, error) {
	given := maps.Clone(p.Agent)
	if _, ok := given["scenario"]; !ok && p.Scenario != options.Defaults(options.HostEnv).Scenario {
		if given == nil {
			given = map[string]string{}
		}
		given["scenario"] = string(p.Scenario)
	}
	agent, err := options.NewArgs(given)
	if err != nil {
		return options.Args{}, fmt.Errorf("agent options: %w", err)
	}
	return agent, nil
}

// fill gives c what every cell of the matrix runs with; agent is
// p.agentArgs(), parsed once for all cells (an Args is never changed in
// place, so they share it).
func (p Params) fill(c Cell, agent options.Args) Cell {
	c.Run.Agent = agent
	c.Run.Accel, c.Run.CPUs, c.Run.MemoryMB = p.Accel, p.CPUs, p.MemoryMB
	c.Run.Deadline, c.Run.Silence = p.Deadline, p.Silence
	return c
}

// variantsFor expands the keywords for arch a and drops repeats, keeping the
// first place each name appears.
func (s Spec) variantsFor(a arch.Arch) []string {
	var out []string
	for _, n := range s.Variants {
		var add []string
		switch n {
		case DefaultVariants:
			add = Defaults(a)
		case AllVariants:
			add = variantNames(s.Custom)
		default:
			add = []string{n}
		}
		for _, m := range add {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}
