package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/results/mail"
	"github.com/ftrace-harness/fth/results/report"
)

func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report")
	vmlinux := fs.String("vmlinux", "auto", "symbolize stacks: auto (each cell's kernel.vmlinux when it is on this machine), none, or a vmlinux path")
	markdown := fs.String("markdown", "", "also append the summary table as Markdown to this file (e.g. \"$GITHUB_STEP_SUMMARY\"), - for stdout")
	excerpt := fs.Int("excerpt", 40, "lines per log excerpt")
	asMail := fs.Bool("mail", false, "write the plain-text report of one failed cell for a mailing list instead (the positional argument is the cell's directory): <cell>/mail/report.txt and its attachments")
	bisectDir := fs.String("bisect", "", "with --mail: a bisection's run directory, whose result the report gives")
	if err := parseFlags(fs, args, stdout, help{
		Usage:      "fth report [flags] <run-dir>\n       fth report --mail [--bisect <bisect-run-dir>] <run-dir>/<cell>",
		Positional: true,
		About:      "Writes report.html (verdict heatmap, findings with stacks and log excerpts,\nlatency plots; one self-contained file), junit.xml and a summary.json rebuilt\nfrom the cells into out/runs/<run-id>. It reports; it does not judge: the exit\ncode is 0 whatever the verdicts.\n\nWith --mail, writes the report of one failed cell that a kernel maintainer\nexpects: subject, kernel, config, the kernel's report with its stack decoded,\nhow to reproduce (the standalone reproducer when the finding has one), the\nbisection, the fix; into <cell>/mail/ with its attachments, and prints it.",
	}); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		if *asMail {
			return fmt.Errorf("%w: report --mail takes one cell directory (out/runs/<run-id>/<cell>)", errUsage)
		}
		return fmt.Errorf("%w: report takes one run directory (out/runs/<run-id>)", errUsage)
	}
	if *bisectDir != "" && !*asMail {
		return fmt.Errorf("%w: --bisect goes with --mail", errUsage)
	}
	if *asMail {
		vm := ""
		if *vmlinux != "auto" && *vmlinux != "none" {
			vm = *vmlinux
		}
		return writeMail(ctx, fs.Arg(0), vm, *bisectDir, stdout)
	}
	if *excerpt < 1 {
		return fmt.Errorf("%w: --excerpt %d: want 1 or more lines", errUsage, *excerpt)
	}
	opts := report.Options{ExcerptLines: *excerpt}
	switch *vmlinux {
	case "auto":
		opts.AutoVmlinux = true
	case "none", "":
	default:
		opts.Vmlinux = *vmlinux
	}
	run, written, err := report.Write(ctx, fs.Arg(0), opts)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	results.PrintTable(stdout, run.Summary())
	fmt.Fprintf(stdout, "\nreport:  %s\njunit:   %s\nsummary: %s\n", written.Report, written.JUnit, written.Summary)
	if *markdown != "" {
		return appendMarkdown(*markdown, run, stdout)
	}
	return nil
}

// appendMarkdown appends, because GitHub's step summary file collects every
// step's output.
func appendMarkdown(path string, run *results.Run, stdout io.Writer) error {
	if path == "-" {
		return report.WriteMarkdown(stdout, run)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("report --markdown: %w", err)
	}
	if err := report.WriteMarkdown(f, run); err != nil {
		f.Close()
		return fmt.Errorf("report --markdown %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report --markdown %s: %w", path, err)
	}
	return nil
}

// writeRunReport writes report.html and junit.xml for a finished run. A
// report that cannot be written is logged, not fatal: the verdicts and the
// per-cell files are already on disk.
func writeRunReport(ctx context.Context, log *slog.Logger, runDir string, stdout io.Writer) {
	_, written, err := report.Write(ctx, runDir, report.Options{AutoVmlinux: true})
	if err != nil {
		log.Warn("run report not written", "dir", runDir, "err", err)
		return
	}
	fmt.Fprintf(stdout, "report:  %s\njunit:   %s\n", written.Report, written.JUnit)
}

// writeMail writes the mail report of one cell into <cell>/mail and
// prints it.
func writeMail(ctx context.Context, cellDir, vmlinux, bisectDir string, stdout io.Writer) error {
	if _, err := os.Stat(filepath.Join(cellDir, results.ResultFile)); err != nil {
		return fmt.Errorf("%w: report --mail %s: not a cell directory (no %s): give out/runs/<run-id>/<cell>", errUsage, cellDir, results.ResultFile)
	}
	repo, _ := findRepo()
	rep, path, err := mail.WriteCell(ctx, cellDir, mail.Options{Repo: repo, Vmlinux: vmlinux, Bisect: bisectDir})
	if err != nil {
		return fmt.Errorf("report --mail: %w", err)
	}
	if err := mail.Write(stdout, rep); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwritten: %s (attachments beside it)\n", path)
	return nil
}
