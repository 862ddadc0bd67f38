package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftrace-harness/fth/harness/machine/ssh"
	"github.com/ftrace-harness/fth/harness/soak"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

func cmdSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("soak")
	var b buildFlags
	b.register(fs, 0)
	var (
		target     = fs.String("target", "", "the board: ssh://user@host[:port] (required)")
		duration   = fs.Duration("duration", 8*time.Hour, "how long the stress runs, across reboots with --resume")
		scenario   = fs.String("scenario", "churn", "agent scenario: churn, storm or bench (race needs a VM)")
		knownHosts = fs.String("known-hosts", "", "comma-separated known_hosts files (default ~/.ssh/known_hosts)")
		identity   = fs.String("i", "", "comma-separated identity files (default: ssh-agent, then ~/.ssh/id_ed25519, id_ecdsa, id_rsa)")
		insecure   = fs.Bool("insecure-host-key", false, "accept any host key (logged as a warning on every connection); never the default")
		resume     = fs.Bool("resume", false, "after a reboot, redeploy and go on until --duration is used up")
		crashAfter = fs.Duration("crash-after", 0, "test hook: panic the board with sysrq-c this long into the soak")
		silence    = fs.Duration("silence", 2*time.Minute, "heartbeat deadline: no agent output this long, with the connection up, is a hang")
		scale      = fs.Float64("timeout-scale", 1, "multiply every wait of the soak (silence, hang tail, graces): a board emulated under TCG (fth boardvm) runs slower, as its arch's cells do")
		tries      = fs.Int("reconnect-tries", 40, "how many times to redial a board that dropped the connection (backoff 2s doubling to 30s)")
		remoteDir  = fs.String("remote-dir", "/tmp", "where the agent is copied on the board")
		out        = fs.String("out", "out/runs", "directory for run results")
		runID      = fs.String("run-id", "", "run id (default: soak- plus a time stamp)")
		agentArgs  multiFlag
	)
	fs.Var(&agentArgs, "agent-arg", "extra agent option key=value (repeatable)")
	if err := parseFlags(fs, args, stdout, help{
		Usage: "fth soak --target ssh://user@host[:port] [flags]",
		About: "Runs a scenario for hours on a board over SSH: deploys the agent built for the\nboard's arch, streams its kernel log into the same crash detection as a VM,\nsurvives network blips, records reboots with what pstore kept, and with\n--resume goes on in the new boot. The board runs its own kernel: there is no\nbuild, so no --arch or --fragments.",
		Refused: map[string]string{
			"arch":       "the board's uname -m picks the arch",
			"fragments":  "the board runs its own kernel; fth checks its config for what the scenario needs",
			"kernel-src": "the board runs its own kernel",
		},
	}); err != nil {
		return err
	}
	if *target == "" {
		return fmt.Errorf("%w: --target ssh://user@host[:port] is required", errUsage)
	}
	addr, err := ssh.ParseAddr(*target)
	if err != nil {
		return fmt.Errorf("%w: --target: %v", errUsage, err)
	}
	if err := checkPositive("duration", *duration, false); err != nil {
		return err
	}
	if *scale <= 0 {
		return fmt.Errorf("%w: --timeout-scale %v: want a factor > 0, e.g. 3", errUsage, *scale)
	}
	if err := checkPositive("silence", *silence, false); err != nil {
		return err
	}
	if err := checkPositive("crash-after", *crashAfter, true); err != nil {
		return err
	}
	if *tries < 1 {
		return fmt.Errorf("%w: --reconnect-tries %d: want 1 or more", errUsage, *tries)
	}
	sc, err := event.ParseScenario(*scenario)
	if err != nil {
		return fmt.Errorf("%w: --scenario: %v", errUsage, err)
	}
	agent := map[string]string{"scenario": string(sc)}
	if err := agentArgs.into(agent); err != nil {
		return err
	}
	agentOpts, err := checkAgentArgs(agent, map[string]string{"scenario": "--scenario"})
	if err != nil {
		return err
	}
	if agentOpts.Options().Scenario == event.ScenarioRace {
		return fmt.Errorf("%w: scenario race: it stops a vCPU at an instruction through QEMU's gdbstub, which a board does not have: run it in a VM (fth run --agent-arg scenario=race)", errUsage)
	}
	_, repo, _, err := b.resolve()
	if err != nil {
		return err
	}
	log := newLogger(stderr, b.verbose)
	if *insecure {
		log.Warn("--insecure-host-key: the board's identity will NOT be verified")
	}
	if *runID == "" {
		*runID = "soak-" + newRunID()
	}
	cellName := "board-" + strings.NewReplacer(":", "_", "[", "", "]", "").Replace(addr.Host) + fmt.Sprintf("-%d", addr.Port)
	runDir := filepath.Join(*out, *runID)
	w, err := results.NewCellWriter(filepath.Join(runDir, cellName), results.Result{
		RunID: *runID, Cell: cellName, Scenario: sc, StartedAt: time.Now().UTC(),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "soak of %s for %s: results in %s\n", addr, *duration, w.Dir)
	cfg := soak.Config{
		SSH: ssh.Config{
			Addr:     addr,
			HostKeys: ssh.HostKeys{KnownHosts: splitList(*knownHosts), Insecure: *insecure, Log: log},
			Auth:     ssh.Auth{IdentityFiles: splitList(*identity)},
			Log:      log,
		},
		Duration: *duration, Agent: agentOpts, Resume: *resume, CrashAfter: *crashAfter, Silence: *silence, TimeoutScale: *scale,
		Backoff:   ssh.Backoff{Tries: *tries},
		ModuleDir: repo, CacheDir: b.cache, RemoteDir: *remoteDir, Log: log,
	}
	if err := soak.Run(ctx, w, cfg); err != nil {
		_ = w.Update(func(r *results.Result) {
			r.Verdict, r.Reason = results.Error, err.Error()
			r.EndedAt = time.Now().UTC()
		})
		return err
	}
	r := w.Result()
	sum := results.Summary{RunID: *runID, At: time.Now().UTC(), Cells: []results.CellSummary{results.Summarize(r, w.Dir)}}
	if err := results.WriteSummary(runDir, sum); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	results.PrintTable(stdout, sum)
	if r.Board != nil {
		fmt.Fprintf(stdout, "\nboard: %s %s, deploys %v s, reconnects %d, boot_ids %d\n", r.Board.Uname, r.Board.Release, r.Board.DeploySeconds, len(r.Board.Reconnects), len(r.Board.BootIDs))
	}
	fmt.Fprintf(stdout, "results: %s\n", w.Dir)
	return verdictsErr([]cellVerdict{{cell: cellName, verdict: r.Verdict, reason: r.Reason}})
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
