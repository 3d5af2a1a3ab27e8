package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// TestParseNginxLog: a request arrived $request_time before its line was written ($msec, when it was
// answered); a Retry-After sent opens a window from its arrival; the send stamp is read.
func TestParseNginxLog(t *testing.T) {
	log := `1796357612.692 0.021 200 "/p/1" "1796357612670000000" "-"
1796357612.696 0.000 429 "/p/2" "-" "1"
1796357612.650 0.000 200 "/robots.txt" "-" "-"
`
	arr, ws, err := parseNginxLog(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(v int64) time.Time { return time.UnixMilli(v) }
	tests := []struct {
		name      string
		got, want any
	}{
		{"arrivals", len(arr), 3},
		{"sorted by arrival: robots.txt first", arr[0].Path, "/robots.txt"},
		{"arrival = $msec − $request_time", arr[1].At, ms(1796357612692 - 21)},
		{"status", arr[1].Status, 200},
		{"send stamp", arr[1].Sent, time.Unix(0, 1796357612670000000)},
		{"no send stamp", arr[2].Sent, time.Time{}},
		{"one window, for the Retry-After", len(ws), 1},
		{"window issued at the refusal's arrival", ws[0].Issued, ms(1796357612696)},
		{"window until Retry-After later", ws[0].Until, ms(1796357613696)},
		{"window answered when logged", ws[0].Answered, ms(1796357612696)},
		{"window's status", ws[0].Status, 429},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	for _, bad := range []string{`1796357612.692 0.021 200 "/p/1"`, `x 0.021 200 "/p/1" "-" "-"`, `1.1234 0 200 "/" "-" "-"`, `1.1 0 200 "/" "-" "soon"`} {
		if _, _, err := parseNginxLog(strings.NewReader(bad)); !errors.Is(err, errLogLine) {
			t.Errorf("%q: err %v, want errLogLine", bad, err)
		}
	}
}

// TestParseHAProxyLog: a request arrived at its accept date plus its handshake and idle times and was
// answered its active time later; a refusal of the configured status opens the configured window.
func TestParseHAProxyLog(t *testing.T) {
	log := `1796357630 793 0 0 21 200 /p/1 {1796357630790000000}
1796357631 224 1 400 0 429 /p/2 {-}
Proxy pace stopped (cumulated conns: FE: 2, BE: 0).
`
	l := Limiter{Kind: HAProxy, Rate: 4, Status: 429, RetryAfter: time.Second}
	arr, ws, err := parseHAProxyLog(strings.NewReader(log), l)
	if err != nil {
		t.Fatal(err)
	}
	ms := func(v int64) time.Time { return time.UnixMilli(v) }
	tests := []struct {
		name      string
		got, want any
	}{
		{"arrivals", len(arr), 2},
		{"arrival = accept date", arr[0].At, ms(1796357630793)},
		{"send stamp", arr[0].Sent, time.Unix(0, 1796357630790000000)},
		{"kept-alive: arrival = accept date + %Th + %Ti", arr[1].At, ms(1796357631224 + 401)},
		{"path", arr[1].Path, "/p/2"},
		{"no send stamp", arr[1].Sent, time.Time{}},
		{"one window, for the 429", len(ws), 1},
		{"window until the configured Retry-After", ws[0].Until, ms(1796357631625 + 1000)},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if _, ws, _ := parseHAProxyLog(strings.NewReader(log), Limiter{Kind: HAProxy, Rate: 4, Status: 429}); len(ws) != 0 {
		t.Errorf("no Retry-After configured: %d windows, want 0", len(ws))
	}
	if _, _, err := parseHAProxyLog(strings.NewReader("1796357630 793 0 0 21 200 /p/1\n"), l); !errors.Is(err, errLogLine) {
		t.Errorf("a line without the send stamp: err %v, want errLogLine", err)
	}
}

// TestLimiterConfigs checks the generated configurations with the limiters' own checkers (nginx -t,
// haproxy -c) where they are installed, and what they must say everywhere.
func TestLimiterConfigs(t *testing.T) {
	limiters := []Limiter{
		{Kind: Nginx, Rate: 4},
		{Kind: Nginx, Rate: 4, Status: 429, RetryAfter: time.Second},
		{Kind: HAProxy, Rate: 4, Status: 429, RetryAfter: time.Second},
	}
	wants := [][]string{
		{"rate=4r/s", "limit_req_status 503;", `503 "";`, "limit_req zone=pace;", "listen 127.0.0.1:1;", "proxy_pass http://127.0.0.1:2;"},
		{"limit_req_status 429;", "429 1;", "add_header Retry-After $pace_retry_after always;"},
		{"http_req_rate(1s)", "track-sc0 src", "return status 429 hdr Retry-After 1 if { sc_http_req_rate(0) gt 4 }", "bind 127.0.0.1:1", "server host 127.0.0.1:2"},
	}
	for i, l := range limiters {
		conf := nginxConfig(l, "127.0.0.1:1", "127.0.0.1:2")
		if l.Kind == HAProxy {
			conf = haproxyConfig(l, "127.0.0.1:1", "127.0.0.1:2")
		}
		for _, w := range wants[i] {
			if !strings.Contains(conf, w) {
				t.Errorf("%s: the configuration lacks %q:\n%s", l.describe(), w, conf)
			}
		}
		checkByLimiter(t, l, conf)
	}
}

// checkByLimiter has the limiter's own checker (nginx -t, haproxy -c) read conf, where it is installed.
func checkByLimiter(t *testing.T, l Limiter, conf string) {
	t.Helper()
	bin, err := l.Kind.binary()
	if err != nil {
		t.Logf("not checked by %s itself: %v", l.Kind, err)
		return
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, nginxTempDir), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", "-q", "-f", path)
	if l.Kind == Nginx {
		cmd = exec.Command(bin, "-t", "-q", "-e", filepath.Join(dir, "error.log"), "-p", dir+"/", "-c", path)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s rejects the configuration of %s: %v\n%s\n%s", l.Kind, l.describe(), err, out, conf)
	}
}

// TestRealLimiters runs the short version of each real-limiter scenario, side by side, where the
// limiter is installed (skipped otherwise, and in CI unless PACEBENCH_REAL is set), and checks the instrument, not
// the pacer: the limiter's log has every page of both crawls, stamped and in the crawl's time; static
// Colly, sending 10/s to a 4/s limiter, was refused with the limiter's status; a Retry-After opened a
// window per refusal. Each crawl is bounded by its scenario's Limit (60 s); they take about 10 s.
func TestRealLimiters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nginx and HAProxy and crawls them for about 10 s")
	}
	if os.Getenv("CI") != "" && os.Getenv("PACEBENCH_REAL") == "" {
		t.Skip("CI need not run the real limiters (set PACEBENCH_REAL=1 to run them there)")
	}
	var scs []Scenario
	for _, sc := range realScenarios(sizeShort) {
		if _, err := sc.Limiter.Kind.binary(); err != nil {
			t.Logf("skipping %s: %v", sc.Name, err)
			continue
		}
		scs = append(scs, sc)
	}
	if len(scs) == 0 {
		t.Skip("neither nginx nor haproxy is installed")
	}
	results, errs := runScenarios(t.Context(), scs)
	for i, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			r := results[i]
			for _, mode := range []Mode{Static, Adaptive} {
				checkLimiterLog(t, &r.Scenario, r.Runs[mode])
			}
			st := r.Metrics[Static][0]
			if st.Refused == 0 {
				t.Errorf("static Colly at %v intervals was never refused by a %g/s limiter: is it limiting?", sc.Interval, sc.Limiter.Rate)
			}
			a := r.Metrics[Adaptive][0]
			t.Logf("adaptive: %s, %s, %s; static: %s, %s, %s", fmtGoodput(a), fmtRefused(a), fmtLost(a), fmtGoodput(st), fmtRefused(st), fmtLost(st))
		})
	}
	section := renderSection(RunInfo{Date: time.Now(), Command: "go test"}, results, evaluate(results, 0, false), nil)
	for _, sc := range scs {
		if !strings.Contains(section, "| "+sc.Name+" | ") || !strings.Contains(section, "at least") {
			t.Errorf("the report lacks %s or its targets:\n%s", sc.Name, section)
		}
	}
	dir := t.TempDir()
	for _, r := range results {
		if r == nil {
			continue
		}
		if err := renderChart(r, filepath.Join(dir, r.Scenario.Name+".svg")); err != nil {
			t.Errorf("chart of %s: %v", r.Scenario.Name, err)
		}
	}
}

// checkLimiterLog checks one crawl's arrivals as a limiter logged them.
func checkLimiterLog(t *testing.T, sc *Scenario, run *Run) {
	t.Helper()
	h := run.Hosts[0]
	pages := scenario.PageRequests(h.Arrivals)
	if len(pages) < h.Config.Pages {
		t.Errorf("%s: %d page requests logged for %d pages", run.Mode, len(pages), h.Config.Pages)
	}
	// The log has millisecond resolution (HAProxy's arrival adds up three truncated values) and the
	// crawl's clock is the same machine's.
	const res = 2 * time.Millisecond
	lo, hi := run.Start.Add(-res), run.Start.Add(run.Wall+res)
	refusals := 0
	for _, a := range pages {
		if a.At.Before(lo) || a.At.After(hi) {
			t.Errorf("%s: %s arrived at %v, outside the crawl (%v to %v)", run.Mode, a.Path, a.At, lo, hi)
		}
		if a.Sent.IsZero() || a.Sent.After(a.At.Add(res)) {
			t.Errorf("%s: %s sent %v, arrived %v: want a send stamp before the arrival", run.Mode, a.Path, a.Sent, a.At)
		}
		switch a.Status {
		case 200:
		case sc.Limiter.status():
			refusals++
		default:
			t.Errorf("%s: %s answered %d", run.Mode, a.Path, a.Status)
		}
	}
	if want := refusals * min(int(sc.Limiter.RetryAfter/time.Second), 1); len(h.Windows) != want {
		t.Errorf("%s: %d windows for %d refusals, want %d", run.Mode, len(h.Windows), refusals, want)
	}
	if want := strings.TrimPrefix(h.Key, "127.0.0.1:"); want == h.Key || len(run.Hosts) != 1 {
		t.Errorf("%s: host key %q, want the limiter's 127.0.0.1:PORT", run.Mode, h.Key)
	}
}

// TestStartFrontFails: a limiter that cannot start says why, and leaves no directory behind.
func TestStartFrontFails(t *testing.T) {
	l := Limiter{Kind: Nginx, Rate: 4}
	if _, err := l.Kind.binary(); err != nil {
		t.Skip(err)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "pacebench-nginx-*"))
	// An upstream nginx cannot parse: the configuration is refused at start.
	_, err := startFront(l, "127.0.0.1:notaport")
	if !errors.Is(err, errExitedAtStart) || !strings.Contains(err.Error(), "invalid port") {
		t.Errorf("err %v, want an exit at start quoting nginx's message", err)
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "pacebench-nginx-*")); len(after) > len(before) {
		t.Errorf("directories left behind: %v", after)
	}
}
