// Package junit writes a run's verdicts as JUnit XML, the format CI systems
// (GitHub test reporters, Jenkins, GitLab) show as a test list: one
// testsuite per run, one testcase per cell.
//
// The mapping: classname is the arch and name the cell, so a CI view groups
// cells by architecture; a fail verdict is a <failure> whose message is the
// title and whose body is the first finding's report, the lines a developer
// reads first; error is <error> (the harness could not judge), skip is
// <skipped>, and time is the cell's total wall time. Failed churn oracles
// and a board's reboots are appended to the message of a <failure> or an
// <error>, and detailed in its body, since a CI view shows only those.
package junit

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ftrace-harness/fth/internal/atomicfile"
	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

// Testsuites is the document root. It always holds one Testsuite; the
// wrapper is there because some readers accept only <testsuites>.
type Testsuites struct {
	// XMLName fixes the element name.
	XMLName xml.Name `xml:"testsuites"`
	// Name is the run id. The counts and Time repeat the one suite's, for
	// readers that look only at the root.
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     Seconds     `xml:"time,attr"`
	Suites   []Testsuite `xml:"testsuite"`
}

// Testsuite is one run.
type Testsuite struct {
	// Name is the run id; Tests counts the cells, and Failures, Errors and
	// Skipped the cells with each verdict. Time adds up the cells' times.
	Name     string  `xml:"name,attr"`
	Tests    int     `xml:"tests,attr"`
	Failures int     `xml:"failures,attr"`
	Errors   int     `xml:"errors,attr"`
	Skipped  int     `xml:"skipped,attr"`
	Time     Seconds `xml:"time,attr"`
	// Timestamp is when the first cell started, in the XSD's zone-less form.
	Timestamp string     `xml:"timestamp,attr,omitempty"`
	Cases     []Testcase `xml:"testcase"`
}

// Testcase is one cell.
type Testcase struct {
	// Classname is the arch, Name the cell, Time its total seconds.
	Classname string  `xml:"classname,attr"`
	Name      string  `xml:"name,attr"`
	Time      Seconds `xml:"time,attr"`
	// At most one of Failure (fail), Error (error, or unfinished) and
	// Skipped (skip) is set; none for pass.
	Failure *Problem `xml:"failure,omitempty"`
	Error   *Problem `xml:"error,omitempty"`
	Skipped *Skip    `xml:"skipped,omitempty"`
	// SystemOut carries the repro command of a cell that did not pass.
	SystemOut string `xml:"system-out,omitempty"`
}

// Problem is a <failure> or an <error>.
type Problem struct {
	// Message is the cell's title; Type the first finding's kind.
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	// Body is written as CDATA so a report keeps its lines in the file;
	// Write first replaces what XML cannot hold.
	Body string `xml:",cdata"`
}

// Skip is a <skipped>.
type Skip struct {
	// Message says why the arch or kernel cannot provide the cell.
	Message string `xml:"message,attr,omitempty"`
}

// Seconds formats as seconds with millisecond precision, as JUnit readers expect.
type Seconds float64

// MarshalXMLAttr implements xml.MarshalerAttr.
func (s Seconds) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	return xml.Attr{Name: name, Value: fmt.Sprintf("%.3f", float64(s))}, nil
}

// FromResults builds the document for a run from its cells' results, in the
// order given.
func FromResults(runID string, cells []results.Result) Testsuites {
	suite := Testsuite{Name: runID}
	var first time.Time
	for _, r := range cells {
		tc := Testcase{Classname: r.Arch, Name: r.Cell, Time: Seconds(r.Timings.TotalSeconds)}
		switch r.Verdict {
		case results.Pass:
		case results.Fail:
			h := r.Headline(false)
			p := &Problem{Message: h.Title, Body: r.Reason}
			if f := h.Finding; f != nil {
				p.Type, p.Body = string(f.Kind), f.Report
			}
			tc.Failure = withExtras(p, r)
			suite.Failures++
		case results.Skip:
			tc.Skipped = &Skip{Message: r.Reason}
			suite.Skipped++
		case results.Error:
			tc.Error = withExtras(&Problem{Message: r.Title(), Type: "error", Body: r.Reason}, r)
			suite.Errors++
		default:
			// A cell still "running" in a finished run lost its harness.
			tc.Error = withExtras(&Problem{Message: fmt.Sprintf("cell never finished: verdict %q", r.Verdict), Type: "unfinished", Body: r.Reason}, r)
			suite.Errors++
		}
		if r.Verdict != results.Pass && r.Verdict != results.Skip && r.Repro != "" {
			tc.SystemOut = "repro: " + r.Repro
		}
		suite.Tests++
		suite.Time += tc.Time
		suite.Cases = append(suite.Cases, tc)
		if !r.StartedAt.IsZero() && (first.IsZero() || r.StartedAt.Before(first)) {
			first = r.StartedAt
		}
	}
	if !first.IsZero() {
		suite.Timestamp = first.UTC().Format("2006-01-02T15:04:05")
	}
	return Testsuites{
		Name: runID, Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors,
		Skipped: suite.Skipped, Time: suite.Time, Suites: []Testsuite{suite},
	}
}

// maxChecks bounds the failed oracle checks listed in a body; the report
// and result.json have them all.
const maxChecks = 10

// withExtras appends the failed oracles and the board's reboots to p's
// message and body, and makes the body safe for XML. The title alone can
// hide both: a cell that failed on a console report names only that, and
// a reboot whose pstore record was parsed is titled by the record.
func withExtras(p *Problem, r results.Result) *Problem {
	oracles, checks := failedOracles(r.Oracles)
	board := boardTrouble(r.Board)
	msg := append([]string{p.Message}, oracles...)
	if len(oracles) == 0 && len(checks) > 0 {
		// The guest died before its summaries: the first check stands in.
		msg = append(msg, checks[0])
	}
	p.Message = strings.Join(append(msg, board...), "; ")
	body := []string{p.Body}
	if len(checks) > 0 {
		more := ""
		if len(checks) > maxChecks {
			more = fmt.Sprintf("\n  … and %d more", len(checks)-maxChecks)
			checks = checks[:maxChecks]
		}
		body = append(body, "failed oracle checks:\n  "+strings.Join(checks, "\n  ")+more)
	}
	if len(board) > 0 {
		body = append(body, "board: "+strings.Join(boardLines(r.Board), "\n  "))
	}
	p.Body = xmlText(strings.Join(slices.DeleteFunc(body, func(s string) bool { return s == "" }), "\n\n"))
	return p
}

// failedOracles describes the failed oracle summaries, and the failed
// single checks, one line each. A summary counts checks or has no
// function, as results.AddOracle keeps them.
func failedOracles(os []event.Oracle) (summaries, checks []string) {
	for _, o := range os {
		if o.OK || o.Skipped != "" {
			continue
		}
		name := string(o.Name)
		if o.Function != "" {
			name += " on " + o.Function
		}
		if o.Function == "" || o.Checks > 0 {
			summaries = append(summaries, fmt.Sprintf("oracle %s: %d of %d checks failed", name, o.Failures, o.Checks))
			continue
		}
		detail := o.Msg
		switch {
		case detail != "":
		case o.Name == event.OracleExact:
			detail = fmt.Sprintf("expected %d hits, got %d", o.Expected, o.Got)
		default:
			// func-ip compares addresses, which kallsyms prints in hex.
			detail = fmt.Sprintf("expected %#x, got %#x", o.Expected, o.Got)
		}
		checks = append(checks, fmt.Sprintf("oracle %s: %s", name, detail))
	}
	return summaries, checks
}

// boardTrouble says, for the message, whether the board rebooted or was
// lost during the soak.
func boardTrouble(b *results.Board) []string {
	if b == nil {
		return nil
	}
	var out []string
	if n := len(b.BootIDs) - 1; n > 0 {
		out = append(out, fmt.Sprintf("board %s rebooted %d× during the soak", b.Target, n))
	}
	for _, rc := range b.Reconnects {
		if !rc.Back {
			out = append(out, fmt.Sprintf("board %s unreachable after a lost connection at %.0f s", b.Target, rc.At))
		}
	}
	return out
}

// boardLines details the board's boots, lost connections and pstore
// records for the body.
func boardLines(b *results.Board) []string {
	out := []string{b.Target + " (" + strings.TrimSpace(b.Uname+" "+b.Release) + ")", "boot ids: " + strings.Join(b.BootIDs, " → ")}
	for _, rc := range b.Reconnects {
		line := fmt.Sprintf("connection lost at %.1f s: rebooted %v, back %v after %d tries, %.1f s", rc.At, rc.Rebooted, rc.Back, rc.Tries, rc.Waited)
		if rc.Err != "" {
			line += ": " + rc.Err
		}
		out = append(out, line)
	}
	if len(b.Pstore) > 0 {
		out = append(out, "pstore: "+strings.Join(b.Pstore, " "))
	}
	return out
}

// xmlText replaces what XML 1.0 cannot hold, even in CDATA (the escape
// sequences and NULs a serial console prints, invalid UTF-8), with U+FFFD.
// Attributes need no help: encoding/xml escapes those itself.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE || r == 0xFFFF, r == utf8.RuneError:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// Write writes doc as indented XML with its declaration.
func Write(w io.Writer, doc Testsuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: encode run %s: %w", doc.Name, err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// WriteFile writes doc to path atomically, so a CI step that reads it while
// a report is refreshed sees the old file or the new one.
func WriteFile(path string, doc Testsuites) error {
	var b bytes.Buffer
	if err := Write(&b, doc); err != nil {
		return err
	}
	if err := atomicfile.Write(path, b.Bytes()); err != nil {
		return fmt.Errorf("junit: write %s: %w", path, err)
	}
	return nil
}
