// Command queuebench measures head-of-line blocking: a crawl of many hosts, a few of them slow
// (robots.txt Crawl-delay) and a few refusing their first request (429 with Retry-After: 1, which the
// pacer retries), with a fixed number of workers, through Colly's queue with the pacer and
// through the pacer's host-aware queue (ext.Queue), against the ideal — the slowest host's own schedule.
//
//	go run ./cmd/queuebench            # 1 000 hosts, 20 slow (Crawl-delay 5 s), 10 refusing, 8 workers, 10 000 URLs
//	go run ./cmd/queuebench -short     # a quick version
//	go run ./cmd/queuebench -fleet 3   # the fleet's frontier: 3 processes × 8 workers on a private redis-server, 60 hosts × 20 pages, then one killed 4 s in
//	go run ./cmd/queuebench -fleet 3 -fleet-cluster 3 -fleet-hosts 1000 -fleet-pages 5   # the same on a local 3-master Redis Cluster, 1,000 hosts
//	go run ./cmd/queuebench -fleet 3 -freeze-for 2.2s -freezes 8 -runs 20   # one process paused 8 times for 2.2 s (20 hosts × 60 pages), then killed instead; 20 runs
//	go run ./cmd/queuebench -crashloop both    # a crawler SIGKILLed 50 times at random instants (5 ms – 4 s after each start) on SQLite, then on Redis
//
// Every host is served by one loopback server (127.0.0.1), told apart by the Host header.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/collypace/ext"
)

func main() {
	if isFleetWorker(os.Args) {
		os.Exit(fleetWorkerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	if isCrashWorker(os.Args) {
		os.Exit(crashWorkerMain(os.Stdin, os.Stderr))
	}
	flag.Usage = func() { // names the command, not go run's temporary build path (os.Args[0])
		fmt.Fprintf(flag.CommandLine.Output(), "usage: queuebench [flags]  (in a clone: go run ./cmd/queuebench [flags])\n")
		flag.PrintDefaults()
	}
	cfg := defaultConfig()
	flag.IntVar(&cfg.hosts, "hosts", cfg.hosts, "hosts in the crawl")
	flag.IntVar(&cfg.slow, "slow", cfg.slow, "hosts among them whose robots.txt asks for -crawl-delay")
	flag.DurationVar(&cfg.crawlDelay, "crawl-delay", cfg.crawlDelay, "Crawl-delay of the slow hosts")
	flag.IntVar(&cfg.refusing, "refusing", cfg.refusing, "hosts among the others that refuse their first request (429, Retry-After: 1)")
	flag.IntVar(&cfg.pages, "pages", cfg.pages, "URLs per host")
	flag.IntVar(&cfg.workers, "workers", cfg.workers, "workers of each queue")
	flag.DurationVar(&cfg.baseDelay, "base-delay", cfg.baseDelay, "pacer base delay (the fast hosts' interval)")
	flag.DurationVar(&cfg.bound, "bound", cfg.bound, "longest a run may take")
	short := flag.Bool("short", false, "a quick version: 100 hosts, 4 slow at 1 s, 3 refusing, 5 pages each")
	fleet := flag.Int("fleet", 0, "crawl the fleet's frontier with this many processes on a private redis-server (then the same with one killed), instead")
	fleetWorkers := flag.Int("fleet-workers", 8, "workers of each fleet process")
	lease := flag.Duration("lease", 0, "the fleet's host lease time (0: redisstore's default, 2 s)")
	killAt := flag.Duration("kill-at", 0, "when the kill crawl SIGKILLs one process (0: 4 s in; 1.06 s with -fleet-mixed)")
	mixed := flag.Bool("fleet-mixed", false, "fleet: the earlier shape, 200 hosts of three kinds (1 s, 400 ms, 200 ms), 10 pages each, instead of issue 27's 60 hosts × 20 pages at 500 ms")
	jitter := flag.Float64("fleet-jitter", ext.DefaultJitter, "fleet: the pacers' jitter, the library's default (0: intervals exact, where a burst of fast hosts read by one server can show gaps a few ms short at the server, never at the wire)")
	cluster := flag.Int("fleet-cluster", 0, "fleet: crawl on a local Redis Cluster of this many masters, the frontier in as many shards (0: one redis-server)")
	shards := flag.Int("fleet-shards", 0, "fleet: the frontier's shards, redisstore.WithFrontierShards (0: one, or one a master with -fleet-cluster)")
	fleetHosts := flag.Int("fleet-hosts", 0, "fleet: hosts of the default shape (0: 60)")
	fleetPages := flag.Int("fleet-pages", 0, "fleet: pages a host of the default shape (0: 20)")
	urlLen := flag.Int("fleet-url-len", 0, "fleet: pad each page's URL to this many characters (0: about 25)")
	gaps := flag.Bool("gaps", false, "fleet: describe on stderr each gap under a host's interval")
	freezeFor := flag.Duration("freeze-for", 0, "fleet: pause process 1 (SIGSTOP, then SIGCONT) this long, instead of the plain and kill crawls; 20 hosts × 60 pages at 500 ms")
	freezeAt := flag.Duration("freeze-at", 3*time.Second, "fleet: the first pause's start")
	freezes := flag.Int("freezes", 1, "fleet: how many pauses")
	freezeEvery := flag.Duration("freeze-every", 1500*time.Millisecond, "fleet: how long process 1 runs between two pauses")
	runs := flag.Int("runs", 1, "fleet, with -freeze-for: how many freeze crawls, each followed by a kill crawl")
	crash := flag.String("crashloop", "", "instead: a crawler SIGKILLed at a random instant after each start and started again at once, on a store: sqlite, redis or both")
	kills := flag.Int("kills", 50, "crash loop: how many processes, each killed")
	killMax := flag.Duration("kill-max", 4*time.Second, "crash loop: the latest instant a process is killed, after its start (the earliest: 5 ms)")
	floor := flag.Duration("floor", 300*time.Millisecond, "crash loop: the base delay")
	crashHosts := flag.Int("crash-hosts", 6, "crash loop: hosts crawled, one of them holding a Retry-After of 5 minutes")
	seed := flag.Uint64("seed", 0, "crash loop: the kill instants' seed (0: from the clock)")
	flag.Parse()
	if *crash != "" {
		stores := []string{*crash}
		if *crash == "both" {
			stores = []string{"sqlite", "redis"}
		}
		var rs []crashRun
		failed := false
		for _, store := range stores {
			cc := defaultCrashConfig(store)
			cc.kills, cc.killMax, cc.floor, cc.hosts = *kills, *killMax, *floor, *crashHosts
			if *seed != 0 {
				cc.seed = *seed
			}
			r, err := measureCrashLoop(context.Background(), cc)
			if err != nil {
				fmt.Fprintln(os.Stderr, "queuebench:", err)
				os.Exit(1)
			}
			rs = append(rs, r)
			if err := r.check(); err != nil {
				fmt.Fprintln(os.Stderr, "queuebench: crash loop on", store+":", err)
				failed = true
			}
		}
		writeCrashTable(os.Stdout, rs)
		if failed {
			os.Exit(1)
		}
		return
	}
	if *fleet > 0 && *freezeFor > 0 {
		fc := freezeFleetConfig(*fleet)
		fc.workers, fc.jitter = *fleetWorkers, *jitter
		if *lease > 0 {
			fc.leaseTTL = *lease
		}
		if *killAt > 0 {
			fc.killAt = *killAt
		}
		fc.freezes = freezeSpans(*freezes, *freezeFor, *freezeAt, *freezeEvery)
		if *gaps {
			fc.gapLog = os.Stderr
		}
		if err := runFreezeBench(context.Background(), fc, *runs, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
		return
	}
	if *fleet > 0 {
		fc := defaultFleetConfig(*fleet)
		if *mixed {
			fc = mixedFleetConfig(*fleet)
		}
		for i := range fc.classes {
			if *fleetHosts > 0 {
				fc.classes[i].Hosts = *fleetHosts
			}
			if *fleetPages > 0 {
				fc.classes[i].Pages = *fleetPages
			}
			fc.classes[i].URLLen = *urlLen
		}
		fc.cluster, fc.shards = *cluster, *shards
		fc.workers, fc.jitter = *fleetWorkers, *jitter
		if *lease > 0 {
			fc.leaseTTL = *lease
		}
		if *killAt > 0 {
			fc.killAt = *killAt
		}
		if *gaps {
			fc.gapLog = os.Stderr
		}
		run := runFleetBench
		if *fleetRobots > 0 {
			run = func(ctx context.Context, fc fleetConfig, out io.Writer) error {
				return runFleetRobots(ctx, fc, *fleetRobots, out)
			}
		}
		if err := run(context.Background(), fc, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(1)
		}
		return
	}
	if *short {
		cfg = shortConfig()
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
}

// run measures both queues, one after the other (on 2 cores, concurrent runs would slow each other),
// and prints the table.
func run(ctx context.Context, cfg config, out io.Writer) error {
	_, _ = fmt.Fprintf(out, "%d hosts (%d with Crawl-delay %v, %d refusing their first request), %d URLs each, %d workers, base delay %v; ideal %v\n\n",
		cfg.hosts, cfg.slow, cfg.crawlDelay, cfg.refusing, cfg.pages, cfg.workers, cfg.baseDelay, cfg.ideal())
	var rs []result
	for _, mode := range []mode{hostQueue, collyQueue} {
		r, err := measure(ctx, cfg, mode)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	writeTable(out, cfg, rs)
	return nil
}

// config is one benchmark's shape.
type config struct {
	hosts, slow, pages, workers int
	refusing                    int // hosts (after the slow ones) answering their first request 429 + Retry-After: 1
	crawlDelay, baseDelay       time.Duration
	bound                       time.Duration
}

func defaultConfig() config {
	return config{hosts: 1000, slow: 20, refusing: 10, pages: 10, workers: 8, crawlDelay: 5 * time.Second,
		baseDelay: 200 * time.Millisecond, bound: 4 * time.Minute}
}

func shortConfig() config {
	return config{hosts: 100, slow: 4, refusing: 3, pages: 5, workers: 4, crawlDelay: time.Second,
		baseDelay: 50 * time.Millisecond, bound: time.Minute}
}

// ideal is the slowest host's own schedule: its robots.txt, then one page every Crawl-delay.
func (c config) ideal() time.Duration {
	return time.Duration(c.pages) * c.crawlDelay
}
