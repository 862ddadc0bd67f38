// Package results defines what a run leaves on disk: per cell a console.log,
// an events.jsonl and a result.json; per run a summary.json. Every file is
// written as the run goes (append, or write-then-rename), so a harness that
// crashes or is killed still leaves a readable record.
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results/console"

	"github.com/ftrace-harness/fth/results/hang"
	"github.com/ftrace-harness/fth/wire/event"
)

// MaxOracleFailures bounds the failed checks kept in Result.Oracles; the
// summaries count them all, and events.jsonl has every one.
const MaxOracleFailures = 50

// SchemaVersion is bumped on any incompatible change to Result.
const SchemaVersion = 1

// Verdict is a cell's outcome.
type Verdict string

// Verdicts. Fail means the kernel misbehaved; error means the harness or its
// infrastructure could not reach a judgement.
const (
	Running Verdict = "running"
	Pass    Verdict = "pass"
	Fail    Verdict = "fail"
	Error   Verdict = "error"
	Skip    Verdict = "skip"
)

// Kernel describes the kernel a cell ran.
type Kernel struct {
	Release       string   `json:"release"`
	SourceVersion string   `json:"source_version"`
	SourceDir     string   `json:"source_dir"`
	ConfigSHA256  string   `json:"config_sha256"`
	Image         string   `json:"image"`
	Vmlinux       string   `json:"vmlinux"`
	Toolchain     string   `json:"toolchain"`
	Fragments     []string `json:"fragments"`
	// Verified maps every requested symbol (CONFIG_…) to its value in the
	// final .config, so a reader can tell which variant really ran.
	Verified map[string]string `json:"verified"`
	// Observed is the final value of every ftrace, preemption, BPF JIT and
	// compiler symbol, requested or not.
	Observed map[string]string `json:"observed,omitempty"`
	Cached   bool              `json:"cached"`
	// Patches names the source patches (mutants, see fth mutate) the kernel
	// was built with; empty for the tree as it is.
	Patches []string `json:"patches,omitempty"`
	// Compiler is the toolchain by its --toolchain name, host resolved:
	// gcc-12, clang-19, gcc-14 or clang-21.
	Compiler string `json:"compiler,omitempty"`
	// NotAsked lists the fragments' settings this kernel version was not
	// asked for (kconfigs/versions), each with its reason.
	NotAsked []string `json:"not_asked,omitempty"`
}

// Request is what a cell was asked to run: everything `fth repro` needs to
// run it again, apart from the kernel tree (checked by its identity).
type Request struct {
	Arch      string   `json:"arch"`
	Fragments []string `json:"fragments"`
	// Preempt is the preempt= boot parameter, "" for the build's default.
	Preempt  string         `json:"preempt,omitempty"`
	Scenario event.Scenario `json:"scenario"`
	// AgentArgs are the agent's options as passed (fth.<key>=<value>);
	// the agent's full resolved set, seed included, is in Cmdline.
	AgentArgs map[string]string `json:"agent_args"`
	Accel     string            `json:"accel"`
	CPUs      int               `json:"cpus"`
	MemoryMB  int               `json:"memory_mb"`
	// Deadline and Silence are the unscaled bounds, in seconds.
	Deadline   float64 `json:"deadline_seconds"`
	Silence    float64 `json:"silence_seconds"`
	Singlestep bool    `json:"singlestep,omitempty"`
	Icount     string  `json:"icount,omitempty"`
	KernelSrc  string  `json:"kernel_src"`
	// Patches are the source patches the cell's kernel was built with
	// (fth run --patch, fth mutate), text included, so that a repro
	// builds the same kernel.
	Patches []RequestPatch `json:"patches,omitempty"`
	// Toolchain is the --toolchain choice (host, gcc-12, gcc-14,
	// clang-19, clang-21) and QEMU the --qemu one (host, 7.2, 11.1);
	// empty in results older than both, which ran on the host's.
	Toolchain string `json:"toolchain,omitempty"`
	QEMU      string `json:"qemu,omitempty"`
	// KernelArgs are the extra kernel parameters (fth run --kernel-arg).
	KernelArgs []string `json:"kernel_args,omitempty"`
}

// RequestPatch is one patch of a Request.
type RequestPatch struct {
	Name string `json:"name"`
	Text string `json:"text"`
}

// Board describes the SSH board a soak ran on.
type Board struct {
	Target  string `json:"target"`
	Uname   string `json:"uname"`
	Release string `json:"release"`
	// Config says where the kernel config came from ("/proc/config.gz",
	// "/boot/config-<release>") or why it could not be read.
	Config string `json:"config"`
	// BootIDs are the boot_ids seen, in order: more than one means the
	// board rebooted during the soak.
	BootIDs []string `json:"boot_ids"`
	// DeploySeconds covers building the agent for the board and copying
	// it over, for each deploy.
	DeploySeconds []float64 `json:"deploy_seconds"`
	// Reconnects lists every lost connection and how it ended.
	Reconnects []Reconnect `json:"reconnects,omitempty"`
	// Pstore lists the files saved from /sys/fs/pstore after reboots.
	Pstore []string `json:"pstore,omitempty"`
}

// Reconnect is one lost connection to a board.
type Reconnect struct {
	// At is seconds into the soak when the connection was lost.
	At       float64 `json:"at_seconds"`
	Rebooted bool    `json:"rebooted"`
	// Back is false when the board never answered again.
	Back   bool    `json:"back"`
	Tries  int     `json:"tries"`
	Waited float64 `json:"waited_seconds"`
	Err    string  `json:"error,omitempty"`
	// StaleAgent says what became of the agent of the dropped session
	// after a blip: it must be gone before the next one starts, or two
	// stress runs would fight over the same tracers.
	StaleAgent string `json:"stale_agent,omitempty"`
}

// Finding is a kernel report found on the console, or a hang.
type Finding struct {
	// Source is where the report was found: "" for the console (or a
	// board's kmsg stream), "pstore" for a record kept across a reboot,
	// "prev-boot" for the previous boot's journal, "board" for what the
	// soak itself saw (a reboot, a lost board).
	Source    string       `json:"source,omitempty"`
	Kind      console.Kind `json:"kind"`
	Title     string       `json:"title"`
	Function  string       `json:"function,omitempty"`
	StartLine int          `json:"start_line,omitempty"`
	EndLine   int          `json:"end_line,omitempty"`
	Report    string       `json:"report,omitempty"`
	Stack     []string     `json:"stack,omitempty"`
	// Known is the ID of the known finding (results/known) whose trigger
	// was running when this report came: reported, not counted as a
	// failure unless the run asked to include known findings.
	Known string `json:"known,omitempty"`
	// Induced is set on a stall the harness caused itself (the title of
	// the explanation in Result.Hang): reported, not counted as the
	// kernel's.
	Induced string `json:"induced,omitempty"`
	// Stage is the campaign stage the report came in (event.Stages).
	Stage string `json:"stage,omitempty"`
}

// Timings are wall-clock seconds for each step of a cell.
type Timings struct {
	KernelSeconds float64 `json:"kernel_seconds"`
	ImageSeconds  float64 `json:"image_seconds"`
	// BootToAgentSeconds runs from QEMU start to the agent's hello event.
	BootToAgentSeconds float64 `json:"boot_to_agent_seconds,omitempty"`
	GuestSeconds       float64 `json:"guest_seconds,omitempty"`
	// OracleFailedSeconds runs from QEMU start to the first failed
	// oracle check the host saw (0: none): a mutant's time to detect
	// when an oracle caught it.
	OracleFailedSeconds float64 `json:"oracle_failed_seconds,omitempty"`
	TotalSeconds        float64 `json:"total_seconds"`
}

// Result is one cell's result.json.
type Result struct {
	Schema int    `json:"schema"`
	RunID  string `json:"run_id"`
	Cell   string `json:"cell"`
	Arch   string `json:"arch"`
	// Scenario names what the guest was asked to do; a board's soak has a
	// Board section as well.
	Scenario event.Scenario `json:"scenario"`
	// Request is what the harness was asked to run (see `fth repro`).
	Request *Request `json:"request,omitempty"`
	Kernel  Kernel   `json:"kernel"`
	// QEMU is the first line of the emulator's --version ("QEMU emulator
	// version 11.1.3 (Debian ...)"): which QEMU really ran the cell.
	QEMU string `json:"qemu,omitempty"`
	// Accel is the QEMU accelerator actually used, and AccelReason why.
	Accel       string `json:"accel"`
	AccelReason string `json:"accel_reason,omitempty"`
	// Widening names the race-widening settings in force ("singlestep",
	// "icount", "singlestep+icount"), "" for none.
	Widening string `json:"widening,omitempty"`
	CPUs     int    `json:"cpus"`
	// PreemptModel is what the guest reported in /sys/kernel/debug/sched/preempt.
	PreemptModel string `json:"preempt_model,omitempty"`
	Cmdline      string `json:"cmdline"`
	// Repro boots the same VM by hand.
	Repro string `json:"repro"`
	Seed  string `json:"seed,omitempty"`

	Inventory *event.Inventory        `json:"inventory,omitempty"`
	Phases    map[string]*event.Phase `json:"phases,omitempty"`
	Liveness  *event.Liveness         `json:"liveness,omitempty"`
	// Transitions summarise the churn's operations by name (counts,
	// errnos, latency), in the Phase shape.
	Transitions map[string]*event.Phase `json:"transitions,omitempty"`
	// Oracles holds each oracle's summary, then every failed check (up to
	// MaxOracleFailures).
	Oracles []event.Oracle `json:"oracles,omitempty"`
	// Features are what the agent found the kernel supports, or not, and why.
	Features []event.Feature `json:"features,omitempty"`
	Preempt  *event.Preempt  `json:"preempt,omitempty"`
	HotSet   *event.HotSet   `json:"hot_set,omitempty"`
	// Stages are the campaign's stages, in order (stage.go).
	Stages []StageRecord `json:"stages,omitempty"`
	// Injections are the race scenario's preemption injections, the
	// latest report of each.
	Injections []event.Injection `json:"injections,omitempty"`
	// Windows are the race targets' windows, one per target, as the agent
	// decoded them: what RaceCoverage counts the injections against.
	Windows []event.RaceWindow `json:"windows,omitempty"`
	// images are the trampoline images the agent saw registered, oldest
	// first: in memory only (events.jsonl has them), for
	// AttributeFreedImage.
	images []event.Image
	// Bench holds the bench scenario's measurements.
	Bench *event.Bench `json:"bench,omitempty"`
	// Delivery is the delivery oracle's coverage.
	Delivery *event.Delivery `json:"delivery,omitempty"`
	// Board is set for a soak on an SSH board.
	Board *Board `json:"board,omitempty"`
	// AgentOK and AgentReason are the agent's own view; the verdict also weighs
	// the console and liveness.
	AgentOK     *bool  `json:"agent_ok,omitempty"`
	AgentReason string `json:"agent_reason,omitempty"`
	// AgentUnjudged: the agent stopped at a limit of its own (event.Done).
	AgentUnjudged bool `json:"agent_unjudged,omitempty"`

	Findings []Finding `json:"findings"`
	// InFlight is the agent operation that had started but not finished when
	// the guest died or hung: for a crash during an attach storm, the function
	// being patched.
	InFlight *event.Op `json:"in_flight,omitempty"`
	// RecentOps are the operations announced just before InFlight, oldest
	// first: a trampoline that breaks the kernel often does so only once the
	// next operation has started.
	RecentOps []event.Op `json:"recent_ops,omitempty"`
	// Registers is the file holding the vCPU register dump taken on a hang.
	Registers string `json:"registers,omitempty"`
	// Ended says what ended the boot: "done" (the agent's own end),
	// "exited" (QEMU exited), "silence" (the no-output watchdog),
	// "hang-report" (the tail after the console's first hang report, or
	// any report when the cell stops at the first finding), "oracle" (the
	// tail after an oracle's first failure, stopping at the first
	// finding), "reset" (the guest reset before done), "panic" (a panic that did not
	// reset), "deadline" or "interrupted".
	Ended string `json:"ended,omitempty"`
	// Shutdown is the reason of QEMU's last SHUTDOWN event ("guest-reset",
	// "guest-shutdown", ...), when there was one.
	Shutdown string `json:"shutdown,omitempty"`
	// Hang is what the kernel said about a guest that stopped making
	// progress (RCU-tasks stall warnings, sysrq w and t), read before the
	// guest was killed.
	Hang *hang.Explanation `json:"hang,omitempty"`

	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`

	Timings   Timings   `json:"timings"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Title is the title of the cell's headline, known findings not counted
// (see Headline).
func (r *Result) Title() string { return r.Headline(false).Title }

// PreemptRefused is the preemption model the cell asked for at boot
// (preempt=) when the kernel runs another one: a PREEMPT_DYNAMIC kernel
// that does not offer it boots its default and says so only on the
// console. "" when the kernel runs what was asked, or nothing was.
func (r *Result) PreemptRefused() string {
	if r.Request == nil || r.Request.Preempt == "" || r.PreemptModel == "" || r.PreemptModel == r.Request.Preempt {
		return ""
	}
	return r.Request.Preempt
}

// CellWriter owns one cell directory and keeps result.json current.
type CellWriter struct {
	Dir string

	mu     sync.Mutex
	result Result
}

// NewCellWriter creates dir and writes an initial result.json.
func NewCellWriter(dir string, r Result) (*CellWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cell directory: %w", err)
	}
	r.Schema = SchemaVersion
	if r.Findings == nil {
		r.Findings = []Finding{} // a reader sees [], not null, for "none"
	}
	if r.Verdict == "" {
		r.Verdict = Running
	}
	w := &CellWriter{Dir: dir, result: r}
	return w, w.flush()
}

// Update applies fn to the result and rewrites result.json atomically.
func (w *CellWriter) Update(fn func(*Result)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn(&w.result)
	return w.flush()
}

// Result returns a copy of the current result.
func (w *CellWriter) Result() Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.result
}

// Path returns the path of a file in the cell directory.
func (w *CellWriter) Path(name string) string { return filepath.Join(w.Dir, name) }

func (w *CellWriter) flush() error {
	return atomicfile.WriteJSON(filepath.Join(w.Dir, ResultFile), &w.result)
}

// ReadResult loads a result.json.
func ReadResult(path string) (Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// LineLog appends lines to a file, flushing each one so nothing is lost if the
// harness dies.
type LineLog struct {
	mu sync.Mutex
	f  *os.File
}

// CreateLineLog creates (or truncates) path.
func CreateLineLog(path string) (*LineLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LineLog{f: f}, nil
}

// Line appends one line (a newline is added).
func (l *LineLog) Line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(s + "\n")
	return err
}

// Close closes the file.
func (l *LineLog) Close() error { return l.f.Close() }
