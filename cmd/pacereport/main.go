// Command pacereport reads collypace audit trails and reports, per host, whether the crawl was polite:
// departures, gaps against the floor and every published constraint, Retry-After and rate-limit windows
// with any departure inside them, non-compliant events, breaker periods and deferred URLs.
//
//	go run ./cmd/pacereport [-html report.html] audit.jsonl [more.jsonl ...]
//
// Several trails (one per process of a fleet) are merged into one schedule per host. The report is
// Markdown on stdout. Exit status: 0 no violation, 1 a violation (each named on stderr with host, time
// and URL), 2 bad usage or an unreadable file. Malformed lines are skipped and listed, not fatal.
package main

import (
	"bytes"
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *tolAbs < 0 || *tolFrac < 0 || *tolFrac >= 1 {
		fs.Usage()
		return 2
	}
	trail, err := auditreport.Load(fs.Args()...)
	if err != nil {
		fmt.Fprintln(stderr, "pacereport:", err)
		return 2
	}
	rep := auditreport.Check(trail, auditreport.Tolerance{Abs: *tolAbs, Frac: *tolFrac})
	for _, w := range rep.Warnings {
		fmt.Fprintln(stderr, "pacereport: skipped", w)
	}
	if err := rep.WriteMarkdown(stdout); err != nil {
		fmt.Fprintln(stderr, "pacereport:", err)
		return 2
	}
	if *htmlPath != "" {
		if err := writeHTML(rep, *htmlPath); err != nil {
			fmt.Fprintln(stderr, "pacereport:", err)
			return 2
		}
	}
	if !rep.OK() {
		for _, v := range rep.Violations {
			fmt.Fprintln(stderr, "pacereport: violation:", v)
		}
		return 1
	}
	return 0
}

func writeHTML(rep *auditreport.Report, path string) error {
	var buf bytes.Buffer
	if err := reporthtml.Write(&buf, rep); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
