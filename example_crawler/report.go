package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/collypace/ext/cmd/reporthtml"
	"github.com/collypace/ext/internal/auditreport"
)

// reportPath is where the HTML report of the audit trail at auditPath goes: beside it, audit.jsonl →
// audit.html.
func reportPath(auditPath string) string {
	base := strings.TrimSuffix(auditPath, filepath.Ext(auditPath))
	if base+".html" == auditPath {
		return auditPath + ".report.html"
	}
	return base + ".html"
}

// writeReport checks the audit trail as cmd/pacereport does, prints the report's summary and writes
// its HTML page beside the trail. Hosts are named as in the crawl's tables (the demo's hosts by their
// character, beside their 127.0.0.1 ports).
func writeReport(out io.Writer, auditPath string, targets []target) {
	_, _ = fmt.Fprintln(out)
	trail, err := auditreport.Load(auditPath)
	if err != nil {
		_, _ = fmt.Fprintf(out, "pace report: %v\n", err)
		return
	}
	rep := auditreport.Check(trail, auditreport.DefaultTolerance)
	names := make(map[string]string, len(targets))
	for _, t := range targets {
		names[t.key] = t.name
	}
	rep.NameHosts(names)
	_ = rep.WriteSummary(out)
	var page bytes.Buffer
	path := reportPath(auditPath)
	err = reporthtml.Write(&page, rep)
	if err == nil {
		err = os.WriteFile(path, page.Bytes(), 0o644)
	}
	if err != nil {
		_, _ = fmt.Fprintf(out, "pace report page: %v\n", err)
		return
	}
	_, _ = fmt.Fprintf(out, "charts: %s; the full report: go run ./cmd/pacereport %s\n", path, auditPath)
}
