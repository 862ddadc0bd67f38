package event

// KindInjection reports one preemption injection of the race scenario: the
// agent sends it twice, when the held task is released (Outcome
// "released") and when it is judged (survived, missed, or an oracle's
// failure). The host keeps the latest per Seq; an injection still
// "released" when the kernel dies is the one that crashed it.
const KindInjection Kind = "injection"

// Injection outcomes.
const (
	// InjReleased: the task was stopped at the target, preempted there and
	// let go; the agent has not judged it yet.
	InjReleased = "released"
	// InjSurvived: the task ran on from the target after the race and
	// returned from its call.
	InjSurvived = "survived"
	// InjMissed: the breakpoint did not stop the chosen task there (another
	// vCPU hit it, or none did in time): nothing was injected.
	InjMissed = "missed"
	// InjNotPreempted: the task was stopped at the target but ran on
	// without being preempted (a kernel without preemption, or the
	// preemptor lost the CPU): the race did not happen with the task off
	// the CPU, which is what such a kernel promises.
	InjNotPreempted = "not-preempted"
	// InjFreedUnderTask: the instruction under the preempted task changed
	// while it was held (the image freed and refilled, or unmapped): the
	// bug itself, seen before the task runs into it.
	InjFreedUnderTask = "freed-under-task"
	// InjWrongState: the INT3 window's patch ended with the callsite in a
	// state the tracer did not ask for, or the racer's calls through it
	// failed; or (the literal target) a write left a CALL_OPS callsite in
	// a state it must never pass through.
	InjWrongState = "wrong-state"
	// InjCrashed is set by the host when the kernel died after a release.
	InjCrashed = "crashed"
)

// Injection is one preemption injected at an exact instruction.
type Injection struct {
	// Seq numbers the injections of a run from 1.
	Seq int `json:"seq"`
	// Target is the kind of place: "trampoline" (an instruction of a BPF
	// fentry trampoline image), "fexittramp" (of a BPF fexit trampoline
	// image, whose task naps in the original function while the image is
	// detached), "opstramp" (of an x86 ftrace_ops trampoline),
	// "callsite" (the second instruction of a function's patchable
	// entry) or "int3" (a step of x86's patcher, which is held there
	// while the task runs the callsite; Symbol and Addr are the
	// patcher's place, Insn the callsite's bytes at the hold).
	Target string `json:"target"`
	// Symbol names the place: bpf_trampoline_<key>+0x1c, fth_target_counted+0x4.
	Symbol string `json:"symbol"`
	Addr   string `json:"addr"`
	// Offset is the place's offset in its window (RaceWindow), and Asm
	// its instruction there; Asm is empty where no window was decoded.
	Offset int    `json:"offset"`
	Asm    string `json:"asm,omitempty"`
	// Function is the traced function whose entry leads there.
	Function string `json:"function"`
	// CPU is the vCPU the task was held on.
	CPU int `json:"cpu"`
	// Insn is the instruction bytes at Addr when the vCPU stopped (hex, as
	// the host read them through the stub).
	Insn string `json:"insn,omitempty"`
	// Action is what ran on another CPU while the task was preempted
	// there: "replace" (a second program attached: the trampoline
	// regenerated and the held image put), "detach" (the trampoline's
	// only link closed), "tracer-off" (the function tracer instance whose
	// ops trampoline holds the task switched to nop), "enable" (function
	// tracing switched on for Function), "disable" (switched off); the INT3
	// window's are these two with "-patcher-first" or "-handler-first".
	Action string `json:"action"`
	// ActionMS is how long the action took from the release; ActionDone
	// whether it ended inside the window (a correct kernel may make it
	// wait for the held task).
	ActionMS   float64 `json:"action_ms"`
	ActionDone bool    `json:"action_done"`
	// ActionLate: the action ended after the window but before the held
	// task was let go, and the target was looked at again then.
	ActionLate bool `json:"action_late,omitempty"`
	// WindowMS is how long the preemptor held the CPU; HeldMS how long the
	// task's call took in all (at least WindowMS when it was preempted).
	WindowMS float64 `json:"window_ms"`
	HeldMS   float64 `json:"held_ms,omitempty"`
	// SpunMS is how long the preemptor spun; Preemptions how many
	// involuntary context switches the task's call took.
	SpunMS      float64 `json:"spun_ms,omitempty"`
	Preemptions int     `json:"preemptions"`
	// Stack is the held task's kernel stack during the window
	// (/proc/<tid>/stack), innermost first.
	Stack []string `json:"stack,omitempty"`
	// InsnAfter is what the host read at Addr at the end of the window,
	// the task still held there ("" when the memory was unreadable:
	// unmapped), trampolines only. FreedInWindow says it differs from
	// Insn: the instruction under the preempted task changed (the image
	// was freed and refilled with traps, or unmapped).
	InsnAfter     string `json:"insn_after,omitempty"`
	FreedInWindow bool   `json:"freed_in_window,omitempty"`
	Outcome       string `json:"outcome"`
	// Msg says why, for missed and not-preempted.
	Msg string `json:"msg,omitempty"`
	// Title is the kernel report that followed (InjCrashed).
	Title string `json:"title,omitempty"`
}

// KindRaceWindow reports a race target's window once, when the agent
// first decoded it: every instruction a task passes through there, each a
// place the race preempts it at, in order, one per injection.
const KindRaceWindow Kind = "race_window"

// RaceWindow is one target's window: the instructions of its first image
// from entry to the return, as the host read them through the gdbstub
// and the agent decoded them.
type RaceWindow struct {
	// Target is the injection target (Injection.Target), Symbol the image
	// it was read from, Addr its address.
	Target string `json:"target"`
	Symbol string `json:"symbol"`
	Addr   string `json:"addr"`
	// Arch is the guest's GOARCH; Code the window's bytes (hex).
	Arch string `json:"arch"`
	Code string `json:"code"`
	// Insns are the window's instructions, Actions what each is raced
	// against: a point is an instruction and an action.
	Insns   []WindowInsn `json:"insns"`
	Actions []string     `json:"actions"`
	// Unreachable says why the target has no window on this kernel;
	// Code and Insns are then empty.
	Unreachable string `json:"unreachable,omitempty"`
}

// WindowInsn is one instruction of a window.
type WindowInsn struct {
	Off int    `json:"off"`
	Len int    `json:"len"`
	Asm string `json:"asm"`
}

// RaceMsg is one line on the race control port (fth.race), between the
// agent's injector and the host's gdbstub conductor. The agent asks Op
// "arm" (stop a vCPU at Addr) and later "release"; the host answers
// "armed", then "stopped" (the vCPU CPU stands at Addr and the others
// run), "missed" or "timeout", and to a release "released", or "error".
// Several vCPUs may be held at once (the INT3 window holds the patcher,
// then the task that trapped); a release lets CPU's go and keeps the
// others held.
type RaceMsg struct {
	Op   string `json:"op"`
	Addr uint64 `json:"addr,omitempty"`
	// Size is the instruction length at Addr (the breakpoint's kind).
	Size int `json:"size,omitempty"`
	CPU  int `json:"cpu"`
	// TimeoutMS bounds how long the host waits for the breakpoint.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// Insn is the instruction bytes at Addr (hex), with stopped.
	Insn string `json:"insn,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// CondAddr and CondWant make an arm's breakpoint conditional: a vCPU
	// that reaches Addr while the bytes at CondAddr are not CondWant
	// (hex) runs on and the wait goes on, as gdb's conditional
	// breakpoints do (the patcher stopped only in the batch that
	// patches the target's callsite).
	CondAddr uint64 `json:"cond_addr,omitempty"`
	CondWant string `json:"cond_want,omitempty"`
	// CondReg, when set, makes CondAddr an offset from that GDB
	// register's value at the stop: the condition is then on what a
	// register points at, such as the hash entry a lookup holds.
	CondReg *int `json:"cond_reg,omitempty"`
	// LookAddr asks the arm for LookLen bytes there read the moment the
	// vCPU stopped, answered in Seen with stopped: the callsite's bytes
	// while the patcher is held.
	LookAddr uint64 `json:"look_addr,omitempty"`
	LookLen  int    `json:"look_len,omitempty"`
	// Look2Addr and Look2Len are a trace's second place to read, its
	// bytes appended to the first's in Seen: ppc64le's callsite branch,
	// away from the out-of-line stub that holds its literal and bl.
	Look2Addr uint64 `json:"look2_addr,omitempty"`
	Look2Len  int    `json:"look2_len,omitempty"`
	Seen      string `json:"seen,omitempty"`
	// Then is an arm the host makes itself the moment this one holds its
	// vCPU, for an agent that runs on the vCPU it had held (the INT3
	// window's patcher): when Then's vCPU stops, or times out, the first
	// is released; Then's stays held HoldMS more. The host answers each
	// step as it happens: armed, stopped or timeout, released, released.
	// HoldMS on an arm with no Then has the host let its vCPU go that
	// long after the hold. Then's own Then, on the first's vCPU, is armed
	// HoldMS of Then's after the first was let go, in the same stop that
	// lets Then's vCPU go (answers: released for the first, released for
	// the second, armed, stopped or timeout, released): a writer that
	// waits for the held reader's CPU is stopped at its next step while
	// the reader runs.
	Then   *RaceMsg `json:"then,omitempty"`
	HoldMS int      `json:"hold_ms,omitempty"`
	// BoundMS on an arm with no Then and no HoldMS has the host let its
	// vCPU go itself that long after the hold if the agent has not: the
	// agent's CPU may be waiting on the held one (a kernel text write's
	// IPI), and then cannot send the release. The agent's late release
	// is answered with released and Late set.
	BoundMS int  `json:"bound_ms,omitempty"`
	Late    bool `json:"late,omitempty"`
	// PassOthers on an arm has the host step any other vCPU that reaches
	// Addr past it and wait on for CPU: another task of the agent's runs
	// through the same code on purpose (the fexit target's nap beside
	// the racer's). Without it such a stop is a miss.
	PassOthers bool `json:"pass_others,omitempty"`
	// PCs, on a Late release, are the program counters of the vCPUs that
	// were not held when the host let the held one go (vCPU number to
	// address; absent when unreadable): where the agent's CPU was
	// waiting.
	PCs map[int]uint64 `json:"pcs,omitempty"`
	// Addrs are a trace's breakpoints. A trace holds no vCPU: at every
	// stop there whose register CondReg lies in [CondAddr, CondEnd) the
	// host reads LookLen bytes at LookAddr and steps the vCPU on, until
	// the agent says untrace or TimeoutMS passes; the answer to untrace
	// carries every such stop in order (Stops). The literal target
	// traces the kernel's text writers, the register their address
	// argument: every write to one callsite, and the callsite as each
	// write found it.
	Addrs   []uint64 `json:"addrs,omitempty"`
	CondEnd uint64   `json:"cond_end,omitempty"`
	// Stops are a trace's stops, in order; Count is how many there were
	// (Stops keeps the first MaxTraceStops).
	Stops []TraceStop `json:"stops,omitempty"`
	Count int         `json:"count,omitempty"`
}

// TraceStop is one stop of a trace: where the vCPU stood, the traced
// register's value, and the bytes looked at before the vCPU went on.
type TraceStop struct {
	Addr uint64 `json:"addr"`
	CPU  int    `json:"cpu"`
	Reg  uint64 `json:"reg"`
	Seen string `json:"seen"`
}

// MaxTraceStops bounds the stops one untraced answer carries.
const MaxTraceStops = 256

// The race port's operations.
const (
	RaceArm      = "arm"
	RaceArmed    = "armed"
	RaceStopped  = "stopped"
	RaceMissed   = "missed"
	RaceTimeout  = "timeout"
	RaceRelease  = "release"
	RaceReleased = "released"
	RaceError    = "error"
	// RacePeek asks for the bytes at Addr (Size of them); the host
	// answers RacePeeked with Insn, or with Msg when they cannot be read.
	RacePeek   = "peek"
	RacePeeked = "peeked"
	// RaceTrace starts a trace (Addrs), answered RaceArmed; RaceUntrace
	// ends it, answered RaceUntraced with its Stops.
	RaceTrace    = "trace"
	RaceUntrace  = "untrace"
	RaceUntraced = "untraced"
)

// RacePortName is the virtio-serial port of the race control channel.
const RacePortName = "fth.race"
