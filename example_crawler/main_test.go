package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
)

func testOptions(t *testing.T, args ...string) options {
	t.Helper()
	dir := t.TempDir()
	fs := flag.NewFlagSet("example_crawler", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o, err := parseFlags(fs, append([]string{"-audit", filepath.Join(dir, "audit.jsonl"), "-state", filepath.Join(dir, "pacing.db")}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestCrawlURL crawls a scenario host through -url: same-host links, the page budget, robots.txt.
func TestCrawlURL(t *testing.T) {
	h, err := scenario.Start(scenario.HostConfig{Name: "site", Pages: 12, Robots: "User-agent: *\nDisallow: /p/2\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	o := testOptions(t, "-url", h.URL()+"/", "-pages", "5", "-base-delay", "20ms", "-duration", "20s")
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	a := h.Arrivals()
	if ok := scenario.PagesOK(a); ok != 5 {
		t.Errorf("%d pages served, want the budget of 5\n%s", ok, out.String())
	}
	for _, x := range a {
		if x.Path == "/p/2" {
			t.Errorf("fetched /p/2, disallowed by robots.txt")
		}
	}
	audit, err := os.ReadFile(o.audit)
	if err != nil || !bytes.Contains(audit, []byte(`"pipeline_id":"example_crawler"`)) {
		t.Errorf("audit trail: %v %.200q", err, audit)
	}
	if page, err := os.ReadFile(reportPath(o.audit)); err != nil || !bytes.Contains(page, []byte("<svg")) {
		t.Errorf("report page beside the audit trail: %v", err)
	}
	for _, want := range []string{"summary: crawl finished", "(SQLite; survives restarts)", h.Key() + ": 5 done, 0 left",
		"pace report of " + o.audit, "No violation", "charts: " + reportPath(o.audit)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoStopsAtBound runs the demo for a moment: it must stop cleanly at -duration.
func TestDemoStopsAtBound(t *testing.T) {
	o := testOptions(t, "-duration", "1500ms")
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"demo site on 127.0.0.1: 6 hosts", "summary: stopped at the -duration bound", "crawl-delay"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "abandoned") {
		t.Errorf("requests outlived the bound:\n%s", out.String())
	}
}

func TestParseFlags(t *testing.T) {
	o := testOptions(t)
	if o.pages != 0 || o.baseDelay != demoBaseDelay || o.duration != 3*time.Minute {
		t.Errorf("demo defaults: %+v", o)
	}
	if o := testOptions(t, "-url", "https://example.org/"); o.pages != 50 || o.baseDelay != time.Second {
		t.Errorf("-url defaults: %+v", o)
	}
	for _, args := range [][]string{
		{"-url", "example.org"}, {"-url", "ftp://example.org/"}, {"-jitter", "2"}, {"-pages", "0"},
		{"-max-inflight", "0"}, {"-duration", "0s"}, {"extra"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		if _, err := parseFlags(fs, args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	var help bytes.Buffer
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&help)
	if _, err := parseFlags(fs, []string{"-h"}); err != flag.ErrHelp || !strings.Contains(help.String(), "demo site") || !strings.Contains(help.String(), "-max-inflight") {
		t.Errorf("-h: %v\n%s", err, help.String())
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		849600 * time.Microsecond: "850ms", 2149 * time.Millisecond: "2.1s", 65 * time.Second: "1m5s",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

// TestSeedDisallowed reports a seed robots.txt forbids instead of crawling nothing silently: the run
// fails, naming robots.txt.
func TestSeedDisallowed(t *testing.T) {
	h, err := scenario.Start(scenario.HostConfig{Robots: "User-agent: *\nDisallow: /\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var out bytes.Buffer
	err = run(context.Background(), testOptions(t, "-url", h.URL()+"/", "-duration", "10s"), &out)
	if !errors.Is(err, errNothingCrawled) || !strings.Contains(err.Error(), "robots.txt") {
		t.Errorf("run = %v, want errNothingCrawled naming robots.txt", err)
	}
	if !strings.Contains(out.String(), "not crawled") || len(scenario.PageRequests(h.Arrivals())) != 0 {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestMetricsFlag serves the pacer's metrics on -metrics while crawling.
func TestMetricsFlag(t *testing.T) {
	s, opts, err := startMetrics("127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if len(opts) != 1 {
		t.Fatalf("%d options, want the observer", len(opts))
	}
	p := ext.NewPacer(append(opts, ext.WithBaseDelay(0))...)
	s.watch(p)
	if _, release, err := p.Wait(context.Background(), "metrics.test"); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	resp, err := http.Get("http://" + s.addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `collypace_departures_total{host="metrics.test"} 1`) {
		t.Errorf("/metrics lacks the departure:\n%s", body)
	}
}

// A crawl that fetched nothing (a refused port, a name that does not resolve) is an error naming why,
// not a success: its own report says it proves nothing, and main exits 1.
func TestNothingCrawledIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	seed := "http://" + l.Addr().String() + "/"
	l.Close() // nothing listens: the connection is refused
	o := testOptions(t, "-url", seed, "-duration", "20s")
	var out bytes.Buffer
	err = run(context.Background(), o, &out)
	if !errors.Is(err, errNothingCrawled) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("run = %v, want errNothingCrawled naming the refused connection\n%s", err, out.String())
	}
}
