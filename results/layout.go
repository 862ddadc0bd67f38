package results

// The run directory's layout, out/runs/<run-id>/:
//
//	summary.json             every cell's verdict, rewritten after each cell
//	report.html, junit.xml   written at the end (fth report writes them again)
//	<cell>/console.log       the kernel log, line by line as it arrives
//	<cell>/events.jsonl      the agent's events, as they arrive
//	<cell>/result.json       rewritten atomically at every step
//	<cell>/registers.txt     a VM's vCPU registers and stack words, on a hang
//	<cell>/tasks.txt         a board's blocked tasks and agent stacks, on a hang
//	<cell>/pstore/, <cell>/prev-boot.log   what a rebooted board kept
//	<cell>/mail/             fth report --mail: report.txt and its attachments
//
// Writers and readers (the monitor, report, compare, repro) use these names
// and LoadRun; none spells a file name of its own.
const (
	SummaryFile = "summary.json"
	ReportFile  = "report.html"
	JUnitFile   = "junit.xml"
	// MutationFile is a mutation run's table (fth mutate).
	MutationFile = "mutation.json"
	// BisectFile is a bisection's record (fth bisect), BisectLog its
	// step-by-step log and BisectSummary the paragraph for a mail.
	BisectFile    = "bisect.json"
	BisectLog     = "bisect.log"
	BisectSummary = "bisect-summary.txt"
	ConsoleLog    = "console.log"
	EventsFile    = "events.jsonl"
	ResultFile    = "result.json"
	RegistersFile = "registers.txt"
	TasksFile     = "tasks.txt"
	PrevBootLog   = "prev-boot.log"
	PstoreDir     = "pstore"
)

// cellFiles are the files of a cell a report links, in that order.
func cellFiles() []string {
	return []string{ConsoleLog, EventsFile, ResultFile, RegistersFile, TasksFile, PrevBootLog}
}
