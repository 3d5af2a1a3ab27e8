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
	if isCrashWorker(os.Args) {
		os.Exit(crashWorkerMain(os.Stdin, os.Stderr))
	}
	os.Exit(m.Run())
}

// A small fleet crawl, then the same with one process SIGKILLed mid-crawl, measured at the servers:
// every URL fetched, exactly once without the kill, and with it no more duplicates than the killed
// process could have had in flight (one a worker); no gap under a host's interval at the wire either
// way; the killed process's hosts resumed within seconds; and the table printed. Other times are not
// asserted (2 noisy cores): the benchmark program reports them.
func TestFleetCrawlFetchesEveryURL(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet crawl starts processes and a redis-server")
	}
	cfg := fleetConfig{procs: 2, workers: 2, leaseTTL: 600 * time.Millisecond, killAt: 700 * time.Millisecond, bound: time.Minute,
		classes: []hostClass{
			{Name: "slow", Hosts: 8, Interval: 200 * time.Millisecond, Latency: 10 * time.Millisecond, Pages: 8},
			{Name: "fast", Hosts: 4, Interval: 120 * time.Millisecond, Latency: 2 * time.Millisecond, Pages: 4},
		}}
	var gapLog bytes.Buffer
	cfg.gapLog = &gapLog
	var runs []fleetRun
	for _, kill := range []bool{false, true} {
		fault := faultNone
		if kill {
			fault = faultKill
		}
		r, err := measureFleet(context.Background(), cfg, fault)
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
		if kill && (r.duplicates > cfg.workers || r.victimBeyond > 0) {
			t.Errorf("%d URLs fetched twice after the kill, %d of them not the killed process's requests in flight: want at most %d, none", r.duplicates, r.victimBeyond, cfg.workers)
		}
		if r.wireUnder != 0 {
			t.Errorf("kill %v: %d gaps under a host's interval at the wire (tightest %.3f of it)", kill, r.wireUnder, r.wireTightest)
		}
		// At the server, a gap can be shorter than at the wire by the delivery of a loaded machine: the
		// server reads a request when its handler runs, and at the crawl's start (a dozen connections
		// opened at once, 2 cores, the suite under -race) one can run 60 ms after the next (CI: 0.706
		// of a 200 ms interval, 201 ms at the wire). The wire check above is the precise one; this one
		// catches processes that do not share the schedule, whose pages interleave at random (of the
		// 80-odd gaps, the tightest comes near 0), and a wire instant stamped half an interval early.
		if r.tightest >= 0 && r.tightest < 0.5 {
			t.Errorf("kill %v: two pages of a host reached the server %.3f of its interval apart:\n%s", kill, r.tightest, gapLog.String())
		}
		// Issue 27: the killed process's hosts are resumed by the others within the lease (600 ms) and
		// the liveness of a pending departure (1 s at least), not after redisstore's 30 s pendingBound;
		// the bound here leaves a loaded machine room.
		if kill && (r.victimHosts == 0 || r.takeover > 4*time.Second) {
			t.Errorf("the killed process's %d hosts were resumed %v after the kill, want within a few seconds", r.victimHosts, r.takeover)
		}
		if kill {
			t.Logf("the killed process's %d hosts resumed %v after the kill; %d duplicates, %d in flight", r.victimHosts, r.takeover, r.duplicates, r.victimInFlight)
		}
		if len(r.members) == 0 || r.members[0].Leased == 0 {
			t.Errorf("kill %v: no member's figures reported: %+v", kill, r.members)
		}
		if r.roundTrips == 0 || r.reportedURLs == 0 {
			t.Errorf("kill %v: no round trips counted (%d for %d URLs)", kill, r.roundTrips, r.reportedURLs)
		}
		checkCost(t, r, 1)
		runs = append(runs, r)
	}
	var out bytes.Buffer
	writeFleetTable(&out, cfg, runs)
	if !strings.Contains(out.String(), "| 2 processes | 80 / 80 | 0 |") {
		t.Errorf("table:\n%s", out.String())
	}
}

// checkCost checks that Redis's counters were read on each of the nodes: every page cost scripts, the
// nodes' CPU, and the seen set holds every URL in some bytes.
func checkCost(t *testing.T, r fleetRun, nodes int) {
	t.Helper()
	c := r.cost
	if c.pages < r.fetched || c.scripts < int64(c.pages) || c.commands < c.scripts || len(c.cpu) != nodes || c.cpuPerPage() <= 0 {
		t.Errorf("Redis's counters: %d pages, %d script calls, %d commands, CPU %v s by node: want a script call a page at least, on %d nodes", c.pages, c.scripts, c.commands, c.cpu, nodes)
	}
	if c.seenBytes < int64(c.urls) || c.seenKeys == 0 || r.seedCost.scripts < int64(r.urls) {
		t.Errorf("seen set: %d bytes in %d keys for %d URLs; seeding %d script calls: want them measured", c.seenBytes, c.seenKeys, c.urls, r.seedCost.scripts)
	}
}

// Issue 35: the fleet crawl on a local Redis Cluster of three masters, the frontier in three shards:
// every URL fetched once, no gap under a host's interval at the wire, and each node's counters read.
func TestFleetCrawlOnARedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet crawl starts processes and a Redis Cluster")
	}
	cfg := fleetConfig{procs: 2, workers: 2, leaseTTL: 600 * time.Millisecond, bound: time.Minute, cluster: 3,
		classes: []hostClass{{Name: "host", Hosts: 12, Interval: 150 * time.Millisecond, Latency: 5 * time.Millisecond, Pages: 5, URLLen: 90}}}
	r, err := measureFleet(context.Background(), cfg, faultNone)
	if errors.Is(err, redisproc.ErrNotFound) && os.Getenv("CI") == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.fetched != r.urls || r.duplicates != 0 || r.boundedStop {
		t.Errorf("%d of %d URLs fetched, %d twice (stopped at the bound: %v): want every one once", r.fetched, r.urls, r.duplicates, r.boundedStop)
	}
	if r.wireUnder != 0 {
		t.Errorf("%d gaps under a host's interval at the wire (tightest %.3f of it)", r.wireUnder, r.wireTightest)
	}
	checkCost(t, r, 3)
	var out bytes.Buffer
	writeFleetTable(&out, cfg, []fleetRun{r})
	t.Logf("\n%s", out.String())
}

// Issue 33, item 1: a fleet member paused (SIGSTOP, then SIGCONT) for longer than its leases, once, and
// then repeatedly for about one lease: once resumed it sends no URL another member has sent since
// (its leases passed on; the store refuses its departures under them), every URL is fetched, no
// duplicate beyond its requests in flight at a pause, no gap under a host's interval at the wire, and
// its audit trail says it lost leases. The 20-run version with issue 33's shape is queuebench's
// (-freeze-for 20s, -freeze-for 2.2s -freezes 8, -runs 20); its figures are in BENCHMARKS.md.
func TestFleetMemberPausedSendsNothingStale(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet crawl starts processes and a redis-server")
	}
	for _, tc := range []struct {
		name  string
		spans []freezeSpan
	}{
		{"once, longer than a lease", freezeSpans(1, 1500*time.Millisecond, 800*time.Millisecond, 0)},
		{"three times, about one lease", freezeSpans(3, 700*time.Millisecond, 600*time.Millisecond, 500*time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fleetConfig{procs: 2, workers: 2, leaseTTL: 600 * time.Millisecond, bound: time.Minute, freezes: tc.spans,
				classes: []hostClass{{Name: "host", Hosts: 6, Interval: 200 * time.Millisecond, Latency: 10 * time.Millisecond, Pages: 16}}}
			var gapLog bytes.Buffer
			cfg.gapLog = &gapLog
			r, err := measureFleet(context.Background(), cfg, faultFreeze)
			if errors.Is(err, redisproc.ErrNotFound) && os.Getenv("CI") == "" {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", describeRun(r, faultFreeze))
			f := r.freeze
			if f.pauses != len(tc.spans) {
				t.Fatalf("%d pauses, want %d (process 1 ended first?)", f.pauses, len(tc.spans))
			}
			if r.fetched != r.urls || r.boundedStop {
				t.Errorf("%d of %d URLs fetched (stopped at the bound: %v)", r.fetched, r.urls, r.boundedStop)
			}
			if f.staleSends != 0 || f.beyond != 0 {
				t.Errorf("the resumed process sent %d URLs another had sent; %d duplicates beyond its requests in flight at a pause: want none\n%s", f.staleSends, f.beyond, strings.Join(f.unexplained, "\n"))
			}
			if r.wireUnder != 0 {
				t.Errorf("%d gaps under a host's interval at the wire (tightest %.3f of it)", r.wireUnder, r.wireTightest)
			}
			if r.tightest >= 0 && r.tightest < 0.5 { // the server's reading of a loaded machine: see TestFleetCrawlFetchesEveryURL
				t.Errorf("two pages of a host reached the server %.3f of its interval apart:\n%s", r.tightest, gapLog.String())
			}
			if f.leasesLost == 0 {
				t.Error("the paused process's trail has no fleet_lease_lost: its leases ran out while it was paused")
			}
		})
	}
}

// Issue 33, item 2: a crawler SIGKILLed at random instants after each start and started again at once
// keeps the floor at the server across restarts, on SQLite and on Redis, holds a host's Retry-After
// window through them, and its store opens every time. A gap short at the server fails only when the
// two requests' wire instants are short too (or unknown). The 50-kill version (kills at 5 ms – 4 s)
// is queuebench's (-crashloop both); its figures are in BENCHMARKS.md.
func TestCrashLoopKeepsTheFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash loop starts processes")
	}
	for _, store := range []string{"sqlite", "redis"} {
		t.Run(store, func(t *testing.T) {
			cfg := defaultCrashConfig(store)
			cfg.kills, cfg.hosts, cfg.killMax, cfg.seed = 6, 4, 1500*time.Millisecond, 33
			cfg.openWithin = time.Minute // a loaded machine may start a process slowly: only a failure to open counts
			r, err := measureCrashLoop(context.Background(), cfg)
			if errors.Is(err, redisproc.ErrNotFound) && os.Getenv("CI") == "" {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			writeCrashTable(&out, []crashRun{r})
			t.Logf("\n%s", out.String())
			if err := r.check(); err != nil {
				t.Error(err)
			}
			if r.gaps == 0 || r.opened == 0 {
				t.Errorf("%d gaps, %d processes opened the store: the loop crawled nothing", r.gaps, r.opened)
			}
			if store == "sqlite" && r.restartHeld == 0 {
				t.Error("no restart_held in the trails: no restart after a kill was held")
			}
		})
	}
}
