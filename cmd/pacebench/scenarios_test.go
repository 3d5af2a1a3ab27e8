package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// testGrace forgives requests arriving this soon after a Retry-After was announced: on a loaded CI
// machine a request already on its way can take this long to reach the server.
const testGrace = 100 * time.Millisecond

// Gaps measured at a server include the requests' transit, and on a loaded machine (-race, two cores
// shared with other jobs) one request can reach its server 50–90 ms late: the gap before it grows and
// the gap after it shrinks by as much. So no single gap may be shorter than a tenth of the floor (two
// requests sent together make a gap of a millisecond or so), and the span of a host's n arrivals must
// be at least (n−1) floors less one (a late arrival moves one end of it; a pacer systematically short
// of its floor falls below).
func minGap(floor time.Duration) time.Duration { return floor / 10 }

// TestScenariosShort runs the short version of every scenario, static and adaptive side by side on
// their own servers, and checks what cannot flake on a slow machine: the adaptive pacer sends nothing
// inside a Retry-After window, never spaces requests below the floor, loses no page; static Colly
// never spaces them below its Delay; and the report and charts render. It asserts no upper bound on
// time.
func TestScenariosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs loopback crawls for about 10 s")
	}
	// All scenarios at once, in goroutines rather than parallel subtests: -parallel defaults to
	// GOMAXPROCS (2 here), and the crawls mostly wait on timers.
	scs := allScenarios(true)
	if _, err := exec.LookPath("redis-server"); err != nil {
		// As redisstore/internal/redistest: CI must run the fleet scenarios; elsewhere they are skipped.
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found, and CI is set: the fleet scenarios must run in CI (apt-get install redis-server): %v", err)
		}
		var kept []Scenario
		for _, sc := range scs {
			if sc.Processes > 1 {
				t.Logf("skipping %s: redis-server not found (apt-get install redis-server)", sc.Name)
				continue
			}
			kept = append(kept, sc)
		}
		scs = kept
	}
	results, errs := runScenarios(t.Context(), scs)
	for i, sc := range scs {
		t.Run(sc.Name, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			r := results[i]
			checkRun(t, &r.Scenario, r.Runs[Adaptive], true)
			checkRun(t, &r.Scenario, r.Runs[Static], false)
		})
	}
	if t.Failed() {
		return
	}

	section := renderSection(RunInfo{Date: time.Now(), Command: "go test", Short: true}, results, evaluate(results, time.Minute, false), nil)
	for _, sc := range scs {
		for _, mode := range []string{"static", "adaptive"} {
			if !strings.Contains(section, "| "+sc.Name+" | ") || !strings.Contains(section, " | "+mode+" | ") {
				t.Errorf("the results table lacks a %s row of %s:\n%s", mode, sc.Name, section)
			}
		}
	}
	if !strings.Contains(section, "### Targets") {
		t.Errorf("no targets table:\n%s", section)
	}

	dir := t.TempDir()
	for i, r := range results {
		if r.Scenario.NoChart {
			continue
		}
		formats := []string{"svg"}
		if i == 0 {
			formats = append(formats, "png") // rasterizing is slow under -race: once is enough
		}
		for _, ext := range formats {
			path := filepath.Join(dir, r.Scenario.Name+"."+ext)
			if err := renderChart(r, path); err != nil {
				t.Fatalf("chart %s: %v", path, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() < 1000 {
				t.Errorf("chart %s: only %d bytes", path, fi.Size())
			}
		}
	}
}

// checkRun checks one crawl of a scenario on every host.
func checkRun(t *testing.T, sc *Scenario, run *Run, adaptive bool) {
	t.Helper()
	mode := run.Mode
	if run.TimedOut {
		t.Errorf("%s: the %s crawl reached the scenario's %v bound", sc.Name, mode, sc.Limit)
	}
	for _, h := range run.Hosts {
		pages := scenario.PageRequests(h.Arrivals)
		if len(pages) < h.Config.Pages {
			t.Errorf("%s %s %s: %d page requests for %d pages", sc.Name, mode, h.Config.Name, len(pages), h.Config.Pages)
		}
		floor := sc.Interval
		if adaptive {
			floor = sc.floorFor(h.Config)
		}
		gaps := scenario.Gaps(pages)
		if !adaptive && sc.Processes > 1 {
			gaps = nil // static Colly's processes share nothing: their requests do go out together
		}
		for i, g := range gaps {
			if g >= minGap(floor) {
				continue
			}
			// The server's clock reads a request when its handler starts, which a loaded machine (the
			// whole suite under -race) can delay by tens of milliseconds: two requests sent an interval
			// apart can then be read together. The clients' own send stamps tell the two apart.
			if a, b := pages[i].Sent, pages[i+1].Sent; !a.IsZero() && !b.IsZero() && b.Sub(a).Abs() >= minGap(floor) {
				t.Logf("%s %s %s: gap %d is %v at the server, %v as sent", sc.Name, mode, h.Config.Name, i, g, b.Sub(a).Abs())
				continue
			}
			t.Errorf("%s %s %s: gap %d is %v: two requests sent together (floor %v)", sc.Name, mode, h.Config.Name, i, g, floor)
		}
		if span, least := scenario.Span(pages), time.Duration(len(gaps)-1)*floor; span < least {
			// As for one gap: the server reads each arrival when its handler starts, which a loaded
			// machine delays; the span the clients sent them over tells a late read from a burst.
			if sent := sentSpan(pages); sent >= least {
				t.Logf("%s %s %s: %d gaps span %v at the server, %v as sent", sc.Name, mode, h.Config.Name, len(gaps), span, sent)
			} else {
				t.Errorf("%s %s %s: %d gaps span %v (%v as sent), less than %d × the floor %v", sc.Name, mode, h.Config.Name, len(gaps), span, sent, len(gaps)-1, floor)
			}
		}
		if !adaptive {
			continue
		}
		// A request is inside a window only if the pacer admitted it after it read the refusal: one
		// admitted before was on its way, and nothing the client knew could have held it (reads.go).
		trail := readsOf(run.Audit)
		windows, admitted := trail.windows(h.Key, h.Windows), trail.arrivals(h.Key, pages)
		if in, _ := insideWindows(admitted, windows, testGrace); in > 0 {
			t.Errorf("%s %s %s: %d requests inside %d Retry-After windows", sc.Name, mode, h.Config.Name, in, len(h.Windows))
			logInsideWindows(t, admitted, windows)
			logTrailOf(t, trail, h.Key, admitted, windows)
		}
		if ok := scenario.PagesOK(pages); ok != h.Config.Pages {
			t.Errorf("%s %s %s: %d of %d pages lost", sc.Name, mode, h.Config.Name, h.Config.Pages-ok, h.Config.Pages)
		}
	}
	if adaptive && len(run.Samples) == 0 {
		t.Errorf("%s: the adaptive pacer was never sampled", sc.Name)
	}
}

// logTrailOf logs, for a failure, what the trail says of each window's refused path (its reads) and of
// each arrival inside it (its admissions), relative to the window's issue: whether the read the judge
// used is the client's or, missing from the trail, the server's own instant.
func logTrailOf(t *testing.T, trail trailInstants, host string, pages []scenario.Arrival, windows []scenario.Window) {
	rel := func(ts []time.Time, from time.Time) []string {
		var out []string
		for _, x := range ts {
			out = append(out, fmt.Sprintf("%+v", x.Sub(from)))
		}
		return out
	}
	for _, w := range windows {
		for _, a := range pages {
			if a.At.After(w.Issued) && a.At.Before(w.Until) {
				t.Logf("trail: %s read at %v, %s admitted at %v (relative to the window's issue; none read: the server's instant stands)",
					w.Path, rel(trail.reads[host][w.Path], w.Issued), a.Path, rel(trail.admitted[host][a.Path], w.Issued))
			}
		}
	}
}

// logInsideWindows logs, for a failure, each arrival inside a window with its send stamp and the
// window's instants, relative to the window's issue.
func logInsideWindows(t *testing.T, pages []scenario.Arrival, windows []scenario.Window) {
	for _, a := range pages {
		for _, w := range windows {
			if a.At.After(w.Issued) && a.At.Before(w.Until) {
				t.Logf("%s arrived +%v into the window of %s (read by the client +%v, until +%v), admitted +%v",
					a.Path, a.At.Sub(w.Issued), w.Path, w.Answered.Sub(w.Issued), w.Until.Sub(w.Issued), a.Sent.Sub(w.Issued))
			}
		}
	}
}

// sentSpan is the span of the pages' send stamps (first to last), 0 when any is missing.
func sentSpan(pages []scenario.Arrival) time.Duration {
	if len(pages) == 0 {
		return 0
	}
	first, last := pages[0].Sent, pages[0].Sent
	for _, a := range pages {
		if a.Sent.IsZero() {
			return 0
		}
		first, last = minTime(first, a.Sent), maxTime(last, a.Sent)
	}
	return last.Sub(first)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// runScenarios runs the scenarios side by side and returns each one's result or error.
func runScenarios(ctx context.Context, scs []Scenario) ([]*ScenarioResult, []error) {
	results := make([]*ScenarioResult, len(scs))
	errs := make([]error, len(scs))
	var wg sync.WaitGroup
	for i, sc := range scs {
		wg.Go(func() { results[i], errs[i] = runScenario(ctx, sc) })
	}
	wg.Wait()
	return results, errs
}
