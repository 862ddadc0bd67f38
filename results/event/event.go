// Package event is the wire format between the guest agent and the host: one
// JSON object per line on the agent's virtio-serial port (or its SSH channel).
//
// The guest reports what it saw; it never decides a cell's verdict alone. The
// host combines these events with console findings and liveness.
package event

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kind names what an Event carries. Exactly one payload field matching the Kind
// is set.
type Kind string

const (
	// KindHello is the first event: the agent runs and the channel works.
	KindHello Kind = "hello"
	// KindInventory reports which functions can be traced.
	KindInventory Kind = "inventory"
	// KindProgress reports progress through a long phase.
	KindProgress Kind = "progress"
	// KindFailure reports one failed operation with its true errno.
	KindFailure Kind = "failure"
	// KindPhase summarises a finished phase (attach, detach) with timings.
	KindPhase Kind = "phase"
	// KindLiveness reports hammer-thread progress.
	KindLiveness Kind = "liveness"
	// KindLog is free text for humans.
	KindLog Kind = "log"
	// KindDone is the last event: the agent's own view of the run.
	KindDone Kind = "done"
)

// Event is one line on the agent channel.
type Event struct {
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`

	Hello     *Hello     `json:"hello,omitempty"`
	Inventory *Inventory `json:"inventory,omitempty"`
	Progress  *Progress  `json:"progress,omitempty"`
	Failure   *Failure   `json:"failure,omitempty"`
	Phase     *Phase     `json:"phase,omitempty"`
	Liveness  *Liveness  `json:"liveness,omitempty"`
	Log       string     `json:"log,omitempty"`
	Done      *Done      `json:"done,omitempty"`
}

// Hello describes the guest as the agent found it.
type Hello struct {
	KernelRelease string `json:"kernel_release"`
	CPUs          int    `json:"cpus"`
	// PreemptModel is read from /sys/kernel/debug/sched/preempt, e.g. "full".
	PreemptModel string `json:"preempt_model,omitempty"`
	// Args are the agent options in effect, as key=value.
	Args map[string]string `json:"args,omitempty"`
}

// Inventory counts the functions that could be traced.
type Inventory struct {
	// Traceable is the number of entries in available_filter_functions.
	Traceable int `json:"traceable"`
	// WithBTF is how many of those have a BTF FUNC in vmlinux.
	WithBTF int `json:"with_btf"`
	// Candidates is how many passed every filter (BTF, deny list, signature).
	Candidates int `json:"candidates"`
	// Selected is how many the agent will try to attach.
	Selected int `json:"selected"`
}

// Progress reports Done out of Total for Phase.
type Progress struct {
	Phase string `json:"phase"`
	Done  int    `json:"done"`
	Total int    `json:"total"`
}

// Failure is one failed operation.
type Failure struct {
	Phase    string `json:"phase"`
	Function string `json:"function"`
	// Errno is the kernel's errno name (e.g. "EINVAL", "ENOTSUPP"), taken from
	// the syscall that failed, not from a library's fallback path.
	Errno string `json:"errno,omitempty"`
	Msg   string `json:"msg"`
}

// Phase summarises one finished phase.
type Phase struct {
	Name      string         `json:"name"`
	Attempted int            `json:"attempted"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Errnos    map[string]int `json:"errnos,omitempty"`
	Latency   Latency        `json:"latency"`
	Wall      Duration       `json:"wall"`
}

// Latency is a distribution of per-operation times.
type Latency struct {
	Count  int      `json:"count"`
	Min    Duration `json:"min"`
	Median Duration `json:"median"`
	P90    Duration `json:"p90"`
	P99    Duration `json:"p99"`
	Max    Duration `json:"max"`
}

// Liveness reports whether every hammer thread made progress.
type Liveness struct {
	Threads int `json:"threads"`
	// Iterations is the total loop count across threads since the last report.
	Iterations uint64 `json:"iterations"`
	// Stalled lists threads that made no progress for longer than the bound,
	// with their kernel stack where readable.
	Stalled []StalledThread `json:"stalled,omitempty"`
}

// StalledThread is a hammer thread that stopped making progress.
type StalledThread struct {
	TID   int      `json:"tid"`
	For   Duration `json:"for"`
	Stack string   `json:"stack,omitempty"`
}

// Done is the agent's summary. OK false means the agent saw something wrong
// (an oracle failed, a phase could not run); Reason says what.
type Done struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Duration is a time.Duration that marshals as fractional milliseconds, which
// is what a reader of result files wants to see.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want milliseconds as a number: %w", err)
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }
