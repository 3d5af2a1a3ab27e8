package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/redisproc"
)

// TestMain lets the test binary serve as a process of the fleet, as the queuebench binary does: the
// fleet crawl re-executes os.Executable().
func TestMain(m *testing.M) {
	if isFleetWorker(os.Args) {
		os.Exit(fleetWorkerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A small fleet crawl, then the same with one process SIGKILLed mid-crawl, measured at the servers:
// every URL fetched, exactly once without the kill, and with it no more duplicates than the killed
// process could have had in flight (one a worker); no gap under a host's interval at the wire either
// way; and the table printed. Times are not asserted (2 noisy cores): the benchmark program reports them.
func TestFleetCrawlFetchesEveryURL(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet crawl starts processes and a redis-server")
	}
	cfg := fleetConfig{procs: 2, workers: 2, leaseTTL: 600 * time.Millisecond, killAt: 700 * time.Millisecond, bound: time.Minute,
		classes: []hostClass{
			{Name: "slow", Hosts: 2, Interval: 300 * time.Millisecond, Latency: 20 * time.Millisecond, Pages: 5},
			{Name: "fast", Hosts: 10, Interval: 60 * time.Millisecond, Latency: 2 * time.Millisecond, Pages: 5},
		}}
	var runs []fleetRun
	for _, kill := range []bool{false, true} {
		r, err := measureFleet(context.Background(), cfg, kill)
		if errors.Is(err, redisproc.ErrNotFound) && os.Getenv("CI") == "" {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.fetched != r.urls || r.boundedStop {
			t.Errorf("kill %v: %d of %d URLs fetched (stopped at the bound: %v)", kill, r.fetched, r.urls, r.boundedStop)
		}
		if !kill && r.duplicates != 0 {
			t.Errorf("%d URLs fetched twice without a fault, want none", r.duplicates)
		}
		if kill && r.duplicates > cfg.workers {
			t.Errorf("%d URLs fetched twice after the kill: more than the %d the killed process could have in flight", r.duplicates, cfg.workers)
		}
		if r.wireUnder != 0 {
			t.Errorf("kill %v: %d gaps under a host's interval at the wire (tightest %.3f of it)", kill, r.wireUnder, r.wireTightest)
		}
		// At the server, a gap can be shorter than at the wire by the delivery of a loaded machine (2
		// cores, the suite under -race, bursts of hosts leaving together); a quarter of the interval is
		// what no process sharing the schedule comes near, and what processes pacing alone would.
		if r.tightest >= 0 && r.tightest < 0.75 {
			t.Errorf("kill %v: two pages of a host reached the server %.3f of its interval apart", kill, r.tightest)
		}
		if r.roundTrips == 0 || r.reportedURLs == 0 {
			t.Errorf("kill %v: no round trips counted (%d for %d URLs)", kill, r.roundTrips, r.reportedURLs)
		}
		runs = append(runs, r)
	}
	var out bytes.Buffer
	writeFleetTable(&out, cfg, runs)
	if !strings.Contains(out.String(), "| 2 processes | 60 / 60 | 0 |") {
		t.Errorf("table:\n%s", out.String())
	}
}
