package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
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
		{[]string{"-h"}, 0, "", "usage: pacereport"},
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

// TestBinaryExitStatus: the exit statuses of the built binary (`go run`
// turns every failure into 1): a trail that proves nothing (empty, garbage, no departure) and bad usage
// exit 2, a violation (a bypass) 1, a clean trail 0.
func TestBinaryExitStatus(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pacereport")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bypass := `{"timestamp":"2026-12-02T12:00:01Z","pipeline_id":"p","target_domain":"shop.example","event":"pacing_bypassed","trigger":"transport","base_delay_ms":1000,"computed_delay_ms":0,"jitter_ms":0,"compliance_flag":true,"status_code":200,"schema":2,"detail":"transport replaced"}`
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"clean", []string{write(t, "clean.jsonl", dep1, hold, depOK)}, exitOK, ""},
		{"bypass", []string{write(t, "bypass.jsonl", dep1, bypass)}, exitViolation, "pacing_bypassed"},
		{"empty", []string{write(t, "empty.jsonl")}, exitUnusable, "No departure in the trail"},
		{"garbage", []string{write(t, "garbage.jsonl", "not json", `{"event":"delay_applied"}`)}, exitUnusable, "No departure in the trail"},
		{"no departure", []string{write(t, "hold.jsonl", hold)}, exitUnusable, "No departure in the trail"},
		{"no file", nil, exitUnusable, "usage"},
		{"unknown flag", []string{"-nonsense", "x.jsonl"}, exitUnusable, "usage"},
		{"bad tolerance", []string{"-tolerance-frac", "2", write(t, "c.jsonl", dep1)}, exitUnusable, "-tolerance-frac"},
		{"missing file", []string{filepath.Join(t.TempDir(), "missing.jsonl")}, exitUnusable, "no such file"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, tc.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%s: exit status %d, want %d with %q on stderr:\n%s", tc.name, status, tc.status, tc.stderr, stderr.String())
		}
	}
}

// An event of no host (target_domain "", as option_invalid is) is not a host: no nameless row, section
// or heading in either report; it is listed under its own heading. A trail holding only such an event
// proves nothing, and says so in its verdict as in its exit status.
func TestEventOfNoHostIsNotAHost(t *testing.T) {
	option := `{"level":"error","timestamp":"2026-12-02T11:59:59Z","pipeline_id":"p","target_domain":"","event":"option_invalid","trigger":"option","base_delay_ms":0,"computed_delay_ms":0,"jitter_ms":0,"compliance_flag":true,"status_code":0,"schema":2,"detail":"WithBaseDelay(-1s): negative; the earlier 100ms applies"}`
	for _, tc := range []struct {
		name    string
		lines   []string
		status  int
		verdict string
	}{
		{"alone", []string{option}, exitUnusable, "No departure in the trail"},
		{"with a host", []string{option, dep1, hold, depOK}, exitOK, "No violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), "report.html")
			var stdout, stderr bytes.Buffer
			status := run([]string{"-html", page, write(t, "a.jsonl", tc.lines...)}, &stdout, &stderr)
			md := stdout.String()
			html, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case status != tc.status || !strings.Contains(md, tc.verdict):
				t.Errorf("status %d, want %d with %q:\n%s", status, tc.status, tc.verdict, md)
			case strings.Contains(md, "|  |") || strings.Contains(md, "\n## \n") || bytes.Contains(html, []byte("<h2></h2>")):
				t.Errorf("a host with no name is reported:\n%s\n%s", md, html)
			case strings.Contains(md, "| ok |") && tc.status != exitOK:
				t.Errorf("a row says ok while the trail proves nothing:\n%s", md)
			case !strings.Contains(md, "## Events of no host") || !strings.Contains(md, "option_invalid") || !bytes.Contains(html, []byte("option_invalid")):
				t.Errorf("the event is not listed apart:\n%s\n%s", md, html)
			}
		})
	}
}
