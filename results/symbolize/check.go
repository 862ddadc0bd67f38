package symbolize

import (
	"bytes"
	"debug/elf"
	hexenc "encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrMismatch means the vmlinux is not the kernel that printed the log:
// its file:line answers would be wrong, so there are none. Check's errors
// wrap it, as a *MismatchError naming both sides.
var ErrMismatch = errors.New("vmlinux does not match the log")

// MismatchError says what differs between a log and a vmlinux.
type MismatchError struct {
	// What was compared: "build id", "linux_banner" or "release".
	What string
	// Log and Vmlinux are the two values.
	Log, Vmlinux string
	// Path is the vmlinux.
	Path string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s is not the kernel that printed this log: the log's %s is %q, the vmlinux's is %q (pass the vmlinux of the build that printed it)", e.Path, e.What, e.Log, e.Vmlinux)
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
	prefix, banner, cpuLine *regexp.Regexp
}{
	prefix: regexp.MustCompile(`^[^"{}]*?\[\s*\d+\.\d+\](?:\[\s*[TC]\d+\])? ?`),
	banner: regexp.MustCompile(`^Linux version \S+ .*$`),
	// "CPU: 1 UID: 0 PID: 49 Comm: uinit Not tainted 7.3.4 #1 PREEMPT(full) [package id] [build id]"
	cpuLine: regexp.MustCompile(`^CPU: \d+ (?:UID: \d+ )?PID: \d+ Comm: .*? (?:Kdump: loaded )?(?:Not tainted|Tainted: [A-Z ]*[A-Z]) +(\S+ #\d+)\b.*?(?: ([0-9a-f]{40}))?\s*$`),
}

// ReadLogIdentity finds the first banner, release and build id in a log.
func ReadLogIdentity(log string) LogIdentity {
	var id LogIdentity
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r \t")
		if loc := identity.prefix.FindStringIndex(line); loc != nil {
			line = line[loc[1]:]
		}
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

// Check tells whether the vmlinux printed log, by the strongest evidence
// both have: the build id, else linux_banner against the log's "Linux
// version" line, else the release of the log's "CPU:" line against the
// banner's. It returns what it compared ("" when the log or the vmlinux
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
