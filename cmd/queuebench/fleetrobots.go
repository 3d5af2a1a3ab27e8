package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"
)

// The robots.txt fleet crawl (-fleet N -fleet-robots RUNS): the fleet crawl and the kill crawl with
// the processes reading robots.txt, RUNS times each, counting the robots.txt requests the servers saw
// (issue 35 item 3: one a host, whichever process crawls it and however hosts change hands).

var fleetRobots = flag.Int("fleet-robots", 0, "fleet: this many runs of the fleet crawl and the kill crawl with robots.txt read, counting robots.txt requests (issue 35: one a host)")

// fleetRobotsTxt is every host's robots.txt: no rule, no Crawl-delay, so the host's interval is its
// class's.
const fleetRobotsTxt = "User-agent: *\nAllow: /\n"

// runFleetRobots runs the robots.txt fleet crawl and prints a line a crawl and the totals.
func runFleetRobots(ctx context.Context, cfg fleetConfig, runs int, out io.Writer) error {
	cfg.robots = true
	hosts := cfg.hosts()
	_, _ = fmt.Fprintf(out, "%d processes × %d workers, %d hosts, robots.txt read; %d runs of the fleet crawl and the kill crawl (killed %v in)\n\n",
		cfg.procs, cfg.workers, hosts, runs, cfg.killAt)
	_, _ = fmt.Fprintln(out, "| run | crawl | robots.txt requests | ÷ hosts | pages fetched | duplicates | gaps under the interval | makespan |")
	_, _ = fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|")
	total := map[fleetFault]int{}
	worst := map[fleetFault]int{}
	for i := range runs {
		for _, f := range []fleetFault{faultNone, faultKill} {
			r, err := measureFleet(ctx, cfg, f)
			if err != nil {
				return err
			}
			name := "plain"
			if f == faultKill {
				name = "kill"
			}
			total[f] += r.robots
			worst[f] = max(worst[f], r.robots)
			_, _ = fmt.Fprintf(out, "| %d | %s | %d | %.2f | %d/%d | %d | %d/%d | %v |\n", i+1, name, r.robots, float64(r.robots)/float64(hosts),
				r.fetched, r.urls, r.duplicates, r.gapsUnder, r.gaps, r.makespan.Round(time.Millisecond))
		}
	}
	_, _ = fmt.Fprintf(out, "\nrobots.txt requests: plain crawls %d over %d runs (%.3f a host, at most %d in one); kill crawls %d (%.3f a host, at most %d in one)\n",
		total[faultNone], runs, float64(total[faultNone])/float64(runs*hosts), worst[faultNone],
		total[faultKill], float64(total[faultKill])/float64(runs*hosts), worst[faultKill])
	return nil
}
