package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/fthtarget"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/stress/racer"
	"github.com/ftrace-harness/fth/wire/event"
	"github.com/ftrace-harness/fth/wire/options"
)

// The campaign is the churn scenario with a race stage between the churn
// and the background's detach sample (executeChurn runs both): storm,
// churn, race, detach, in one boot and one verdict. Each stage starts with
// a stage event, so that the host can name the stage a finding came in.

// modeRaceStage is `agent racestage <held-cpu> <agent flags>`: the
// campaign's race stage, run as a child of the agent. It is racectl
// without the end of a run: its events go to its stdout, which is the
// agent's event channel (a virtio port opens once), it emits no done and
// never powers off, and it writes its outcome counts as JSON to fd 3.
const modeRaceStage = "racestage"

// stage announces the start of a campaign stage; skipped says why it does
// not run. Other scenarios have no stages.
func (a *agent) stage(name, skipped string) {
	if a.opts.Scenario != options.ScenarioCampaign {
		return
	}
	if skipped != "" {
		emit.Logf(a.w, "campaign: stage %s skipped: %s", name, skipped)
	} else {
		emit.Logf(a.w, "campaign: stage %s", name)
	}
	_ = a.w.Emit(event.Event{Kind: event.KindStage, Stage: &event.Stage{Name: name, Skipped: skipped}})
}

// churnBudget is how long the campaign's churn runs: the churn option,
// cut so that the race keeps its reserve of the budget.
func churnBudget(o options.Options) time.Duration {
	if o.Budget == 0 {
		return o.Churn
	}
	left := max(o.Budget-options.CampaignRaceReserve, 0)
	if o.Churn == 0 || o.Churn > left {
		return left
	}
	return o.Churn
}

// raceStageBudget is the race stage's share of o's budget once the churn
// has run for ran: what is left, and never less than the share the churn
// was cut to leave it. The churn runs past its own budget to finish the
// delivery opening (options.DeliveryOpeningGrace), on a slow machine by
// 54 s, which left the race one injection per target (2026-11-28): the
// overrun lengthens the campaign rather than cut the stage that catches
// the race classes. 0: no bound; a bounded campaign's race always gets
// more than 0 (the reserve, or all of a budget smaller than it), which
// the race scenario would read as no bound.
func raceStageBudget(o options.Options, ran time.Duration) time.Duration {
	if o.Budget == 0 {
		return 0
	}
	return max(o.Budget-ran, o.Budget-churnBudget(o))
}

// raceStage runs the campaign's race stage with left as its budget (0: no
// bound; raceStageBudget never gives 0 to a bounded campaign), with
// the background still attached and the hammer stopped: the preemptor
// must be the only real-time task on the held CPU.
func (a *agent) raceStage(ctx context.Context, left time.Duration) error {
	if a.sys.numCPU < 2 {
		a.stage(event.StageRace, fmt.Sprintf("needs 2 CPUs (one held, one racing), have %d", a.sys.numCPU))
		return nil
	}
	if _, err := emit.FindPort(a.sys.virtioDir, event.RacePortName); err != nil {
		a.stage(event.StageRace, fmt.Sprintf("no %s port: the host did not boot the VM for injection (%v)", event.RacePortName, err))
		return nil
	}
	a.stage(event.StageRace, "")
	// The race loads fth_target without its kthreads, so that the racer
	// is the target's only caller; the churn may have left it loaded.
	if modload.Loaded(fthtarget.Module) {
		if err := modload.Unload(fthtarget.Module); err != nil {
			return fmt.Errorf("race stage: unload %s left by the churn: %w", fthtarget.Module, err)
		}
	}
	held := a.sys.numCPU - 1
	o := raceStageOptions(a.opts, left)
	argv := []string{strconv.Itoa(held)}
	for k, v := range o.Args() {
		argv = append(argv, "-"+k+"="+v)
	}
	// The agent's own address space has run on the held CPU (the hammer,
	// the churn): on riscv64 a TLB flush of it waits for every CPU it
	// ever ran on, the held one included, and would freeze this CPU
	// until the release that only the stage can ask for. Nothing of ours
	// unmaps memory while the stage runs: no collection, nothing left to
	// return.
	// The image watch's goroutine would run beside the stage, on any
	// CPU: it stops here (the stage finds its own images).
	if a.stopImages != nil {
		a.stopImages()
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	debug.FreeOSMemory()
	var err error
	a.race, err = a.startRaceStage(ctx, held, argv)
	emit.Logf(a.w, "campaign: race stage outcomes %v", a.race)
	return err
}

// raceStageOptions are the race stage's options: the campaign's, as the
// race scenario with left as its budget, never powering off, and without
// what stays the campaign's (the multihold population is held by the
// campaign's process, not the stage's).
func raceStageOptions(o options.Options, left time.Duration) options.Options {
	o.Scenario, o.Poweroff, o.Budget, o.MultiHold = options.ScenarioRace, false, left, 0
	return o
}

// startRaceStage runs `agent racestage` from a thread kept off the held
// CPU, so that the child's new address space never runs there but as the
// racer and preemptor pin it, and returns its outcome counts.
func (a *agent) startRaceStage(ctx context.Context, held int, args []string) (map[string]int, error) {
	cmd, err := racer.Command(ctx, modeRaceStage, args...)
	if err != nil {
		return nil, err
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer resR.Close()
	cmd.Env = append(os.Environ(), "FTH_NO_CMDLINE=1")
	cmd.Stdout, cmd.Stderr = a.events, a.sys.stderr
	cmd.ExtraFiles = []*os.File{resW}

	runtime.LockOSThread()
	rest := below(held)
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	if err := unix.SchedSetaffinity(0, &rest); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("race stage: keep cpu %d free: %w", held, err)
	}
	err = cmd.Start()
	_ = unix.SchedSetaffinity(0, &was)
	runtime.UnlockOSThread()
	resW.Close()
	if err != nil {
		return nil, fmt.Errorf("race stage: start: %w", err)
	}
	b, _ := io.ReadAll(resR)
	werr := cmd.Wait()
	var res raceStageResult
	if jerr := json.Unmarshal(b, &res); jerr != nil {
		return nil, fmt.Errorf("race stage: no outcome (%v): %w", jerr, errors.Join(werr, errors.New("the stage ended without a result")))
	}
	if res.Err != "" {
		if res.Unjudged {
			return res.Outcomes, emit.Unjudged(errors.New("race stage: " + res.Err))
		}
		return res.Outcomes, errors.New("race stage: " + res.Err)
	}
	return res.Outcomes, nil
}

// raceStageResult is what `agent racestage` writes to fd 3.
type raceStageResult struct {
	Outcomes map[string]int `json:"outcomes"`
	Err      string         `json:"error,omitempty"`
	Unjudged bool           `json:"unjudged,omitempty"`
}

// raceStageMain is `agent racestage <held-cpu> <agent flags>`.
func raceStageMain(ctx context.Context, args []string, sys system) error {
	held, opts, err, argErr := raceArgs(modeRaceStage, args, sys)
	if argErr != nil {
		return argErr
	}
	res := os.NewFile(3, "result")
	if res == nil {
		return errors.New("agent racestage: no result descriptor (fd 3)")
	}
	defer res.Close()
	a := &agent{sys: sys, opts: opts, w: emit.NewWriter(sys.stdout), inCampaign: true}
	if opts.Budget > 0 {
		a.raceUntil = time.Now().Add(opts.Budget)
	}
	if err == nil {
		err = a.controlRace(ctx, held)
	}
	out := raceStageResult{Outcomes: a.race}
	if err != nil {
		var u *emit.UnjudgedError
		out.Err, out.Unjudged = err.Error(), errors.As(err, &u)
	}
	b, _ := json.Marshal(out)
	_, werr := res.Write(b)
	return errors.Join(err, werr)
}
