package event

// KindStage marks the start of one stage of the campaign scenario, so that
// the host can say which stage a finding came in and how long each took.
const KindStage Kind = "stage"

// The campaign's stages, in the order it runs them in one boot.
const (
	// StageStorm loads and attaches the background trampolines (the
	// storm's n), timed as the storm's load and attach phases.
	StageStorm = "storm"
	// StageChurn drives the hot set through callsite states, with every
	// oracle, on top of the live background.
	StageChurn = "churn"
	// StageRace injects preemptions at exact instructions through the
	// host's gdbstub, the background still attached.
	StageRace = "race"
	// StageDetach detaches the timed sample of the background.
	StageDetach = "detach"
)

// Stages lists the campaign's stages in their order.
func Stages() []string { return []string{StageStorm, StageChurn, StageRace, StageDetach} }

// Stage is KindStage's payload.
type Stage struct {
	Name string `json:"name"`
	// Skipped says why the stage does not run (the arch cannot inject,
	// the budget is spent); the next stage follows at once.
	Skipped string `json:"skipped,omitempty"`
}
