package symbolize

import (
	"bytes"
	"debug/elf"
	hexenc "encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ftrace-harness/fth/results/printk"
)

// ErrMismatch means the vmlinux is not the kernel that printed the log:
// its file:line answers would be wrong, so there are none. Check's errors
// wrap it, as a *MismatchError naming both sides.
var ErrMismatch = errors.New("vmlinux does not match the log")

// MismatchError says what differs between a log and a vmlinux.
type MismatchError struct {
	// What was compared: "build id", "linux_banner", "release" or
	// "symbol size".
	What string
	// Log and Vmlinux are the two values; for "symbol size", the sizes of
	// Func in hex ("0xc0").
	Log, Vmlinux string
	// Func is the first function whose size differs, for "symbol size".
	Func string
	// More counts the other functions whose size differs.
	More int
	// Path is the vmlinux.
	Path string
}

func (e *MismatchError) Error() string {
	const hint = "(pass the vmlinux of the build that printed it)"
	if e.Func != "" {
		more := ""
		if e.More > 0 {
			more = fmt.Sprintf(" (and %d more)", e.More)
		}
		return fmt.Sprintf("%s is not the kernel that printed this log: %s is %s bytes in it, the log says %s%s %s", e.Path, e.Func, e.Vmlinux, e.Log, more, hint)
	}
	return fmt.Sprintf("%s is not the kernel that printed this log: the log's %s is %q, the vmlinux's is %q %s", e.Path, e.What, e.Log, e.Vmlinux, hint)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// LogIdentity is what a console log says about the kernel that printed it.
type LogIdentity struct {
	// BuildID is the vmlinux build id that ends dump_stack_print_info()'s
	// "CPU: ..." line on kernels with CONFIG_STACKTRACE_BUILD_ID, in hex.
	BuildID string
	// Banner is the "Linux version ..." line the kernel prints first,
	// linux_banner without its newline.
	Banner string
	// Release is the release and build number of a "CPU: ..." line
	// ("7.3.4 #1"), for logs that kept no banner.
	Release string
}

// identity holds the patterns ReadLogIdentity uses.
var identity = struct {
	banner, cpuLine *regexp.Regexp
}{
	banner: regexp.MustCompile(`^Linux version \S+ .*$`),
	// "CPU: 1 UID: 0 PID: 49 Comm: uinit Not tainted 7.3.4 #1 PREEMPT(full) [package id] [build id]"
	cpuLine: regexp.MustCompile(`^CPU: \d+ (?:UID: \d+ )?PID: \d+ Comm: .*? (?:Kdump: loaded )?(?:Not tainted|Tainted: [A-Z ]*[A-Z]) +(\S+ #\d+)\b.*?(?: ([0-9a-f]{40}))?\s*$`),
}

// ReadLogIdentity finds the first banner, release and build id in a log.
func ReadLogIdentity(log string) LogIdentity {
	var id LogIdentity
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r \t")
		line = printk.Text(line)
		if id.Banner == "" && identity.banner.MatchString(line) {
			id.Banner = line
		}
		if m := identity.cpuLine.FindStringSubmatch(line); m != nil {
			if id.Release == "" {
				id.Release = m[1]
			}
			if id.BuildID == "" {
				id.BuildID = m[2]
			}
		}
	}
	return id
}

// BuildID returns the vmlinux's GNU build id in hex, "" when it has none.
func (s *Symbolizer) BuildID() (string, error) {
	sec := s.file.Section(".note.gnu.build-id")
	if sec == nil {
		return "", nil
	}
	data, err := sec.Data()
	if err != nil {
		return "", fmt.Errorf("%s: read .note.gnu.build-id: %w", s.path, err)
	}
	order := s.file.ByteOrder
	for len(data) >= 12 {
		namesz, descsz, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
		name := align4(namesz)
		if uint64(len(data)) < 12+uint64(name)+uint64(align4(descsz)) {
			break
		}
		if typ == 3 /* NT_GNU_BUILD_ID */ && string(bytes.TrimRight(data[12:12+namesz], "\x00")) == "GNU" {
			return hexenc.EncodeToString(data[12+name : 12+name+descsz]), nil
		}
		data = data[12+name+align4(descsz):]
	}
	return "", nil
}

func align4(n uint32) uint32 { return (n + 3) &^ 3 }

// Banner returns the vmlinux's linux_banner string without its newline,
// "" when it has no such symbol.
func (s *Symbolizer) Banner() (string, error) {
	syms, err := s.file.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return "", fmt.Errorf("%s: read symbols: %w", s.path, err)
	}
	for _, sym := range syms {
		if sym.Name != "linux_banner" || int(sym.Section) >= len(s.file.Sections) || sym.Section == elf.SHN_UNDEF {
			continue
		}
		sec := s.file.Sections[sym.Section]
		if sec.Type == elf.SHT_NOBITS || sym.Value < sec.Addr {
			return "", nil
		}
		n := sym.Size
		if n == 0 || n > 1024 {
			n = 1024
		}
		n = min(n, sec.Addr+sec.Size-sym.Value)
		b := make([]byte, n)
		if _, err := sec.ReadAt(b, int64(sym.Value-sec.Addr)); err != nil {
			return "", fmt.Errorf("%s: read linux_banner: %w", s.path, err)
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return strings.TrimRight(string(b), "\n"), nil
	}
	return "", nil
}

// Check tells whether the vmlinux printed log. A matching build id is
// proof enough. Otherwise linux_banner must equal the log's "Linux version"
// line (else the release of the log's "CPU:" line must match the banner's),
// and every function of the log's "func+0xOFF/0xLEN" frames must have that
// size in the vmlinux: reproducible builds of one release and compiler
// share a banner whatever their config, and their functions' sizes tell
// them apart. It returns what it compared ("" when the log or the vmlinux
// offers nothing to compare: the caller should say the match is
// unchecked), and a *MismatchError (errors.Is ErrMismatch) when they
// differ.
func (s *Symbolizer) Check(log string) (string, error) {
	id := ReadLogIdentity(log)
	bid, err := s.BuildID()
	if err != nil {
		return "", err
	}
	if id.BuildID != "" && bid != "" {
		if id.BuildID != bid {
			return "build id", &MismatchError{What: "build id", Log: id.BuildID, Vmlinux: bid, Path: s.path}
		}
		return "build id", nil
	}
	what, err := s.checkBanner(id)
	if err != nil {
		return what, err
	}
	sized, err := s.checkSizes(Parse(log))
	switch {
	case err != nil:
		return "symbol size", err
	case sized && what == "":
		return "symbol size", nil
	case sized:
		return what + " and symbol size", nil
	}
	return what, nil
}

// checkBanner compares linux_banner with the log's banner, else with its
// release.
func (s *Symbolizer) checkBanner(id LogIdentity) (string, error) {
	banner, err := s.Banner()
	if err != nil || banner == "" {
		return "", err
	}
	switch {
	case id.Banner != "":
		if id.Banner != banner {
			return "linux_banner", &MismatchError{What: "linux_banner", Log: id.Banner, Vmlinux: banner, Path: s.path}
		}
		return "linux_banner", nil
	case id.Release != "":
		// "Linux version 7.3.4 (fth@fth) (gcc ...) #1 SMP ..." holds the
		// release after "Linux version " and the build number after ") ".
		release, num, _ := strings.Cut(id.Release, " ")
		fields := strings.Fields(banner)
		if len(fields) < 3 || fields[2] != release || !strings.Contains(banner, ") "+num+" ") {
			return "release", &MismatchError{What: "release", Log: id.Release, Vmlinux: banner, Path: s.path}
		}
		return "release", nil
	}
	return "", nil
}

// checkSizes compares the size each frame prints for its function
// ("up_read+0x1/0xc0": 0xc0) with the vmlinux's. Module frames and
// functions the vmlinux lacks are skipped; a name several symbols share
// (static functions of different files) fits if any of them has the size.
// It reports whether any frame was compared, and a *MismatchError naming
// the first function that differs.
func (s *Symbolizer) checkSizes(refs []Ref) (bool, error) {
	type frame struct {
		name string
		size uint64
	}
	var frames []frame
	seen := map[frame]bool{}
	for _, r := range refs {
		f := frame{r.Func, r.Size}
		if r.Func == "" || r.Module != "" || r.Size == 0 || seen[f] {
			continue
		}
		seen[f] = true
		frames = append(frames, f)
	}
	names := make([]string, len(frames))
	for i, f := range frames {
		names[i] = f.name
	}
	cands := s.syms.candidates(names)
	var bad []frame
	var have uint64
	compared := false
	for _, f := range frames {
		syms := cands[f.name]
		if len(syms) == 0 {
			continue
		}
		compared = true
		if slices.ContainsFunc(syms, func(sym symbol) bool { return sym.printedSize(f.size) }) {
			continue
		}
		if len(bad) == 0 {
			have = syms[0].kallsymsSize()
		}
		bad = append(bad, f)
	}
	if len(bad) == 0 {
		return compared, nil
	}
	// Several sizes of one name in a log are one function that differs.
	more := map[string]bool{}
	for _, f := range bad[1:] {
		if f.name != bad[0].name {
			more[f.name] = true
		}
	}
	return true, &MismatchError{What: "symbol size", Func: bad[0].name, Log: fmt.Sprintf("%#x", bad[0].size), Vmlinux: fmt.Sprintf("%#x", have), More: len(more), Path: s.path}
}
