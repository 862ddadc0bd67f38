package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/shell"

	"github.com/ftrace-harness/fth/harness/kbuild"
	"github.com/ftrace-harness/fth/harness/machine/qemu"
	"github.com/ftrace-harness/fth/harness/toolroot"
)

// coverage says how a documented command is run by the tests.
type coverage struct {
	// check runs the command here, cheaply: "run" as written, "dry-run"
	// with --dry-run added (fth run), "list" with --list added (fth
	// matrix), or "" when another test runs it.
	check string
	// tests name the tests that run it for real, as "<dir>:<TestName>"
	// relative to the repository root; the test checks each exists.
	tests []string
}

// readmeLedger is every command README.md and docs/*.md show in a sh
// block. A command added to them without an entry here fails
// TestReadmeCommandsAreRun, and so does an entry whose command left them
// all: the docs say only what some test runs.
func readmeLedger() map[string]coverage {
	e2e := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, "tests/e2e:"+n)
		}
		return out
	}
	return map[string]coverage{
		"make deps":              {tests: []string{".ci:run"}},
		"make test":              {tests: []string{".ci:run"}},
		"make test-arch=riscv64": {check: "dry-run", tests: e2e("TestRISCV64CallOpsPasses")},
		`make test-arch=x86_64 FTH_RUN_FLAGS="--n 500 --seed 7"`:                                                {check: "dry-run", tests: e2e("TestX86CampaignPasses")},
		"bin/fth build --arch x86_64":                                                                           {tests: e2e("TestInTreeConfiguredInPlace")},
		"bin/fth run --arch x86_64 --n 2000":                                                                    {check: "dry-run", tests: e2e("TestX86CampaignPasses")},
		"bin/fth run --crash sysrq-c":                                                                           {check: "dry-run", tests: e2e("TestX86InjectedCrashFails")},
		"bin/fth run --crash hung-task --hold 15m":                                                              {check: "dry-run", tests: e2e("TestX86PartialHangEndsCell")},
		"bin/fth run --pause-after 5s --silence 20s":                                                            {check: "dry-run", tests: e2e("TestX86HangDetected")},
		"bin/fth run --crash rt-inversion --hold 5s":                                                            {check: "dry-run", tests: e2e("TestX86HarnessInducedStall")},
		"bin/fth run --agent-arg scenario=churn":                                                                {check: "dry-run", tests: e2e("TestX86ChurnPasses")},
		"bin/fth run --agent-arg scenario=storm":                                                                {check: "dry-run", tests: e2e("TestX86QEMU111Passes", "TestPPC64LEDefaultStormPasses")},
		"bin/fth bisect --kernel-src ~/linux --good v7.3 --bad HEAD --from out/runs/<id>/<cell>":                {tests: e2e("TestX86BisectFlakyNeverWrong")},
		"bin/fth bisect --kernel-src ~/linux --good v7.3 --bad HEAD -- --arch x86_64 --agent-arg scenario=race": {tests: e2e("TestX86BisectNamesTheCulprit")},
		"bin/fth run --arch x86_64 --n 0 --agent-arg scenario=bench --agent-arg benchparts=scaling,multi --agent-arg scalingn=1000,2000,5000,10000 --agent-arg multin=100,1000,10000":                               {check: "dry-run", tests: e2e("TestX86ProfileAddsUp")},
		"bin/fth run --arch x86_64 --n 0 --mem 4096 --agent-arg scenario=bench --agent-arg benchparts=scaling --agent-arg scalingn=40000 --agent-arg scalemod=true --agent-arg fexitevery=4":                        {check: "dry-run", tests: e2e("TestX86FortyThousandTrampolines")},
		"bin/fth run --arch x86_64 --n 2000 --detach all --mem 4096 --deadline 150m --agent-arg scalemod=true --agent-arg multihold=38000 --agent-arg budget=16m --agent-arg churn=15m --agent-arg stormfirst=true": {check: "dry-run", tests: e2e("TestX86FortyThousandMulti")},
		"bin/fth run --arch x86_64 --n 0 --mem 4096 --deadline 80m --agent-arg scenario=bench --agent-arg benchparts=multilive --agent-arg multiliven=10000,20000,30000,40000 --agent-arg scalemod=true":            {check: "dry-run", tests: e2e("TestX86MultiLiveCost")},
		"bin/fth mutate --arches x86_64":        {check: "dry-run", tests: e2e("TestMutationX86")},
		"make mutation":                         {check: "dry-run", tests: e2e("TestMutationX86")},
		"bin/fth run --agent-arg help":          {check: "run"},
		"bin/fth run --agent-arg scenario=race": {check: "dry-run", tests: e2e("TestX86RaceTrampolinesSurvive")},
		"bin/fth run --agent-arg scenario=race --agent-arg racetarget=trampoline,opstramp":                           {check: "dry-run", tests: e2e("TestX86RaceTrampolinesSurvive")},
		"bin/fth race --list-windows --arch x86_64":                                                                  {tests: e2e("TestX86RaceListWindows")},
		"bin/fth run --agent-arg scenario=race --agent-arg racetarget=int3":                                          {check: "dry-run", tests: e2e("TestX86RaceInt3")},
		"bin/fth run --arch riscv64 --kernel 6.12 ...":                                                               {tests: e2e("TestRISCV64Seed612HalfPatchedCallsite")},
		"bin/fth run --arch riscv64 --agent-arg scenario=race --agent-arg racetarget=callsite":                       {check: "dry-run", tests: e2e("TestRISCV64RaceCallsiteSurvives")},
		"bin/fth mutate --mutants bpf-tramp-skip-rcu-tasks --agent-arg scenario=race":                                {check: "dry-run", tests: e2e("TestX86RaceCatchesTrampolineFreedEarly")},
		"bin/fth run --arch riscv64 --kernel 6.12 --patch tests/seeds/riscv64-6.12-ftrace-under-preemption.patch \\": {tests: e2e("TestRISCV64Seed612HalfPatchedCallsite")},
		"--fragments base,arch/riscv64,preempt/full --agent-arg scenario=race --agent-arg racetarget=callsite":       {tests: e2e("TestRISCV64Seed612HalfPatchedCallsite")},
		"bin/fth repro out/runs/<id>/<cell>":                                                                         {tests: e2e("TestKnownFindingDirectModifyUnload")},
		"bin/fth triage [--vmlinux PATH] [--json] LOG...":                                                            {tests: []string{"harness/cmd/fth:TestTriageFlagsAfterLogs", "harness/cmd/fth:TestTriageVmlinux_SkipsUntilKernelBuilt", "harness/cmd/fth:TestTriageJSONContract"}},
		"bin/fth report out/runs/<id>":                                                                               {tests: []string{"harness/cmd/fth:TestReportCommand"}},
		"bin/fth report --mail out/runs/<id>/<cell>":                                                                 {tests: []string{"harness/cmd/fth:TestReportMail", "results/mail:TestGolden"}},
		"make verify-findings":                                         {tests: e2e("TestVerifyFindings")},
		"bin/fth compare out/runs/<A> out/runs/<B>":                    {tests: []string{"harness/cmd/fth:TestCompareCommand", "results/compare:TestCompare"}},
		"bin/fth bench cell --arch riscv64":                            {tests: []string{"harness/cmd/fth:TestBadInputsFailFastWithUsage"}},
		"KERNEL_SRC=~/linux bin/fth run":                               {tests: e2e("TestInTreeConfiguredInPlace")},
		"bin/fth help run":                                             {check: "run"},
		"bin/fth matrix --list --arches all --variants all":            {check: "run"},
		"bin/fth matrix --arches x86_64,riscv64":                       {check: "list", tests: e2e("TestX86CampaignPasses", "TestRISCV64CallOpsPasses")},
		"bin/fth matrix --file tests/matrix/nightly.yaml":              {check: "list", tests: []string{"tests/workflows:TestNightlyCoversEveryArchAndValidVariants"}},
		"bin/fth matrix --file tests/matrix/race.yaml --arches x86_64": {check: "list", tests: []string{"tests/workflows:TestNightlyRaceExploresEveryArch"}},
		"bin/fth matrix --kernel 7.3,6.12 --arches x86_64":             {check: "list", tests: append(e2e("TestMatrixKernelVersions"), "harness/cmd/fth:TestMatrixKernelAxisList")},
		"bin/fth compare --kernels 6.12,7.3 out/runs/<id>":             {tests: append(e2e("TestMatrixKernelVersions"), "harness/cmd/fth:TestCompareKernels")},
		"make matrix":                            {check: "list"},
		"make soak BOARD=user@board DURATION=8h": {tests: e2e("TestBoardSoakSurvivesPanic")},
		"bin/fth soak --target ssh://user@board:22 --duration 8h [--resume] [--scenario churn] [--agent-arg k=v]": {tests: e2e("TestBoardSoakSurvivesPanic")},
		"bin/fth boardvm --port 2222":                                                              {tests: e2e("TestBoardSoakSurvivesPanic")},
		"bash scripts/toolroot.sh":                                                                 {tests: []string{".ci:run", "harness/toolroot:TestCommandRuns"}},
		"bin/fth run --arch x86_64 --qemu 11.1":                                                    {check: "dry-run", tests: []string{"harness/machine/qemu:TestProbeVersion", "harness/machine/qemu:TestCommandInRoot"}},
		"bin/fth build --arch x86_64 --toolchain gcc-14":                                           {tests: []string{"harness/kbuild:TestResolveRootToolchain", "harness/cmd/fth:TestMissingRootSaysMakeDeps"}},
		"bin/fth run --arch x86_64 --toolchain gcc-14 --qemu 11.1":                                 {check: "dry-run", tests: []string{"harness/kbuild:TestResolveRootToolchain", "harness/machine/qemu:TestProbeVersion"}},
		"bin/fth matrix --arches x86_64,riscv64 --toolchain host,gcc-14,clang-21 --qemu host,11.1": {check: "list", tests: []string{"harness/matrix:TestExpandAxes"}},
		"bin/fth soak --target ssh://root@127.0.0.1:2222 --known-hosts out/boardvm/known_hosts -i out/boardvm/id_ed25519 --duration 10m": {tests: e2e("TestBoardSoakSurvivesPanic")},
	}
}

// docFiles are the files whose commands the ledger covers, relative to
// the repository root: README and every page under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md: the test would check README alone")
	}
	var out []string
	for _, p := range append([]string{"../../../README.md"}, pages...) {
		out = append(out, strings.TrimPrefix(p, "../../../"))
	}
	return out
}

// docCommand is one command line of a sh block, and the file showing it.
type docCommand struct{ cmd, file string }

// readmeCommands returns the command lines of the sh blocks of README and
// docs/*.md, without their comments.
func readmeCommands(t *testing.T) []docCommand {
	t.Helper()
	var out []docCommand
	for _, name := range docFiles(t) {
		f, err := os.Open(filepath.Join("../../..", name))
		if err != nil {
			t.Fatal(err)
		}
		in := false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "```sh"):
				in = true
				continue
			case strings.HasPrefix(line, "```"):
				in = false
				continue
			}
			if !in {
				continue
			}
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, docCommand{line, name})
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

var testFuncRe = regexp.MustCompile(`(?m)^func (Test\w+)\(`)

// testExists reports whether dir (from the repository root) defines the
// test func name, or for ".ci:run" whether .ci/run runs the command.
func testExists(t *testing.T, ref string) bool {
	dir, name, _ := strings.Cut(ref, ":")
	root := "../../.."
	if dir == ".ci" {
		_, err := os.Stat(filepath.Join(root, ".ci", name))
		return err == nil
	}
	files, _ := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFuncRe.FindAllSubmatch(b, -1) {
			if string(m[1]) == name {
				return true
			}
		}
	}
	return false
}

// Every command README and docs/*.md show is run by some test: cheap ones
// here (help, --dry-run through the whole input check, matrix --list
// through Kconfig resolution), the rest by the named e2e or unit tests,
// which must exist. make lines go through `make -n`, so what is checked is
// what make runs. A command shown in several files is checked once.
func TestReadmeCommandsAreRun(t *testing.T) {
	ledger := readmeLedger()
	seen := map[string]bool{}
	for _, dc := range readmeCommands(t) {
		cmd := dc.cmd
		if seen[cmd] {
			continue
		}
		seen[cmd] = true
		cov, ok := ledger[cmd]
		if !ok {
			t.Errorf("%s shows %q, which no test runs: add it to readmeLedger with the test that does", dc.file, cmd)
			continue
		}
		for _, ref := range cov.tests {
			if !testExists(t, ref) {
				t.Errorf("%s: command %q is said to be run by %s, which does not exist", dc.file, cmd, ref)
			}
		}
		if cov.check == "" {
			continue
		}
		t.Run(cmd, func(t *testing.T) { checkCommand(t, cmd, cov.check) })
	}
	for cmd := range ledger {
		if !seen[cmd] {
			t.Errorf("readmeLedger lists %q, which neither README nor docs/*.md shows any more", cmd)
		}
	}
}

// checkCommand runs one documented command in-process, as check says.
func checkCommand(t *testing.T, cmd, check string) {
	words, err := shell.Fields(cmd, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if words[0] == "make" {
		words = makeCommand(t, words[1:])
	}
	if words[0] != "bin/fth" {
		t.Fatalf("%q does not run bin/fth", cmd)
	}
	args := words[1:]
	switch check {
	case "dry-run":
		args = append(args, "--dry-run")
	case "list":
		args = append(args, "--list")
	}
	if (check == "list" || strings.Contains(cmd, "matrix")) && !haveKernelTree() {
		t.Skipf("needs the kernel tree %s (make deps)", defaultKernelSrc)
	}
	if needsToolRoot(args) && !haveToolRoot() {
		t.Skip("needs the toolchain root (make deps)")
	}
	// The docs' paths are relative to the repository root.
	t.Chdir("../../..")
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), args, &stdout, &stderr)
	if code := exitCode(err, &stderr); code != exitPass {
		t.Errorf("fth %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
}

// makeCommand returns the fth command line `make -n args` would run.
func makeCommand(t *testing.T, args []string) []string {
	out, err := exec.Command("make", append([]string{"-s", "-n", "-C", "../../.."}, args...)...).Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", strings.Join(args, " "), err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "bin/fth ") {
			words, err := shell.Fields(line, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			return words
		}
	}
	t.Fatalf("make -n %s runs no bin/fth:\n%s", strings.Join(args, " "), out)
	return nil
}

func haveKernelTree() bool {
	_, err := os.Stat(filepath.Join(envOr("KERNEL_SRC", defaultKernelSrc), "Makefile"))
	return err == nil
}

// needsToolRoot reports whether fth args ask for a toolchain or QEMU from
// the toolchain root.
func needsToolRoot(args []string) bool {
	for i, a := range args {
		if (a == "--toolchain" || a == "--qemu") && i+1 < len(args) {
			for _, v := range strings.Split(args[i+1], ",") {
				if kbuild.Compiler(v).InRoot() || qemu.Emulator(v).InRoot() {
					return true
				}
			}
		}
	}
	return false
}

// haveToolRoot reports whether the machine has a complete toolchain root.
func haveToolRoot() bool {
	out, err := exec.Command("bash", "../../../scripts/toolroot.sh", "path").Output()
	if err != nil {
		return false
	}
	_, err = toolroot.Open(strings.TrimSpace(string(out)))
	return err == nil
}
