package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	dep1   = `{"timestamp":"2026-12-02T12:00:00Z","pipeline_id":"p","target_domain":"shop.example","event":"delay_applied","trigger":"base","base_delay_ms":1000,"computed_delay_ms":1000,"jitter_ms":0,"compliance_flag":true,"status_code":0,"schema":2,"url":"https://shop.example/a","wait_ms":0,"interval_ms":1000,"crawl_delay_ms":0,"rate_limit_interval_ms":0}`
	hold   = `{"timestamp":"2026-12-02T12:00:00.5Z","pipeline_id":"p","target_domain":"shop.example","event":"retry_after_honoured","trigger":"retry_after","base_delay_ms":1000,"computed_delay_ms":4500,"jitter_ms":0,"compliance_flag":true,"status_code":429,"schema":2,"window_start":"2026-12-02T12:00:00.5Z","window_end":"2026-12-02T12:00:05Z"}`
	depOK  = `{"timestamp":"2026-12-02T12:00:05Z","pipeline_id":"p","target_domain":"shop.example","event":"delay_applied","trigger":"retry_after","base_delay_ms":1000,"computed_delay_ms":1000,"jitter_ms":0,"compliance_flag":true,"status_code":0,"schema":2,"url":"https://shop.example/b","wait_ms":4000,"interval_ms":1000,"crawl_delay_ms":0,"rate_limit_interval_ms":0}`
	depBad = `{"timestamp":"2026-12-02T12:00:03Z","pipeline_id":"q","target_domain":"shop.example","event":"delay_applied","trigger":"base","base_delay_ms":1000,"computed_delay_ms":1000,"jitter_ms":0,"compliance_flag":true,"status_code":0,"schema":2,"url":"https://shop.example/early","wait_ms":0,"interval_ms":1000,"crawl_delay_ms":0,"rate_limit_interval_ms":0}`
)

func write(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitStatus(t *testing.T) {
	clean := write(t, "a.jsonl", dep1, hold, depOK)
	other := write(t, "b.jsonl", depBad) // a second process entering the first one's window
	page := filepath.Join(t.TempDir(), "report.html")
	for _, tc := range []struct {
		args   []string
		status int
		stdout string
		stderr string
	}{
		{[]string{clean}, 0, "No violation", ""},
		{[]string{"-html", page, clean, other}, 1, "1 violation(s)", "shop.example at 2026-12-02T12:00:03.000Z: https://shop.example/early: inside the retry_after_honoured window"},
		{[]string{}, 2, "", "usage"},
		{[]string{filepath.Join(t.TempDir(), "missing.jsonl")}, 2, "", "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		status := run(tc.args, &stdout, &stderr)
		if status != tc.status || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: status %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, status, tc.status, stdout.String(), stderr.String())
		}
	}
	if b, err := os.ReadFile(page); err != nil || !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("-html: %v", err)
	}
}
