package tracefs

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeRoot makes a temp dir standing in for /sys/kernel/tracing: the
// control files exist (tracefs never creates them on open) and are empty.
func fakeRoot(t *testing.T) FS {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{fileTracer, fileFilter, fileKprobes, fileBufferKB} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, dirInstances), 0o755); err != nil {
		t.Fatal(err)
	}
	return New(root)
}

func content(t *testing.T, f FS, rel string) string {
	t.Helper()
	b, err := os.ReadFile(f.path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTracerAndFilter(t *testing.T) {
	f := fakeRoot(t)
	if !f.Exists() {
		t.Fatal("Exists = false")
	}
	if err := f.SetFilter("vfs_read", "do_nanosleep"); err != nil {
		t.Fatal(err)
	}
	if got := content(t, f, fileFilter); got != "vfs_read do_nanosleep\n" {
		t.Errorf("filter after SetFilter = %q", got)
	}
	// Add and remove append, never truncate: truncating a live filter
	// would momentarily trace everything.
	if err := f.AddFilter("ksys_read"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveFilter("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if got := content(t, f, fileFilter); got != "vfs_read do_nanosleep\nksys_read\n!vfs_read\n" {
		t.Errorf("filter after add/remove = %q", got)
	}
	if err := f.SetTracer(Function); err != nil {
		t.Fatal(err)
	}
	if tr, err := f.Tracer(); err != nil || tr != Function {
		t.Errorf("Tracer = %q, %v", tr, err)
	}
	if err := f.Reset(); err != nil {
		t.Fatal(err)
	}
	if got := content(t, f, fileTracer); got != "nop\n" {
		t.Errorf("tracer after Reset = %q", got)
	}
	if got := content(t, f, fileFilter); got != "" {
		t.Errorf("filter after Reset = %q", got)
	}
	if err := f.SetBufferKB(256); err != nil || content(t, f, fileBufferKB) != "256\n" {
		t.Errorf("SetBufferKB: %v, %q", err, content(t, f, fileBufferKB))
	}
}

func TestParseFilter(t *testing.T) {
	if got := ParseFilter("#### all functions enabled ####\n"); len(got) != 0 {
		t.Errorf("empty filter parsed as %v", got)
	}
	got := ParseFilter("vfs_read\ndo_nanosleep\n\nksys_read:traceoff:unlimited\n")
	if !reflect.DeepEqual(got, []string{"vfs_read", "do_nanosleep", "ksys_read:traceoff:unlimited"}) {
		t.Errorf("ParseFilter = %v", got)
	}
}

func TestWriteErrorsCarryErrno(t *testing.T) {
	f := New(t.TempDir()) // no control files at all
	err := f.SetTracer(Function)
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), fileTracer) {
		t.Errorf("SetTracer on a missing file = %v, want ENOENT naming the file", err)
	}
	if f.Exists() {
		t.Error("Exists = true without current_tracer")
	}
	// Writing a directory: EISDIR from open, as the kernel's EINVAL would
	// come from write: either way the errno is in the chain.
	if err := os.Mkdir(f.path(fileFilter), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.AddFilter("x"); !errors.Is(err, unix.EISDIR) {
		t.Errorf("AddFilter on a directory = %v, want EISDIR", err)
	}
}

func TestProbes(t *testing.T) {
	f := fakeRoot(t)
	p := Probe{Group: "fth", Event: "vfs_read", Target: "vfs_read"}
	r := Probe{Group: "fth", Event: "mixr_vfs_read", Ret: true, Target: "vfs_read"}
	if p.Def() != "p:fth/vfs_read vfs_read" || r.Def() != "r:fth/mixr_vfs_read vfs_read" {
		t.Errorf("Def = %q, %q", p.Def(), r.Def())
	}
	for _, pr := range []Probe{p, r} {
		if err := f.AddProbe(pr); err != nil {
			t.Fatal(err)
		}
	}
	// Enabling needs the event directory the kernel creates with the probe.
	if err := f.EnableEvent("fth", "vfs_read", true); !errors.Is(err, unix.ENOENT) {
		t.Errorf("EnableEvent without the event dir = %v, want ENOENT", err)
	}
	dir := filepath.Join(f.Root, dirEvents, "fth", "vfs_read")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "enable"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.EnableEvent("fth", "vfs_read", true); err != nil {
		t.Fatal(err)
	}
	if got := content(t, f, filepath.Join(dirEvents, "fth", "vfs_read", "enable")); got != "1\n" {
		t.Errorf("enable = %q", got)
	}
	got, err := f.Probes()
	if err != nil || !reflect.DeepEqual(got, []Probe{p, r}) {
		t.Errorf("Probes = %+v, %v", got, err)
	}
	// Someone else's probe in the file must survive ClearProbes.
	if err := f.AddProbe(Probe{Group: "kprobes", Event: "other", Target: "do_sys_open"}); err != nil {
		t.Fatal(err)
	}
	if err := f.ClearProbes("fth"); err != nil {
		t.Fatal(err)
	}
	want := "p:fth/vfs_read vfs_read\nr:fth/mixr_vfs_read vfs_read\np:kprobes/other do_sys_open\n-:fth/vfs_read\n-:fth/mixr_vfs_read\n"
	if got := content(t, f, fileKprobes); got != want {
		t.Errorf("kprobe_events after ClearProbes =\n%s\nwant\n%s", got, want)
	}
	if got := content(t, f, filepath.Join(dirEvents, "fth", "vfs_read", "enable")); got != "0\n" {
		t.Errorf("enable after ClearProbes = %q", got)
	}
}

func TestParseProbes(t *testing.T) {
	in := "p:fth/a vfs_read+0\nr16:fth/b do_nanosleep+0 $retval\nbogus\nq:x/y z\np:nogroup z\n"
	want := []Probe{
		{Group: "fth", Event: "a", Target: "vfs_read+0"},
		{Group: "fth", Event: "b", Ret: true, Target: "do_nanosleep+0"},
	}
	if got := ParseProbes(in); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseProbes = %+v", got)
	}
}

func TestInstance(t *testing.T) {
	f := fakeRoot(t)
	in, err := f.Instance("fth_mixed")
	if err != nil {
		t.Fatal(err)
	}
	if in.Root != filepath.Join(f.Root, "instances", "fth_mixed") {
		t.Errorf("instance root = %s", in.Root)
	}
	if _, err := f.Instance("fth_mixed"); err != nil {
		t.Errorf("reusing an instance: %v", err)
	}
	if err := f.RemoveInstance("fth_mixed"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveInstance("fth_mixed"); !errors.Is(err, unix.ENOENT) {
		t.Errorf("second RemoveInstance = %v", err)
	}
}

func TestEventName(t *testing.T) {
	for _, tt := range []struct{ prefix, fn, want string }{
		{"", "vfs_read", "vfs_read"},
		{"mix_", "vfs_read", "mix_vfs_read"},
		{"", "foo.isra.0", "foo_isra_0"},
		{"", "9lives", "_9lives"},
	} {
		if got := EventName(tt.prefix, tt.fn); got != tt.want {
			t.Errorf("EventName(%q, %q) = %q, want %q", tt.prefix, tt.fn, got, tt.want)
		}
	}
	long1 := EventName("mixr_", strings.Repeat("a", 80)+"x")
	long2 := EventName("mixr_", strings.Repeat("a", 80)+"y")
	if len(long1) >= maxEventName || long1 == long2 || !strings.HasPrefix(long1, "mixr_aaa") {
		t.Errorf("long names %q and %q", long1, long2)
	}
}

// TestInVM checks the writers against the real tracefs: a filter round
// trip and a kprobe created, enabled, disabled and removed.
func TestInVM(t *testing.T) {
	if os.Getenv("FTH_IN_VM") != "1" {
		t.Skip("set FTH_IN_VM=1 inside the test VM to touch the real tracefs")
	}
	f := New(DefaultRoot)
	if !f.Exists() {
		t.Skip("tracefs not mounted")
	}
	defer f.Reset()
	defer f.ClearProbes("fth")
	if err := f.SetFilter("vfs_read"); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Filter(); err != nil || !reflect.DeepEqual(got, []string{"vfs_read"}) {
		t.Errorf("Filter = %v, %v", got, err)
	}
	if err := f.SetFilter("fth_no_such_function"); !errors.Is(err, unix.EINVAL) {
		t.Errorf("filtering an unknown function = %v, want EINVAL", err)
	}
	p := Probe{Group: "fth", Event: "t_vfs_read", Target: "vfs_read"}
	if err := f.AddProbe(p); err != nil {
		t.Fatal(err)
	}
	if err := f.EnableEvent(p.Group, p.Event, true); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveProbe(p.Group, p.Event); !errors.Is(err, unix.EBUSY) {
		t.Errorf("removing an enabled probe = %v, want EBUSY", err)
	}
	if err := f.ClearProbes("fth"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := f.Probes(); len(ps) != 0 {
		t.Errorf("probes left: %+v", ps)
	}
}

func TestRecordIPs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "available_filter_functions_addrs")
	// The file's format: "ip name" and, for a module's, " [module]".
	data := "ffffffff81001040 __traceiter_initcall_level\n" +
		"ffffffffa00001b0 call_write [fth_target]\n" +
		"ffffffffa0003ff0 fth_deliver_seq [fth_deliver]\n" +
		"ffffffffa0004000 fth_deliver_seq [other]\n" +
		"not-hex junk\n\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	ips, err := New(dir).RecordIPs()
	if err != nil {
		t.Fatal(err)
	}
	if ips["call_write"] != 0xffffffffa00001b0 || ips["fth_deliver_seq"] != 0xffffffffa0003ff0 || len(ips) != 3 {
		t.Errorf("RecordIPs = %x", ips)
	}
}
