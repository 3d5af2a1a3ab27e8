package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
)

// The fleet crawl (-fleet N): N real processes, each an ext.Queue with its workers on a private
// redis-server, crawl one frontier of many hosts, seeded by this process and started at once after
// the seeding (no sleep). What the servers saw is measured: the makespan against the ideal (a host's
// pages × its interval, the mean jitter included), each process's share of the departures, URLs
// fetched more than once or never, gaps under a host's interval, and the Redis round trips per URL.
// The kill crawl SIGKILLs one process mid-crawl: its hosts pass to the others when their leases run
// out, and the takeover time is how long after the kill the last of its hosts was sent to again. The
// freeze crawl (fleetfreeze.go) pauses one process instead (SIGSTOP, then SIGCONT), as a long GC, a
// VM migrated or a throttled container would.

// fleetConfig is the fleet crawl's shape.
type fleetConfig struct {
	procs, workers int
	classes        []hostClass
	leaseTTL       time.Duration
	cluster        int           // 0: one redis-server; n: a Redis Cluster of n masters
	shards         int           // the frontier's shards (0: one, or one a master on a cluster)
	jitter         float64       // the pacers' jitter (0: every interval exact)
	killAt         time.Duration // the kill crawl kills process 1 this long after its first page reached the servers
	freezes        []freezeSpan  // the freeze crawl pauses process 0 (fleetfreeze.go)
	bound          time.Duration
	gapLog         io.Writer // when set, each gap under the floor is described there
	robots         bool      // the processes read robots.txt (fleetrobots.go)
}

// defaultFleetConfig is issue 27's shape: 60 hosts every 500 ms (answering in 30 ms), 20 pages each;
// 8 workers a process; leases of redisstore's default (2 s); the kill 4 s in.
func defaultFleetConfig(procs int) fleetConfig {
	return fleetConfig{procs: procs, workers: 8, leaseTTL: redisstore.DefaultLeaseTTL, killAt: 4 * time.Second, bound: 2 * time.Minute,
		jitter: ext.DefaultJitter,
		classes: []hostClass{
			{Name: "host", Hosts: 60, Interval: 500 * time.Millisecond, Latency: 30 * time.Millisecond, Pages: 20},
		}}
}

// mixedFleetConfig is the earlier benchmark's shape (-fleet-mixed): 200 hosts, 10 slow (1 s, 80 ms
// answers), 40 at 400 ms (30 ms answers), 150 fast (200 ms, 5 ms answers), 10 pages each, the kill at
// 1.06 s, while the slow hosts' second pages are being answered.
func mixedFleetConfig(procs int) fleetConfig {
	return fleetConfig{procs: procs, workers: 8, leaseTTL: redisstore.DefaultLeaseTTL, killAt: 1060 * time.Millisecond, bound: 2 * time.Minute,
		jitter: ext.DefaultJitter,
		classes: []hostClass{
			{Name: "slow", Hosts: 10, Interval: time.Second, Latency: 80 * time.Millisecond, Pages: 10},
			{Name: "mid", Hosts: 40, Interval: 400 * time.Millisecond, Latency: 30 * time.Millisecond, Pages: 10},
			{Name: "fast", Hosts: 150, Interval: 200 * time.Millisecond, Latency: 5 * time.Millisecond, Pages: 10},
		}}
}

// ideal is the slowest host's own schedule: its pages × its interval, with the jitter's mean (half the
// fraction) on top.
func (c fleetConfig) ideal() time.Duration {
	var out time.Duration
	for _, hc := range c.classes {
		out = max(out, time.Duration(float64(time.Duration(hc.Pages)*hc.Interval)*(1+c.jitter/2)))
	}
	return out
}

// shardCount is the frontier's shards: cfg.shards, else one a master of the cluster, else one.
func (c fleetConfig) shardCount() int {
	if c.shards > 0 {
		return c.shards
	}
	return max(c.cluster, 1)
}

func (c fleetConfig) hosts() int {
	n := 0
	for _, hc := range c.classes {
		n += hc.Hosts
	}
	return n
}

// gapTolerance is how much shorter than its interval a gap between two pages of a host may be at the
// server before it counts as under the floor: the loopback's delivery, not the pacer.
const gapTolerance = 2 * time.Millisecond

// wireTolerance is how much shorter than its interval a gap between the wire instants of two pages
// of a host may be: this program's httptrace hook and the pacer's note the same instant one after the
// other.
const wireTolerance = time.Millisecond

// fleetRun is one fleet crawl's measurements.
type fleetRun struct {
	kill                 bool
	urls                 int
	fetched              int           // distinct URLs that arrived
	duplicates           int           // arrivals beyond the first of each URL
	makespan             time.Duration // from the start to the last page answered
	gapsUnder            int           // consecutive pages of a host closer than its interval (less gapTolerance)
	gaps                 int
	tightest             float64 // the smallest gap at the servers ÷ its interval (pages delivered in the other order than written, spaced at the wire, left out)
	wireUnder            int     // the same gaps between the instants the requests reached the wire, under the interval (less wireTolerance)
	wireTightest         float64
	roundTrips, commands int64     // of the processes that reported (not a killed one)
	reportedURLs         int       // the requests those processes sent
	cost, seedCost       redisCost // what the crawl (every page sent), and the seeding (every URL added), cost Redis
	seedTrips            int64     // round trips of the seeding AddURLs
	victimInFlight       int       // the killed process's requests the servers were serving at the kill
	victimSent           int       // the killed process's requests before the kill
	victimDuplicates     int       // duplicates whose first arrival was the killed process's, before the kill
	boundedStop          bool
	perProcess           []int              // pages each process sent, by arrivals
	victimHosts          int                // hosts the killed process was crawling, with pages left at the kill
	takeover             time.Duration      // from the kill to the first page of the last of those hosts sent by another process
	members              []audit.FleetStats // the figures of the processes that reported
	freeze               freezeFigures      // the freeze crawl's (fleetfreeze.go)
	victimBeyond         int                // duplicates not explained by the killed process's requests in flight at the kill
	robots               int                // robots.txt requests (fleetrobots.go), left out of the figures above
}

// runFleetBench runs the fleet crawl, then the kill crawl, and prints the table.
func runFleetBench(ctx context.Context, cfg fleetConfig, out io.Writer) error {
	_, _ = fmt.Fprintf(out, "%d processes × %d workers, %d hosts:", cfg.procs, cfg.workers, cfg.hosts())
	for _, hc := range cfg.classes {
		_, _ = fmt.Fprintf(out, " %d %s (every %v, answering in %v, %d pages)", hc.Hosts, hc.Name, hc.Interval, hc.Latency, hc.Pages)
	}
	_, _ = fmt.Fprintf(out, "; leases of %v; jitter %g; ideal %v\n\n", cfg.leaseTTL, cfg.jitter, cfg.ideal())
	var runs []fleetRun
	for _, f := range []fleetFault{faultNone, faultKill} {
		r, err := measureFleet(ctx, cfg, f)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	writeFleetTable(out, cfg, runs)
	return nil
}

// fleetFault is what happens to process 1 during a fleet crawl.
type fleetFault int

const (
	faultNone   fleetFault = iota
	faultKill              // SIGKILL cfg.killAt after process 1's first page
	faultFreeze            // SIGSTOP and SIGCONT by cfg.freezes
)

// measureFleet runs one fleet crawl on a fresh redis-server and site, with the fault.
func measureFleet(ctx context.Context, cfg fleetConfig, fault fleetFault) (fleetRun, error) {
	kill := fault == faultKill
	rd, err := startFleetRedis(ctx, cfg.cluster)
	if err != nil {
		return fleetRun{}, err
	}
	defer rd.close()
	site := startFleetSite(cfg.classes)
	defer site.srv.Close()
	urls := fleetURLs(cfg.classes)
	const prefix = "queuebench:"
	rd.prefix = prefix

	// Seed the frontier as a crawler would: AddURL on a Queue of the fleet.
	seedStart, err := rd.read(ctx)
	if err != nil {
		return fleetRun{}, err
	}
	st, rt, err := openCounted(rd.addr, rd.cluster, redisstore.WithFrontierShards(cfg.shardCount()), redisstore.WithPrefix(prefix), redisstore.WithLeaseTTL(cfg.leaseTTL))
	if err != nil {
		return fleetRun{}, err
	}
	defer st.Close()
	p := ext.NewPacer(ext.WithStore(st), ext.WithoutRobots())
	q := ext.NewQueue(p, 1)
	before := rt.trips.Load()
	for _, u := range urls {
		if err := q.AddURL(u); err != nil {
			return fleetRun{}, err
		}
	}
	seedTrips := rt.trips.Load() - before
	if err := p.Close(); err != nil {
		return fleetRun{}, err
	}
	// The fleet starts at once: no sleep after the seeding.
	if slowlogOn() {
		if err := rd.startSlowlog(ctx); err != nil {
			return fleetRun{}, err
		}
	}
	crawlStart, err := rd.read(ctx)
	if err != nil {
		return fleetRun{}, err
	}

	exe, err := os.Executable()
	if err != nil {
		return fleetRun{}, err
	}
	trails, err := os.MkdirTemp("", "queuebench-trails")
	if err != nil {
		return fleetRun{}, err
	}
	defer os.RemoveAll(trails)
	start := time.Now()
	results := make([]*fleetResult, cfg.procs)
	errs := make([]error, cfg.procs)
	cmds := make([]*exec.Cmd, cfg.procs)
	var wg sync.WaitGroup
	for i := range cfg.procs {
		spec := fleetSpec{Index: i + 1, Redis: rd.addr, Cluster: rd.cluster, Shards: cfg.shardCount(), Prefix: prefix, Site: site.srv.Listener.Addr().String(),
			Workers: cfg.workers, LeaseTTL: cfg.leaseTTL, Jitter: cfg.jitter, Classes: cfg.classes, Bound: cfg.bound,
			Audit: filepath.Join(trails, fmt.Sprintf("audit%d.jsonl", i+1)), Robots: cfg.robots}
		in, _ := json.Marshal(spec)
		cmd := exec.CommandContext(ctx, exe, fleetWorkerFlag)
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			return fleetRun{}, err
		}
		cmds[i] = cmd
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				if !(kill && i == 0) {
					errs[i] = fmt.Errorf("fleet process %d: %w: %s", i+1, err, strings.TrimSpace(stderr.String()))
				}
				return
			}
			var res fleetResult
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				errs[i] = fmt.Errorf("fleet process %d: reading its result: %w", i+1, err)
				return
			}
			results[i] = &res
		})
	}
	var killedAt time.Time
	var frozen []freezeWindow
	switch fault {
	case faultKill:
		// From process 1's first page at the servers: a loaded machine may start it late, and a kill
		// before it sent anything would test no takeover.
		site.waitFirst(ctx, 1, start.Add(cfg.bound))
		select {
		case <-time.After(cfg.killAt):
		case <-ctx.Done():
		}
		killedAt = time.Now()
		_ = cmds[0].Process.Kill() // SIGKILL
	case faultFreeze:
		frozen = freeze(ctx, cmds[0].Process, start, cfg.freezes)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fleetRun{}, err
		}
	}
	crawlEnd, err := rd.read(ctx)
	if err != nil {
		return fleetRun{}, err
	}
	if slowlogOn() {
		if err := rd.writeSlowlog(ctx, os.Stderr, len(site.log())); err != nil {
			return fleetRun{}, err
		}
	}
	wire := map[int]map[string]time.Time{} // process → URL → when it wrote it
	for i, res := range results {
		if res != nil {
			wire[i+1] = res.Wire
		}
	}
	r := analyzeFleet(cfg, site.log(), wire, start, killedAt)
	if fault == faultFreeze {
		var started1 map[string]time.Time // when the paused process handed its requests to the network
		if results[0] != nil {
			started1 = results[0].Started
		}
		r.freeze = analyzeFreeze(site.log(), frozen, started1, filepath.Join(trails, "audit1.jsonl"))
	}
	for _, res := range results {
		if res != nil {
			r.members = append(r.members, res.Fleet)
		}
	}
	r.kill, r.urls, r.seedTrips = kill, len(urls), seedTrips
	r.seedCost = costOf(len(urls), since(crawlStart, seedStart))
	r.cost = costOf(len(site.log()), since(crawlEnd, crawlStart))
	if r.cost.seenBytes, r.cost.seenKeys, err = rd.seenBytes(ctx); err != nil {
		return fleetRun{}, err
	}
	r.cost.urls = len(urls)
	for _, res := range results {
		if res != nil {
			r.roundTrips += res.RoundTrips
			r.commands += res.Commands
			r.reportedURLs += int(res.Sent)
		}
	}
	r.boundedStop = time.Since(start) >= cfg.bound
	return r, nil
}

// analyzeFleet measures a crawl from the servers' log.
func analyzeFleet(cfg fleetConfig, log []fleetArrival, wireBy map[int]map[string]time.Time, start, killedAt time.Time) fleetRun {
	wire := map[string]time.Time{} // URL → when it was written (by the process that wrote it last)
	for _, m := range wireBy {
		for u, at := range m {
			if at.After(wire[u]) {
				wire[u] = at
			}
		}
	}
	wireOf := func(a fleetArrival) time.Time { return wireBy[a.worker][a.url] }
	r := fleetRun{tightest: -1, wireTightest: -1, perProcess: make([]int, cfg.procs)}
	count := map[string]int{}
	first := map[string]fleetArrival{}
	byHost := map[string][]time.Time{}
	byHostW := map[string][]fleetArrival{} // the same, with who sent them
	for _, a := range log {
		if strings.HasSuffix(a.url, "/robots.txt") {
			r.robots++
			continue
		}
		count[a.url]++
		if _, ok := first[a.url]; !ok {
			first[a.url] = a
		}
		if a.worker >= 1 && a.worker <= cfg.procs {
			r.perProcess[a.worker-1]++
		}
		host := strings.TrimPrefix(a.url, "http://")
		host = host[:strings.IndexByte(host, '/')]
		byHost[host] = append(byHost[host], a.at)
		byHostW[host] = append(byHostW[host], a)
		if end := a.done.Sub(start); end > r.makespan {
			r.makespan = end
		}
		if !killedAt.IsZero() && a.worker == 1 && a.at.Before(killedAt) {
			r.victimSent++
			if a.done.IsZero() || a.done.After(killedAt.Add(-ackSlack)) { // answered but not yet marked done: in flight
				r.victimInFlight++
			}
		}
	}
	r.fetched = len(count)
	r.victimHosts, r.takeover = takeoverOf(log, killedAt)
	for u, n := range count {
		r.duplicates += n - 1
		if f := first[u]; n > 1 && !killedAt.IsZero() && f.worker == 1 && f.at.Before(killedAt) {
			r.victimDuplicates += n - 1
		}
		// A duplicate the kill explains: its first arrival was the killed process's request in flight
		// at the kill (served across it, written before it and read after, or answered within ackSlack
		// of it and not yet marked done in the frontier).
		if f := first[u]; n > 1 && !(f.worker == 1 && !killedAt.IsZero() && (f.done.IsZero() || f.done.After(killedAt.Add(-ackSlack)))) {
			r.victimBeyond += n - 1
		}
	}
	for c, hc := range cfg.classes {
		for i := range hc.Hosts {
			at := byHost[fleetHost(c, i)]
			for j := 1; j < len(at); j++ {
				gap := at[j].Sub(at[j-1])
				r.gaps++
				if gap < hc.Interval-gapTolerance {
					r.gapsUnder++
					if cfg.gapLog != nil {
						w := byHostW[fleetHost(c, i)]
						atWire := "not reported: a killed process sent one"
						if t0, t1 := wireOf(w[j-1]), wireOf(w[j]); !t0.IsZero() && !t1.IsZero() {
							atWire = t1.Sub(t0).String() + " at the wire"
						}
						_, _ = fmt.Fprintf(cfg.gapLog, "%s: pages %v apart (interval %v; %s), sent by processes %d then %d, the second %v after the start\n",
							fleetHost(c, i), gap, hc.Interval, atWire, w[j-1].worker, w[j].worker, w[j].at.Sub(start).Round(time.Millisecond))
					}
				}
				// Two pages spaced by an interval at the wire and delivered in the other order (the first
				// written was held up on its way: its sender paused, or a loaded machine) say nothing
				// about the pacing at the server: not counted in the tightest.
				w := byHostW[fleetHost(c, i)]
				t0, t1 := wireOf(w[j-1]), wireOf(w[j])
				reordered := !t0.IsZero() && !t1.IsZero() && t0.Sub(t1) >= hc.Interval-wireTolerance
				if ratio := float64(gap) / float64(hc.Interval); !reordered && (r.tightest < 0 || ratio < r.tightest) {
					r.tightest = ratio
				}
			}
		}
	}
	for c, hc := range cfg.classes {
		for i := range hc.Hosts {
			var at []time.Time
			for p := range hc.Pages {
				if t, ok := wire[pageURL(hc, c, i, p)]; ok {
					at = append(at, t)
				}
			}
			slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
			for j := 1; j < len(at); j++ {
				gap := at[j].Sub(at[j-1])
				if gap < hc.Interval-wireTolerance {
					r.wireUnder++
				}
				if ratio := float64(gap) / float64(hc.Interval); r.wireTightest < 0 || ratio < r.wireTightest {
					r.wireTightest = ratio
				}
			}
		}
	}
	return r
}

// takeoverOf measures the takeover after a kill at killedAt (zero: none): the hosts process 1 (the
// victim) sent the last page to before the kill and that had pages after it, and how long after the
// kill the last of them got its first page from another process.
func takeoverOf(log []fleetArrival, killedAt time.Time) (hosts int, takeover time.Duration) {
	if killedAt.IsZero() {
		return 0, 0
	}
	last := map[string]int{}          // host → the process that sent its last page before the kill
	resumed := map[string]time.Time{} // host → its first page after the kill, by another process
	for _, a := range log {           // by arrival
		host := strings.TrimPrefix(a.url, "http://")
		host = host[:strings.IndexByte(host, '/')]
		if a.at.Before(killedAt) {
			last[host] = a.worker
			continue
		}
		if _, ok := resumed[host]; !ok && a.worker != 1 {
			resumed[host] = a.at
		}
	}
	for host, w := range last {
		if w != 1 {
			continue
		}
		if at, ok := resumed[host]; ok { // else nothing was left to send (a page lost shows in URLs fetched)
			hosts++
			takeover = max(takeover, at.Sub(killedAt))
		}
	}
	return hosts, takeover
}

// shareSpread is how far the process furthest from an even share of the departures is from it, as a
// fraction of that share (0.25: a process sent 25% more or fewer than departures ÷ processes).
func shareSpread(per []int) float64 {
	total := 0
	for _, n := range per {
		total += n
	}
	if total == 0 || len(per) == 0 {
		return 0
	}
	even := float64(total) / float64(len(per))
	spread := 0.0
	for _, n := range per {
		spread = max(spread, math.Abs(float64(n)-even)/even)
	}
	return spread
}

// writeFleetTable prints the fleet crawls as a Markdown table, then each process's figures.
func writeFleetTable(out io.Writer, cfg fleetConfig, runs []fleetRun) {
	ideal := cfg.ideal()
	_, _ = fmt.Fprintln(out, "| crawl | URLs fetched | duplicates | makespan | ÷ ideal | pages by process | furthest from an even share | takeover after the kill | gaps under the floor | tightest gap ÷ interval (at the wire) | Redis round trips per URL (commands) |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		name := fmt.Sprintf("%d processes", cfg.procs)
		takeover := "—"
		if r.kill {
			name = fmt.Sprintf("%d processes, one SIGKILLed %v after its first page (%d of its requests in flight at the servers; %d of the duplicates its)", cfg.procs, cfg.killAt, r.victimInFlight, r.victimDuplicates)
			takeover = fmt.Sprintf("%v (its %d hosts)", r.takeover.Round(10*time.Millisecond), r.victimHosts)
		}
		makespan := r.makespan.Round(10 * time.Millisecond).String()
		if r.boundedStop {
			makespan = "> " + cfg.bound.String() + " (stopped at the bound)"
		}
		perURL, cmdsPerURL := 0.0, 0.0
		if r.reportedURLs > 0 {
			perURL, cmdsPerURL = float64(r.roundTrips)/float64(r.reportedURLs), float64(r.commands)/float64(r.reportedURLs)
		}
		spread := "—"
		if !r.kill {
			spread = fmt.Sprintf("%.0f%%", 100*shareSpread(r.perProcess))
		}
		_, _ = fmt.Fprintf(out, "| %s | %d / %d | %d | %s | %.3f | %s | %s | %s | %d of %d | %.3f (%.3f) | %.2f (%.2f) + %.2f to add |\n",
			name, r.fetched, r.urls, r.duplicates, makespan, float64(r.makespan)/float64(ideal), strings.Trim(strings.Join(strings.Fields(fmt.Sprint(r.perProcess)), " / "), "[]"),
			spread, takeover, r.gapsUnder, r.gaps, r.tightest, r.wireTightest, perURL, cmdsPerURL, float64(r.seedTrips)/float64(r.urls))
	}
	writeCostTable(out, cfg, runs)
	for _, r := range runs {
		for _, m := range r.members {
			_, _ = fmt.Fprintf(out, "\n- kill %v, member %s: leased %d, gave up %d over its share, took over %d, handed %d requests again", r.kill, m.Member, m.Leased, m.Stolen, m.TakenOver, m.Resent)
		}
	}
	_, _ = fmt.Fprintln(out)
}
