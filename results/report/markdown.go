package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/ftrace-harness/fth/results"
)

// verdictMark is the immutable table of verdict symbols for Markdown, where
// a table cell cannot be coloured.
var verdictMark = map[results.Verdict]string{
	results.Pass: "✅", results.Fail: "❌", results.Error: "⚠️", results.Skip: "⏭️", results.Running: "⏳",
}

// WriteMarkdown writes the run's summary table as GitHub-flavoured Markdown,
// for $GITHUB_STEP_SUMMARY and pull-request comments.
func WriteMarkdown(w io.Writer, run *results.Run) error {
	counts := map[results.Verdict]int{}
	for _, c := range run.Cells {
		counts[c.Result.Verdict]++
	}
	var parts []string
	for _, v := range verdictOrder {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### fth run `%s`: %s\n\n", run.ID, strings.Join(parts, ", "))
	b.WriteString("| cell | verdict | attached | attach p50/p99 ms | detach p50 ms | time | title |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|---|\n")
	for _, c := range run.Cells {
		s := results.Summarize(c.Result, c.Dir)
		fmt.Fprintf(&b, "| %s | %s %s | %d | %.1f / %.1f | %.1f | %.0f s | %s |\n",
			mdEscape(s.Cell), verdictMark[s.Verdict], s.Verdict, s.Attached, s.AttachMedianMS, s.AttachP99MS, s.DetachMedianMS, s.TotalSeconds, mdEscape(s.Title))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps a title from breaking the table: pipes split cells and
// newlines end rows.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", "", "<", "&lt;", ">", "&gt;").Replace(s)
}
