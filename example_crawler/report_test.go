package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPaceReportNamesDemoHosts: the demo's pace report once named its hosts by port only. The summary and the HTML page name each host by its key and, beside it, the name the
// crawl's tables use.
func TestPaceReportNamesDemoHosts(t *testing.T) {
	dir := t.TempDir()
	trail := filepath.Join(dir, "audit.jsonl")
	dep := func(ts, path string) string {
		return `{"timestamp":"2026-12-02T12:00:0` + ts + `Z","pipeline_id":"p","target_domain":"127.0.0.1:4321","event":"delay_applied","trigger":"base",` +
			`"base_delay_ms":300,"computed_delay_ms":300,"jitter_ms":0,"compliance_flag":true,"status_code":0,"schema":2,` +
			`"url":"http://127.0.0.1:4321` + path + `","wait_ms":0,"interval_ms":300,"crawl_delay_ms":0,"rate_limit_interval_ms":0}` + "\n"
	}
	if err := os.WriteFile(trail, []byte(dep("0", "/a")+dep("1", "/b")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	writeReport(&out, trail, []target{{name: "capacity", key: "127.0.0.1:4321"}})
	const want = "127.0.0.1:4321 (capacity)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary does not name the host %q:\n%s", want, out.String())
	}
	page, err := os.ReadFile(reportPath(trail))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<h2>"+want+"</h2>") {
		t.Errorf("the HTML page does not title the host's chart %q", want)
	}
}
