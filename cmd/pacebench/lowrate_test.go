package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// TestLowRateScenarios: the family is issue 32's grid (three floors × one process and a fleet, each
// holding the three rates × three shapes, loopback and real), three minutes of pages a cell, run only
// when asked.
func TestLowRateScenarios(t *testing.T) {
	scs := lowRateScenarios(sizeFull)
	want := []string{"low-rate-10ms", "low-rate-50ms", "low-rate-100ms", "low-rate-fleet-10ms", "low-rate-fleet-50ms", "low-rate-fleet-100ms"}
	if !slices.Equal(names(scs), want) {
		t.Fatalf("scenarios %v, want %v", names(scs), want)
	}
	for _, sc := range scs {
		if len(sc.Groups) != 2*len(lowRateShapes)*len(lowRates) {
			t.Errorf("%s: %d groups, want 18", sc.Name, len(sc.Groups))
		}
		if sc.Limit < 2*lowRateSpan {
			t.Errorf("%s: limit %v, want at least twice the %v of pages", sc.Name, sc.Limit, lowRateSpan)
		}
		for _, g := range sc.Groups {
			c, h := g.LowRate, g.Hosts[0]
			if want := int(c.Rate * lowRateSpan.Seconds()); len(g.Hosts) != 1 || h.Pages != want {
				t.Errorf("%s %s: %d hosts, %d pages; want 1 host of %d pages", sc.Name, g.Label, len(g.Hosts), h.Pages, want)
			}
			limited := h.Capacity != nil || h.Sliding != nil
			if c.Real == limited || c.Real != (g.Limiter != nil) {
				t.Errorf("%s %s: real %v, but a limit of its own %v and a limiter %v", sc.Name, g.Label, c.Real, limited, g.Limiter)
			}
		}
	}
	if all, _ := selectScenarios("all", sizeFull); slices.ContainsFunc(all, func(sc Scenario) bool { return isLowRate(&sc) }) {
		t.Error("all selects the low-rate family: it runs only when asked")
	}
	got, err := selectScenarios("low-rate,quota", sizeFull)
	if err != nil || !slices.Equal(names(got), append([]string{scQuota}, want...)) {
		t.Errorf("low-rate,quota: %v, %v; want quota and the family", names(got), err)
	}
}

// TestLowRateLimiters: below one request a second nginx takes the rate per minute and HAProxy's window
// grows to hold a whole request; the simulated sliding window is the real one's; a rate neither can
// express is refused before anything starts.
func TestLowRateLimiters(t *testing.T) {
	c := lowRateCell{Rate: 0.5, Shape: shapeNginx503, Real: true}
	ng := c.limiter()
	conf := nginxConfig(ng, "127.0.0.1:1", "127.0.0.1:2")
	if !strings.Contains(conf, "rate=30r/m;") || !strings.Contains(conf, "limit_req_status 503;") {
		t.Errorf("nginx at 0.5/s:\n%s", conf)
	}
	checkByLimiter(t, ng, conf)
	c.Shape = shapeHAProxy
	hp := c.limiter()
	conf = haproxyConfig(hp, "127.0.0.1:1", "127.0.0.1:2")
	for _, w := range []string{"store http_req_rate(2s)", "return status 429 hdr Retry-After 1 if { sc_http_req_rate(0) gt 1 }"} {
		if !strings.Contains(conf, w) {
			t.Errorf("HAProxy at 0.5/s lacks %q:\n%s", w, conf)
		}
	}
	checkByLimiter(t, hp, conf)
	if got := hp.describe(); got != "HAProxy http_req_rate(2s) gt 1 (0.5/s), 429 + Retry-After 1 s" {
		t.Errorf("describe: %q", got)
	}
	c.Real = false
	if w := c.host(10).Sliding; w == nil || w.Limit != 1 || w.Period != 2*time.Second || w.RetryAfter != time.Second {
		t.Errorf("simulated HAProxy at 0.5/s: %+v, want 1 per 2 s with Retry-After 1 s", w)
	}
	if got := slidingCapacity(c.host(10)); got != 0.5 {
		t.Errorf("the simulated window's capacity: %g/s, want 0.5", got)
	}
	for _, l := range []Limiter{{Kind: Nginx, Rate: 0.001}, {Kind: HAProxy, Rate: 0.01}} {
		if l.check() == nil {
			t.Errorf("%v at %g/s: no error", l.Kind, l.Rate)
		}
		if _, err := startFront(l, "127.0.0.1:1"); err == nil {
			t.Errorf("%v at %g/s started", l.Kind, l.Rate)
		}
	}
}

// TestMeasureLowRate: the figures of a cell from its server's log and the audit trail.
func TestMeasureLowRate(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	// A 1/s limiter, 4 pages: refused twice at the start, once at 70 s (late), and /p/2 served twice.
	arr := []scenario.Arrival{
		{At: at(0), Path: "/", Status: 200},
		{At: at(0.1), Path: "/p/1", Status: 503},
		{At: at(0.2), Path: "/p/1", Status: 503},
		{At: at(40), Path: "/p/1", Status: 200},
		{At: at(70), Path: "/p/2", Status: 503},
		{At: at(150), Path: "/p/2", Status: 200},
		{At: at(151), Path: "/p/2", Status: 200},
		{At: at(5), Path: scenario.RobotsPath, Status: 200},
	}
	trail := []byte(`{"event":"refusals_uncorrelated","target_domain":"127.0.0.1:9"}
{"event":"refusals_uncorrelated","target_domain":"127.0.0.1:8"}
{"event":"delay_applied","target_domain":"127.0.0.1:9"}
`)
	sc := &Scenario{Groups: []Group{{LowRate: &lowRateCell{Rate: 1}}}}
	run := &Run{Audit: trail, Hosts: []*HostRun{{Group: 0, Key: "127.0.0.1:9", Config: scenario.HostConfig{Pages: 4}, Arrivals: arr}}}
	f := measureLowRate(sc, 0, run, &Metrics{InWindow: 2})
	if f.Pages != 4 || f.Fetched != 3 || f.Requests != 7 || f.Refused != 3 || f.Late != 1 || f.Noise != 1 || f.InWindow != 2 {
		t.Errorf("figures %+v", f)
	}
	// From 30 s on: /p/1 at 40 s and /p/2 at 150 s, to 150 s + 1 s: 2 pages in 121 s at 1/s.
	if want := 2.0 / 121; math.Abs(f.Steady-want) > 1e-9 {
		t.Errorf("goodput from 30 s %g, want %g", f.Steady, want)
	}
	// The crawl spans 151 s: one late refusal over the 91 s after the first minute.
	if want := 1 / (91.0 / 60); math.Abs(f.LatePerMin-want) > 1e-9 || f.Span != 151*time.Second {
		t.Errorf("late %g/min over %v, want %g", f.LatePerMin, f.Span, want)
	}
	missed := strings.Join(f.missed(), "; ")
	for _, w := range []string{"1 pages lost", "refused 42.9% > 10%", "goodput from 30 s 2% < 85%", "1 noise verdicts"} {
		if !strings.Contains(missed, w) {
			t.Errorf("missed %q, want %q in it", missed, w)
		}
	}
	if strings.Contains(missed, "late") {
		t.Errorf("missed %q: 0.7 late refusals a minute is within the target", missed)
	}
}

// TestLowRateCrawl crawls a tiny version of two cells side by side (10 s of pages at 2/s from a 100 ms
// floor): the loopback nginx 429 and, where nginx is installed (and outside CI unless PACEBENCH_REAL is
// set, as TestRealLimiters), a real nginx 503. It checks the instrument, not the pacer's targets: each
// limiter limits, the adaptive pacer fetches every page, and the table and targets report each cell.
func TestLowRateCrawl(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls loopback hosts and nginx for about 20 s")
	}
	var sc Scenario
	for _, s := range lowRateScenarios(sizeShort) {
		if s.Name == lowRateName(100*time.Millisecond, 1) {
			sc = s
		}
	}
	realOK := os.Getenv("CI") == "" || os.Getenv("PACEBENCH_REAL") != ""
	var groups []Group
	for _, g := range sc.Groups {
		c := *g.LowRate
		if c.Rate == 2 && ((!c.Real && c.Shape == shapeNginx429) || (c.Real && realOK && c.Shape == shapeNginx503)) {
			groups = append(groups, g)
		}
	}
	sc.Groups = groups
	var skipped bytes.Buffer
	sc, ok := installed(sc, &skipped)
	if skipped.Len() > 0 {
		t.Log(strings.TrimSpace(skipped.String()))
	}
	if !ok {
		t.Fatal("the loopback cell was dropped")
	}
	r, err := runScenario(t.Context(), sc)
	if err != nil {
		t.Fatal(err)
	}
	rows := lowRateRows([]*ScenarioResult{r})
	if len(rows) != len(sc.Groups) {
		t.Fatalf("%d rows for %d cells", len(rows), len(sc.Groups))
	}
	for _, row := range rows {
		a, s := row.Adaptive, row.Static
		t.Logf("%s: adaptive %s; static %s", row.Cell.label(), a, s)
		if s.Refused == 0 {
			t.Errorf("%s: static Colly at %v was never refused by a %g/s limiter: is it limiting?", row.Cell.label(), sc.Interval, row.Cell.Rate)
		}
		if a.Fetched != a.Pages || a.TimedOut {
			t.Errorf("%s: the adaptive pacer fetched %d of %d pages (stopped at the limit: %v)", row.Cell.label(), a.Fetched, a.Pages, a.TimedOut)
		}
		if a.Requests < a.Pages || a.Span <= 0 {
			t.Errorf("%s: %d requests over %v for %d pages", row.Cell.label(), a.Requests, a.Span, a.Pages)
		}
	}
	section := renderSection(RunInfo{Date: time.Now(), Command: "go test"}, []*ScenarioResult{r}, evaluate([]*ScenarioResult{r}, 0, false), nil)
	if !strings.Contains(section, "### Low rates (issue 32)") {
		t.Errorf("no low-rate table:\n%s", section)
	}
	for _, g := range sc.Groups {
		if !strings.Contains(section, "| "+g.LowRate.Shape.String()+" | "+g.LowRate.setting()+" | 2/s | 100 ms |") ||
			!strings.Contains(section, "| "+sc.Name+" | "+g.Label+": every page fetched") {
			t.Errorf("the report lacks the cell %s or its target:\n%s", g.Label, section)
		}
	}
	if strings.Contains(section, "scenario run under a minute") {
		t.Error("a low-rate scenario runs for minutes by design: no wall-time target")
	}
	dir := t.TempDir()
	if err := writeArrivals(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, g := range sc.Groups {
		b, err := os.ReadFile(filepath.Join(dir, sc.Name+".adaptive."+g.Hosts[0].Name+".tsv"))
		if err != nil || bytes.Count(b, []byte("\t/p/")) < g.Hosts[0].Pages-1 {
			t.Errorf("the arrivals of %s: %v\n%s", g.Label, err, b)
		}
	}
}
