package known

// ReproDir holds the standalone reproducers, relative to the repository:
// one directory each (named as docs/findings.md's finding, or its known
// ID), with run.sh, the modules it loads (a Makefile for make M=), and
// README. The harness runs one with scenario=standalone
// reproducer=<directory>: run.sh under the guest's shell, its modules
// built against the cell's kernel in GuestModuleDir, nothing else.
const ReproDir = "results/known/repro"

// GuestReproDir is where the guest image holds each reproducer's run.sh:
// <GuestReproDir>/<name>/run.sh.
const GuestReproDir = "/repro"

// GuestModuleDir is where the guest image holds the modules the harness
// built, reproducers' included; run.sh finds its modules through the
// MODDIR environment variable, which the agent sets to this.
const GuestModuleDir = "/lib/modules/fth"
