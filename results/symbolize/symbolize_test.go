package symbolize

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// oopsFixture is the console parser's real MTTCG int3 oops from Linux 7.3.4.
const oopsFixture = "../console/testdata/x86_64/int3-oops-mttcg-attach-storm-7.3.4"

// fixtureLog returns the fixture's console log, without its TITLE/KIND
// header (which ends at the first blank line).
func fixtureLog(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(oopsFixture)
	if err != nil {
		t.Fatal(err)
	}
	_, log, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		t.Fatalf("%s: no blank line after the header", oopsFixture)
	}
	return string(log)
}

// fixtureVmlinux returns an x86_64 vmlinux from the fth kernel cache whose
// symbols have the sizes the fixture's oops printed, i.e. the very build that
// printed it. The e2e tests build that kernel (make test), but unit tests may
// run first, so a machine without it skips rather than fails.
func fixtureVmlinux(t testing.TB) *Symbolizer {
	t.Helper()
	cache := os.Getenv("FTH_CACHE")
	if cache == "" {
		cache = "/var/cache/fth"
	}
	pattern := filepath.Join(cache, "kernels", "x86_64-*", "build", "vmlinux")
	paths, _ := filepath.Glob(pattern)
	want := Parse(fixtureLog(t))
	for _, p := range paths {
		s, err := Open(p, Options{})
		if err != nil {
			continue
		}
		if sizesMatch(s, want) {
			t.Cleanup(func() { s.Close() })
			return s
		}
		s.Close()
	}
	t.Skipf("no vmlinux matching %s under %s (found %d): the x86_64 kernel that printed it is built by the e2e tests (make test) or `bin/fth build --arch x86_64`", oopsFixture, pattern, len(paths))
	return nil
}

func sizesMatch(s *Symbolizer, refs []Ref) bool {
	n := 0
	for _, r := range refs {
		if r.Func == "" {
			continue
		}
		sym, _, ok := s.syms.lookup(r.Func, r.Offset, r.Size)
		if !ok || (sym.size != r.Size && sym.gap != r.Size) {
			return false
		}
		n++
	}
	return n > 0
}

// The fixture's oops, symbolized, must read like decode_stacktrace.sh's
// output: the int3 site, the inlined syscall dispatch, the entry code.
func TestRealVmlinuxOops_SkipsUntilKernelBuilt(t *testing.T) {
	s := fixtureVmlinux(t)
	frames, err := s.Report(context.Background(), fixtureLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range frames {
		got = append(got, strings.Join(f.Lines(), " | "))
	}
	want := []string{
		"up_read+0x1/0xc0 kernel/locking/rwsem.c:1675",
		"__do_sys_newuname+0x9a/0x110 kernel/sys.c:1360",
		"do_syscall_x64 arch/x86/entry/syscall_64.c:64 [inline] | do_syscall_64+0x68/0x320 arch/x86/entry/syscall_64.c:87",
		"entry_SYSCALL_64_after_hwframe+0x4b/0x53 arch/x86/entry/entry_64.S:121",
		"up_read+0x1/0xc0 kernel/locking/rwsem.c:1675",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("frames:\n got %q\nwant %q", got, want)
	}
}

// Bare addresses, and addresses shifted by KASLR, land on the same lines as
// their symbolic spelling.
func TestRealVmlinuxAddresses_SkipsUntilKernelBuilt(t *testing.T) {
	s := fixtureVmlinux(t)
	sym, _, _ := s.syms.lookup("__do_sys_newuname", 0x9a, 0x110)
	ret := sym.addr + 0x9a
	const slide = 0x1e00000
	tests := []struct {
		name, log string
	}{
		{"nokaslr bare", fmt.Sprintf(" [<%x>]\n", ret)},
		{"kaslr, slide taken from a symbolic frame", fmt.Sprintf(" [<%x>] __do_sys_newuname+0x9a/0x110\n [<%x>]\n", ret+slide, ret+slide)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, err := s.Report(context.Background(), tt.log)
			if err != nil {
				t.Fatal(err)
			}
			f := frames[len(frames)-1]
			if f.Err != "" || len(f.Locations) != 1 || f.Locations[0] != (Location{Function: "__do_sys_newuname", File: "kernel/sys.c", Line: 1360}) || f.Func != "__do_sys_newuname" || f.Offset != 0x9a {
				t.Errorf("frame = %+v", f)
			}
		})
	}
	f := s.Resolve(Ref{Addr: 0x40d54e, HasAddr: true}, 0)
	if f.Err != ErrNotInText.Error() {
		t.Errorf("user address: err %q, want %q", f.Err, ErrNotInText)
	}
	if f := s.Resolve(Ref{Func: "no_such_function_anywhere", Offset: 1, Size: 2}, 0); !strings.Contains(f.Err, ErrUnknownSymbol.Error()) {
		t.Errorf("unknown symbol: err %q", f.Err)
	}
}

// Every sampled function's location must agree with GNU addr2line -f -i,
// the tool decode_stacktrace.sh drives, for the kernel of each arch fth has
// built here (x86_64, riscv64, ...): the most recently used complete cache
// entry of each, since the mutants of one arch share its code and 40 of
// them took 344 s of CI beside the boots. Tests only where binutils and a
// kernel exist.
func TestCachedVmlinuxesAgreeWithAddr2line_SkipsUntilKernelBuilt(t *testing.T) {
	a2l, err := exec.LookPath("addr2line")
	if err != nil {
		t.Skip("addr2line (binutils) not installed: nothing to compare against")
	}
	cache := os.Getenv("FTH_CACHE")
	if cache == "" {
		cache = "/var/cache/fth"
	}
	entries := newestPerArch(t, filepath.Join(cache, "kernels"))
	if len(entries) == 0 {
		t.Skipf("no kernels under %s/kernels yet: the e2e tests (make test) or bin/fth build make them", cache)
	}
	for _, entry := range entries {
		t.Run(filepath.Base(entry), func(t *testing.T) {
			s, err := Open(filepath.Join(entry, "build", "vmlinux"), Options{})
			if errors.Is(err, os.ErrNotExist) {
				// Another fth process (an e2e test beside this one)
				// evicted the entry after it was listed.
				t.Skipf("%s was evicted while the test ran", entry)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			agreeWithAddr2line(t, s, a2l)
		})
	}
}

// newestPerArch lists, for each arch, the kernel cache entry with a
// vmlinux and its completeness mark (manifest.json) that was used last
// (its "used" stamp's mtime). An entry's name starts with its arch.
func newestPerArch(t *testing.T, kernels string) []string {
	t.Helper()
	marks, _ := filepath.Glob(filepath.Join(kernels, "*", "manifest.json"))
	newest := map[string]string{}
	used := map[string]int64{}
	for _, m := range marks {
		entry := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(entry, "build", "vmlinux")); err != nil {
			continue
		}
		var stamp int64
		if fi, err := os.Stat(filepath.Join(entry, "used")); err == nil {
			stamp = fi.ModTime().UnixNano()
		}
		arch, _, _ := strings.Cut(filepath.Base(entry), "-")
		if _, ok := newest[arch]; !ok || stamp > used[arch] {
			newest[arch], used[arch] = entry, stamp
		}
	}
	out := make([]string, 0, len(newest))
	for _, e := range newest {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

func agreeWithAddr2line(t *testing.T, s *Symbolizer, a2l string) {
	var pcs []uint64
	for i := 0; i < len(s.syms.byAddr); i += 53 {
		if sym := s.syms.byAddr[i]; sym.fn && sym.size > 8 {
			pcs = append(pcs, sym.addr+sym.size/2)
		}
	}
	// Ours first, so that the source root is known to relPath below.
	ours := make([][]Location, len(pcs))
	for i, pc := range pcs {
		ours[i], _ = s.Locate(pc)
		for j := range ours[i] {
			ours[i][j].Inline = false
		}
	}
	// -a heads each address's inline chain with the address itself.
	args := []string{"-a", "-f", "-i", "-e", s.Path()}
	for _, pc := range pcs {
		args = append(args, fmt.Sprintf("%#x", pc))
	}
	out, err := exec.Command(a2l, args...).Output()
	if err != nil {
		t.Fatalf("addr2line: %v", err)
	}
	theirs := make([][]Location, len(pcs))
	i := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "0x") {
			i++
			continue
		}
		fn := sc.Text()
		sc.Scan()
		file, line, _ := strings.Cut(sc.Text(), ":")
		line, _, _ = strings.Cut(line, " ")
		n, _ := strconv.Atoi(line) // "?" is line 0, as ours says it
		if file == "??" {
			file = ""
		}
		if i >= 0 && i < len(pcs) {
			theirs[i] = append(theirs[i], Location{Function: fn, File: s.relPath(path.Clean(file), ""), Line: n})
		}
	}
	if i != len(pcs)-1 {
		t.Fatalf("addr2line answered for %d of %d addresses", i+1, len(pcs))
	}
	locations, bad, headerLine, lostInline, alias, noLine := 0, 0, 0, 0, 0, 0
	for i, pc := range pcs {
		o, a := ours[i], theirs[i]
		locations += len(o)
		switch {
		case reflect.DeepEqual(o, a):
		case binutilsOwnFile(s, pc, o, a):
			headerLine++
		case binutilsLostInline(o, a):
			lostInline++
		case aliases(s, o, a):
			alias++
		case lineless(o, a):
			noLine++
		default:
			bad++
			if bad <= 10 {
				t.Errorf("%#x:\n got      %v\n addr2line %v", pc, o, a)
			}
		}
	}
	t.Logf("%d addresses, %d locations: %d differ from addr2line; known binutils 2.40 errors: %d included lines put in the unit's own file, %d inline chains lost; %d named by another alias of the same address; %d with no line on either side", len(pcs), locations, bad, headerLine, lostInline, alias, noLine)
}

// lineless reports whether ours has no line for the address where
// addr2line's answer is no better than the unit: only the unit's file
// ("trace.c:?"), or, for the constructors KASAN makes the compiler add
// (gcc's _sub_I_65535_1 and _sub_D_65535_0, clang's asan.module_ctor: no
// DWARF subprogram of their own), the
// last row of the unit's line program, which is not a line of theirs
// either. A report never points there: they run once at boot.
func lineless(ours, theirs []Location) bool {
	if len(ours) != 1 || len(theirs) != 1 {
		return false
	}
	o, a := ours[0], theirs[0]
	// addr2line may name an assembler local label (".Lpcrel_hi6") instead.
	if (o.Function != a.Function && !strings.HasPrefix(a.Function, ".L")) || o.Line != 0 || o.File != "" {
		return false
	}
	return a.Line == 0 || kasanCtor.MatchString(o.Function)
}

// kasanCtor matches the constructors gcc (_sub_I_65535_1) and clang
// (asan.module_ctor) add for KASAN's globals.
var kasanCtor = regexp.MustCompile(`^(?:_sub_[ID]_\d+_\d+|asan\.module_[cd]tor)$`)

// aliases reports whether ours and addr2line's answers differ only in which
// of several ELF symbols at one address names the function (arm64's
// SYM_FUNC_ALIAS(memset, __pi_memset)), or in addr2line naming an assembler
// local label (".L0 ") where a function symbol exists: same file and line.
func aliases(s *Symbolizer, o, a []Location) bool {
	if len(o) != 1 || len(a) != 1 || o[0].File != a[0].File || o[0].Line != a[0].Line {
		return false
	}
	if strings.HasPrefix(a[0].Function, ".L") {
		return true
	}
	oi, ai := s.syms.byName[o[0].Function], s.syms.byName[a[0].Function]
	for _, i := range oi {
		for _, j := range ai {
			if s.syms.byAddr[i].addr == s.syms.byAddr[j].addr {
				return true
			}
		}
	}
	return false
}

// binutilsOwnFile: binutils 2.40 names a DWARF 5 unit's own file (its line
// table's file 0, the .c file compiled) where the row says another file, at
// least when that file is file 1 or comes from a macro. So it puts code that
// came from an #include at the right line of the wrong file, often past
// that file's end: a header's macro-made function (every __traceiter_*), or
// a whole included .c file (kernel/bpf/btf_relocate.c is two lines that
// include tools/lib/bpf/btf_relocate.c, and addr2line puts
// cmp_btf_name_size at its line 92). Ours names the file the row names.
// Only that exact error is forgiven: addr2line's file must be the unit's
// own, and ours must be another one, at the same function and line.
func binutilsOwnFile(s *Symbolizer, pc uint64, ours, theirs []Location) bool {
	if len(ours) != len(theirs) {
		return false
	}
	own := unitOwnFile(s, pc)
	if own == "" {
		return false
	}
	forgiven := false
	for i := range ours {
		o, a := ours[i], theirs[i]
		if o == a {
			continue
		}
		if o.Function != a.Function || o.Line != a.Line || a.File != own || o.File == own {
			return false
		}
		forgiven = true
	}
	return forgiven
}

// unitOwnFile is the file pc's unit compiled, as relPath names it.
func unitOwnFile(s *Symbolizer, pc uint64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loadDWARF() != nil {
		return ""
	}
	off, ok := s.units.find(pc)
	if !ok {
		return ""
	}
	u, err := s.loadUnit(off)
	if err != nil {
		return ""
	}
	name := u.fileName(0)
	if name == "" {
		return ""
	}
	return s.relPath(path.Clean(name), u.compDir)
}

// binutilsLostInline: on riscv64, binutils 2.40 resolves a range list's
// misses inlined subroutines whose ranges are DWARF 5 range lists based on
// DW_RLE_base_addressx (its readelf shows such bases odd, misaligned): it
// reports the outer function with the innermost line. Checked by hand:
// addr2line puts io_uring/poll.c:229, the body of the inlined
// io_poll_execute, in io_pollfree_wake, which ours has as the caller at
// poll.c:405. Ours keeps the chain; its innermost line and outermost
// function are addr2line's.
func binutilsLostInline(ours, theirs []Location) bool {
	if len(theirs) == 0 || len(ours) <= len(theirs) {
		return false
	}
	return ours[0].Line == theirs[0].Line && ours[0].File == theirs[0].File &&
		ours[len(ours)-1].Function == theirs[len(theirs)-1].Function
}

// A Go binary built here has inlined frames in its DWARF, and its runtime
// says where they are: the symbolizer must agree with the runtime, on any
// machine with a Go toolchain.
func TestGoBinaryInlinedFrames(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Skip("no go tool to build the fixture program")
		}
	}
	bin := filepath.Join(t.TempDir(), "goprog")
	build := exec.Command(goTool, "build", "-o", bin, "main.go")
	build.Dir = filepath.Join("testdata", "goprog")
	build.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/goprog: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("run goprog: %v", err)
	}
	s, err := Open(bin, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Runtime frames come innermost first; an "inline" frame is inlined into
	// the next one. The group's first frame has the address of the call; the
	// others have the addresses of the compiler's inline marks.
	var group []Location
	var groupPC uint64
	checked, inlined := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 4 {
			t.Fatalf("goprog line %q: want pc, kind, function, file:line", line)
		}
		pc, err := strconv.ParseUint(strings.TrimPrefix(fields[0], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("goprog line %q: %v", line, err)
		}
		kind, fn, pos := fields[1], fields[2], fields[3]
		if len(group) == 0 {
			groupPC = pc
		}
		file, ln, _ := strings.Cut(pos, ":")
		n, _ := strconv.Atoi(ln)
		group = append(group, Location{Function: fn, File: filepath.Base(file), Line: n, Inline: kind == "inline"})
		if kind == "inline" {
			continue
		}
		if !strings.HasPrefix(fn, "main.") {
			group = nil
			continue
		}
		locs, err := s.Locate(groupPC)
		if err != nil {
			t.Errorf("Locate(%#x): %v", groupPC, err)
		}
		for i := range locs {
			locs[i].File = filepath.Base(locs[i].File)
		}
		if !reflect.DeepEqual(locs, group) {
			t.Errorf("Locate(%#x):\n got %v\nwant %v (the runtime's view)", groupPC, locs, group)
		}
		checked++
		inlined += len(group) - 1
		group = nil
	}
	if checked < 3 || inlined < 2 {
		t.Errorf("checked %d frames with %d inlined ones; the fixture should give 3 and 2", checked, inlined)
	}
}

func TestOpenErrorsNameTheFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "vmlinux")
	_, err := Open(missing, Options{})
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open(missing) = %v; want an error naming the path and wrapping ErrNotExist", err)
	}
	notELF := filepath.Join(t.TempDir(), "console.log")
	os.WriteFile(notELF, []byte("not an ELF file\n"), 0o644)
	if _, err := Open(notELF, Options{}); err == nil || !strings.Contains(err.Error(), "vmlinux") {
		t.Errorf("Open(text file) = %v; want an error that says a vmlinux is needed", err)
	}
}

// BenchmarkReport measures what triage pays for one 30-frame stack against
// the real vmlinux: cold opens and indexes the file first (what one `fth
// triage --vmlinux` does), warm reuses a Symbolizer that has seen the units.
// The frames come from 30 functions spread over the whole text, so each
// touches a different compilation unit: the worst case for the lazy index.
func BenchmarkReport(b *testing.B) {
	s := fixtureVmlinux(b)
	var funcs []symbol
	for _, sym := range s.syms.byAddr {
		if sym.fn && sym.size > 16 {
			funcs = append(funcs, sym)
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].addr < funcs[j].addr })
	var log strings.Builder
	log.WriteString("[    1.000000] Call Trace:\n")
	for i := range 30 {
		f := funcs[i*len(funcs)/30]
		fmt.Fprintf(&log, "[    1.000000]  %s+%#x/%#x\n", f.name, f.size/2, max(f.size, f.gap))
	}
	text := log.String()
	ctx := context.Background()
	check := func(b *testing.B, frames []Frame, err error) {
		if err != nil || len(frames) != 30 {
			b.Fatalf("%d frames, %v", len(frames), err)
		}
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			fresh, err := Open(s.Path(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			frames, err := fresh.Report(ctx, text)
			check(b, frames, err)
			fresh.Close()
		}
	})
	b.Run("warm", func(b *testing.B) {
		frames, err := s.Report(ctx, text)
		check(b, frames, err)
		for b.Loop() {
			frames, err := s.Report(ctx, text)
			check(b, frames, err)
		}
	})
}

// A clang .S unit's file, joined by Go's line reader with another cache
// entry's comp dir (ccache NOHASHDIR), must still come out relative to the
// source tree, as addr2line names it.
func TestRelPathAsmUnderForeignCompDir(t *testing.T) {
	s := &Symbolizer{roots: []string{"/var/cache/fth/src/linux-source-7.3/"}}
	comp := "/var/cache/fth/kernels/riscv64-e180c6b351d2f2e9/build"
	for name, want := range map[string]string{
		comp + "/var/cache/fth/src/linux-source-7.3/arch/riscv/lib/strrchr.S": "arch/riscv/lib/strrchr.S",
		"/var/cache/fth/src/linux-source-7.3/kernel/fork.c":                   "kernel/fork.c",
		comp + "/include/generated/autoconf.h":                                "include/generated/autoconf.h",
	} {
		if got := s.relPath(name, comp); got != want {
			t.Errorf("relPath(%q) = %q, want %q", name, got, want)
		}
	}
}
