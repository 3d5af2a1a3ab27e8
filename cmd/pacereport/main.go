// Command pacereport reads collypace audit trails and reports, per host, whether the crawl was polite:
// departures, gaps against the floor and every published constraint, Retry-After and rate-limit windows
// with any departure inside them, non-compliant events, breaker periods and deferred URLs.
//
//	go run ./cmd/pacereport [-html report.html] audit.jsonl [more.jsonl ...]
//
// Several trails (one per process of a fleet) are merged into one schedule per host. The report is
// Markdown on stdout. Malformed lines are skipped and listed, not fatal. Exit status (of the built
// binary; `go run` turns every non-zero status into 1):
//
//	0  no violation, and at least one departure checked
//	1  a violation (each named on stderr with host, time and URL)
//	2  bad usage, an unreadable file, or a trail without a departure (it proves nothing)
//
// -h prints the usage and exits 0, as every command of the repository does.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/collypace/ext/cmd/reporthtml"
	"github.com/collypace/ext/internal/auditreport"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK        = 0
	exitViolation = 1
	exitUnusable  = 2
)

// run is the command with its streams; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pacereport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	htmlPath := fs.String("html", "", "also write a self-contained HTML page with a timeline chart per host to this file")
	tolAbs := fs.Duration("tolerance", auditreport.DefaultTolerance.Abs, "a gap may fall short of a constraint by this much…")
	tolFrac := fs.Float64("tolerance-frac", auditreport.DefaultTolerance.Frac, "…or by this fraction of it, whichever is larger")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: pacereport [-html FILE] audit.jsonl [more.jsonl ...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) { // -h asks for the usage: not a failure
		return exitOK
	} else if err != nil {
		return exitUnusable
	}
	switch {
	case *tolAbs < 0:
		fmt.Fprintf(stderr, "pacereport: -tolerance %v: must not be negative\n", *tolAbs)
	case *tolFrac < 0 || *tolFrac >= 1:
		fmt.Fprintf(stderr, "pacereport: -tolerance-frac %v: must be in [0, 1)\n", *tolFrac)
	case fs.NArg() == 0:
	default:
		return report(fs.Args(), *htmlPath, auditreport.Tolerance{Abs: *tolAbs, Frac: *tolFrac}, stdout, stderr)
	}
	fs.Usage()
	return exitUnusable
}

// report checks the trails at paths and writes the report; it returns the exit status.
func report(paths []string, htmlPath string, tol auditreport.Tolerance, stdout, stderr io.Writer) int {
	trail, err := auditreport.Load(paths...)
	if err != nil {
		fmt.Fprintln(stderr, "pacereport:", err)
		return exitUnusable
	}
	rep := auditreport.Check(trail, tol)
	for _, w := range rep.Warnings {
		fmt.Fprintln(stderr, "pacereport: skipped", w)
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		fmt.Fprintln(stderr, "pacereport:", err)
		return exitUnusable
	}
	if htmlPath != "" {
		if err := writeHTML(rep, htmlPath); err != nil {
			fmt.Fprintln(stderr, "pacereport:", err)
			return exitUnusable
		}
	}
	if !rep.OK() {
		for _, v := range rep.Violations {
			fmt.Fprintln(stderr, "pacereport: violation:", v)
		}
		return exitViolation
	}
	if !rep.Proves() {
		fmt.Fprintf(stderr, "pacereport: %s: %d events read, %d line(s) skipped\n", auditreport.NoDepartures, rep.Events, len(rep.Warnings))
		return exitUnusable
	}
	return exitOK
}

func writeHTML(rep *auditreport.Report, path string) error {
	var buf bytes.Buffer
	if err := reporthtml.Write(&buf, rep); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
