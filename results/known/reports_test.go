package known

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoFile is a path of the repository, from this package's folder.
func repoFile(p string) string { return filepath.Join("..", "..", p) }

// TestReportsAreComplete holds every finding marked a kernel bug to a
// report a maintainer can act on: a subject, the cause, where it was
// seen, and either a standalone reproducer and a fix, or a Status that
// says what is missing.
func TestReportsAreComplete(t *testing.T) {
	numbers := map[string]bool{}
	for _, r := range Reports() {
		if numbers[r.Number] {
			t.Errorf("finding %s: reported twice", r.Number)
		}
		numbers[r.Number] = true
		if r.Subject == "" {
			t.Errorf("finding %s: no subject", r.Number)
		}
		if !r.Bug {
			if r.Status == "" {
				t.Errorf("finding %s: not a kernel bug, and no Status says why", r.Number)
			}
			continue
		}
		if r.Summary == "" || r.Seen == "" {
			t.Errorf("finding %s: a kernel bug needs its cause and where it was seen", r.Number)
		}
		if (r.Standalone == "" || len(r.Fixes) == 0) && r.Status == "" {
			t.Errorf("finding %s: no standalone reproducer or no fix, and no Status says so", r.Number)
		}
		for _, w := range []string{"cell", "oracle", "churn", "stranger", "fth_", "harness"} {
			if strings.Contains(strings.ToLower(r.Summary+" "+r.Subject), w) {
				t.Errorf("finding %s: its report says %q, the harness's word, not the kernel's", r.Number, w)
			}
		}
	}
}

// TestReportFilesExist checks that every reproducer has what a
// maintainer runs without the harness, and every fix is a patch in `git
// format-patch` form with no Signed-off-by (the sender adds theirs).
func TestReportFilesExist(t *testing.T) {
	for _, r := range Reports() {
		if r.Standalone != "" {
			if r.Run == "" {
				t.Errorf("finding %s: a standalone reproducer and no Run steps", r.Number)
			}
			if _, err := regexp.Compile(r.Fails); err != nil || r.Fails == "" {
				t.Errorf("finding %s: its reproducer's Fails %q: %v", r.Number, r.Fails, err)
			}
			dir := repoFile(filepath.Join(ReproDir, r.Standalone))
			for _, f := range []string{"run.sh", "config", "README"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("finding %s: reproducer %s: %v", r.Number, r.Standalone, err)
				}
			}
		}
		for _, f := range r.Fragments {
			if _, err := os.Stat(repoFile(filepath.Join("kconfigs", f))); err != nil {
				t.Errorf("finding %s: fragment %s: %v", r.Number, f, err)
			}
		}
		for _, path := range r.Paths {
			if r.Standalone == "" || len(path.Args) == 0 || !slices.Contains(r.Fixes, path.Fix) {
				t.Errorf("finding %s: path %s: wants the report's reproducer, arguments and one of its fixes: %+v", r.Number, path.Number, path)
			}
			if _, err := regexp.Compile(path.Fails); err != nil || path.Fails == "" {
				t.Errorf("finding %s: path %s: Fails %q: %v", r.Number, path.Number, path.Fails, err)
			}
			if !slices.Contains(r.Also, path.Number) {
				t.Errorf("finding %s: path %s is not among the findings folded into it (Also %v)", r.Number, path.Number, r.Also)
			}
		}
		for _, fix := range r.Fixes {
			b, err := os.ReadFile(repoFile(filepath.Join(FixesDir, fix)))
			if err != nil {
				t.Errorf("finding %s: %v", r.Number, err)
				continue
			}
			s := string(b)
			if !strings.HasPrefix(s, "From ") || !strings.Contains(s, "\nSubject: [PATCH] ") {
				t.Errorf("finding %s: %s is not in git format-patch form (From line, Subject: [PATCH])", r.Number, fix)
			}
			if strings.Contains(s, "Signed-off-by:") {
				t.Errorf("finding %s: %s carries a Signed-off-by; whoever sends it adds their own", r.Number, fix)
			}
		}
	}
}

// TestVerifications checks what fth verify runs of Finding 8's
// reproducer: its own way in with the preferred fix, and 13's path with
// its arguments and the fix that closes it first.
func TestVerifications(t *testing.T) {
	var eight Report
	for _, r := range Reports() {
		if r.Number == "8" {
			eight = r
		}
	}
	vs := eight.Verifications()
	if len(vs) != 2 {
		t.Fatalf("finding 8: %d verifications, want 2 (8, 13)", len(vs))
	}
	if vs[0].Number != "8" || vs[0].Args != nil || vs[0].Fixes[0] != "ftrace-ipmodify-filter-share-direct.patch" {
		t.Errorf("finding 8's own: %s %v %v", vs[0].Number, vs[0].Args, vs[0].Fixes)
	}
	v := vs[1]
	if v.Number != "13" || !slices.Equal(v.Args, []string{"mid-update"}) || v.Standalone != "ipmodify-share" ||
		!slices.Equal(v.Fixes, []string{"ftrace-direct-mod-ask-only-modified.patch", "ftrace-ipmodify-filter-share-direct.patch"}) {
		t.Errorf("13's path: %s %v %s %v", v.Number, v.Args, v.Standalone, v.Fixes)
	}
	if !regexp.MustCompile(v.Fails).MatchString("BPF trampoline attach refused while another trampoline's update was under way") ||
		regexp.MustCompile(v.Fails).MatchString("BPF fexit trampoline bypasses the redirect of an IPMODIFY ops") {
		t.Errorf("13's path: Fails %q matches the wrong titles", v.Fails)
	}
	if len(eight.Fixes) != 2 || eight.Fixes[0] != "ftrace-ipmodify-filter-share-direct.patch" {
		t.Errorf("Verifications changed the report's own fixes: %v", eight.Fixes)
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		id, repro, reproducer, title string
		want                         string
		how                          How
	}{
		{id: "refused-direct-called", want: "14", how: ByID},
		{repro: "eagain-free", want: "14", how: ByRepro},
		{reproducer: "refused-direct-called", want: "14", how: ByReproducer},
		{title: "Oops: int3 in freed bpf_trampoline_10737479858", want: "14", how: ByTitle},
		{title: "general protection fault in ftrace_find_rec_direct", want: "9", how: ByTitle},
		{title: "Oops: int3 in __do_sys_newuname"},
	} {
		r, how, ok := Match(tc.id, tc.repro, tc.reproducer, tc.title)
		if tc.want == "" {
			if ok {
				t.Errorf("Match(%q) = finding %s, want none", tc.title, r.Number)
			}
			continue
		}
		if !ok || r.Number != tc.want || how != tc.how {
			t.Errorf("Match(%+v) = %s by %s (%v), want %s by %s", tc, r.Number, how, ok, tc.want, tc.how)
		}
	}
}

// TestCheckpatchStrict runs the kernel tree's scripts/checkpatch.pl
// --strict on every fix, every reproducer's debug patch and module: what
// leaves this repository for a mailing list must pass it. Two messages are
// ignored: no Signed-off-by (whoever sends a patch adds theirs), and an
// unknown commit id in a Fixes: tag, which checkpatch looks up in the
// tree's git history: the tree `make deps` unpacks is a release with none
// (the tag's form, 12 digits and the subject, is still checked). Without
// the tree the test says so and skips.
func TestCheckpatchStrict(t *testing.T) {
	tree := filepath.Join(srcRoot(), "linux-source-7.3")
	script := filepath.Join(tree, "scripts", "checkpatch.pl")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no %s (make deps unpacks it): %v", script, err)
	}
	for _, f := range sentFiles("*.patch", "*.c") {
		abs, _ := filepath.Abs(f)
		args := []string{script, "--strict", "--no-tree", "--ignore", "MISSING_SIGN_OFF,UNKNOWN_COMMIT_ID"}
		if filepath.Ext(f) == ".c" {
			args = append(args, "-f")
		}
		cmd := exec.Command("perl", append(args, abs)...)
		cmd.Dir = tree
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "total: 0 errors, 0 warnings, 0 checks") {
			t.Errorf("checkpatch.pl --strict %s: %v\n%s", f, err, out)
		}
	}
}

// Every fix, and every reproducer's debug patch, applies cleanly (fuzz is
// a failure; offsets are allowed) to the
// tree it is for: "-6.12.patch" to the 6.12 source `make deps` unpacks
// (whichever 6.12.y Debian carries: 6.12.117 when they were written,
// 6.12.118 since), the rest to 7.3's. A tree that is missing is skipped
// with the reason.
func TestFixesApplyToTheirTree(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) not installed (make deps installs it)")
	}
	for _, f := range sentFiles("*.patch") {
		series := "7.3"
		if strings.HasSuffix(f, "-6.12.patch") {
			series = "6.12"
		}
		tree := filepath.Join(srcRoot(), "linux-source-"+series)
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(tree, "Makefile")); err != nil {
				t.Skipf("no %s (make deps unpacks it)", tree)
			}
			abs, _ := filepath.Abs(f)
			out, err := exec.Command("patch", "-p1", "--dry-run", "--batch", "-F0", "-d", tree, "-i", abs).CombinedOutput()
			if err != nil || strings.Contains(string(out), "fuzz") {
				t.Errorf("%s does not apply to %s: %v\n%s", f, tree, err, out)
			}
		})
	}
}

// srcRoot is where `make deps` unpacks the kernel trees (FTH_SRC_ROOT).
func srcRoot() string {
	if root := os.Getenv("FTH_SRC_ROOT"); root != "" {
		return root
	}
	return "/var/cache/fth/src"
}

// sentFiles are the files that go upstream with the reports: every fix,
// and each standalone reproducer's files matching globs.
func sentFiles(globs ...string) []string {
	var files []string
	for _, r := range Reports() {
		for _, f := range r.Fixes {
			files = append(files, repoFile(filepath.Join(FixesDir, f)))
		}
		if r.Standalone == "" {
			continue
		}
		dir := repoFile(filepath.Join(ReproDir, r.Standalone))
		for _, glob := range globs {
			m, _ := filepath.Glob(filepath.Join(dir, glob))
			files = append(files, m...)
		}
	}
	return files
}
