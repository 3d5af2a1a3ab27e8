// Command costbench measures what the pacer costs per request: the same crawl of local hosts that
// answer at once, with bare Colly and with Colly paced by ext.AdaptivePacing, run in alternation, and
// the CPU time (user + sys of the whole process, servers included), allocations and bytes allocated
// per request of each, their medians and the pacer's own share.
//
//	go run ./cmd/costbench             # 20 000 pages over 100 hosts, 7 runs of each
//	go run ./cmd/costbench -short      # a quick version: 2 000 pages over 20 hosts, 2 runs of each
//
// Both crawls use Colly in Async mode with LimitRule{DomainGlob: "*", Parallelism: 64} and one HTTP
// transport keeping 64 idle connections per host; the paced one adds AdaptivePacing(c,
// WithBaseDelay(0), WithoutRobots(), WithJitter(0), WithMaxInFlight(64)) on that transport.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

func main() {
	flag.Usage = func() { // names the command, not go run's temporary build path (os.Args[0])
		fmt.Fprintf(flag.CommandLine.Output(), "usage: costbench [flags]  (in a clone: go run ./cmd/costbench [flags])\n")
		flag.PrintDefaults()
	}
	cfg := defaultConfig()
	flag.IntVar(&cfg.pages, "pages", cfg.pages, "pages in one crawl")
	flag.IntVar(&cfg.hosts, "hosts", cfg.hosts, "local hosts they are spread over (one listener each)")
	flag.IntVar(&cfg.runs, "runs", cfg.runs, "crawls of each kind, in alternation (after one warm-up of each)")
	flag.DurationVar(&cfg.bound, "bound", cfg.bound, "longest one crawl may take")
	flag.DurationVar(&cfg.baseDelay, "base-delay", 0, "the paced crawl's WithBaseDelay: above 0, every hop is traced for its wire instant "+
		"and requests to a host wait their turn (the bare crawl has no delay)")
	short := flag.Bool("short", false, "a quick version: 2 000 pages over 20 hosts, 2 runs of each")
	flag.Parse()
	if *short {
		base := cfg.baseDelay
		cfg = shortConfig()
		cfg.baseDelay = base
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "costbench:", err)
		os.Exit(1)
	}
}

// config is one benchmark's shape.
type config struct {
	pages, hosts, runs int
	bound              time.Duration
	baseDelay          time.Duration // the paced crawl's base delay
}

func defaultConfig() config {
	return config{pages: 20_000, hosts: 100, runs: 7, bound: 2 * time.Minute}
}

func shortConfig() config {
	return config{pages: 2_000, hosts: 20, runs: 2, bound: time.Minute}
}

// run serves the hosts, warms both crawls up, measures cfg.runs of each in alternation (bare first,
// then paced first, so neither always follows the other) and prints the table.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.pages < 1 || cfg.hosts < 1 || cfg.runs < 1 {
		return fmt.Errorf("pages, hosts and runs must be at least 1")
	}
	hosts, err := startHosts(cfg.hosts)
	if err != nil {
		return err
	}
	defer hosts.close()
	_, _ = fmt.Fprintf(out, "%d pages over %d local hosts, %d runs of each (after a warm-up), paced with a base delay of %v, %s %s/%s, GOMAXPROCS=%d\n\n",
		cfg.pages, cfg.hosts, cfg.runs, cfg.baseDelay, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
	var bare, paced []sample
	for i := -1; i < cfg.runs; i++ {
		order := []bool{false, true}
		if i%2 != 0 {
			order = []bool{true, false}
		}
		for _, isPaced := range order {
			s, err := crawl(ctx, cfg, hosts, isPaced)
			if err != nil {
				return err
			}
			if i < 0 {
				continue // the warm-up: connections, the runtime's caches
			}
			if isPaced {
				paced = append(paced, s)
			} else {
				bare = append(bare, s)
			}
		}
	}
	writeTable(out, cfg, summarize(bare), summarize(paced), pairedRatio(bare, paced))
	return nil
}
