// Command pacebench benchmarks ext.AdaptivePacing against Colly's static LimitRule{Delay} on local
// scenario servers (127.0.0.1 only), measuring at the servers: the arrival times each one logs.
//
// It runs the six scenarios of issue 4 (latency, hidden capacity, Retry-After as an HTTP-date from a
// skewed clock, robots.txt Crawl-delay, an outage, ten hosts at once) and the five of issue 9 (a fleet
// of three processes on one redisstore at a hidden capacity and at a floor, an outage under a context
// deadline, a steady capacity, a capacity that halves) and the eight of issue 15 (a server that queues
// instead of refusing, with one worker and with four; limiters without burst, as nginx limit_req,
// steady, halving, answering 503 without Retry-After, shared by a fleet and over a grid of rates and
// Retry-After values; an enforced quota of 10 per 5 s), and step-up-nb (a capacity without burst that
// rises from 2/s to 4/s, issue 26). In each, static Colly and the adaptive pacer
// crawl the same pages of identical servers side by side, each on its own servers. The fleet scenarios
// re-execute this program as worker processes and start a private redis-server (it must be installed).
// It prints a Markdown table, checks the issue's targets, writes the generated section of
// BENCHMARKS.md and renders a chart per scenario (limiter-grid, of many hosts, has a table instead).
//
// Issue 26 adds, run only when asked: real rate limiters (-real, or by name), nginx limit_req without
// burst at 4/s with its default 503 and with 429 + Retry-After: 1, and HAProxy's sliding window
// http_req_rate(1s) at 4/s with 429 + Retry-After: 1, each started as a child process with a private
// configuration in a temporary directory, in front of a scenario host without limits, and measured from
// its own access log (a scenario whose binary is missing is skipped, saying so); the long version of
// every limiter shape (-long: at least 3 minutes of crawl per host, with the steady state from 30 s on);
// and refusals that speed does not cause (-scenarios rate-independent).
//
// Issue 32 adds, run only when asked (-scenarios low-rate, or one of them by name): limiters without
// burst at 0.5, 1 and 2 requests/s (nginx's default 503, nginx with 429 + Retry-After: 1, HAProxy's
// sliding window with 429 + Retry-After: 1), simulated by the loopback hosts and real, crawled from
// floors of 10, 50 and 100 ms by one process and by a fleet of three, 3 minutes of pages a cell, with a
// table of what the servers saw per cell (lowrate.go).
//
//	go run ./cmd/pacebench                         # the full suite, about 11 minutes
//	go run ./cmd/pacebench -short                  # the quick version, a few seconds a scenario
//	go run ./cmd/pacebench -scenarios outage,capacity
//	go run ./cmd/pacebench -real                   # nginx and HAProxy, about 2 minutes
//	go run ./cmd/pacebench -scenarios real-haproxy # one of them
//	go run ./cmd/pacebench -long -md LONG.md       # every limiter shape for 3+ minutes a host, 30 to 50 minutes
//	go run ./cmd/pacebench -long -real             # the real limiters only, 3+ minutes each
//	go run ./cmd/pacebench -scenarios low-rate     # issue 32's grid: six scenarios of 3 to 7 minutes
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// options are the command-line flags.
type options struct {
	out       string // chart directory; "" for none
	md        string // Markdown file whose generated section is updated; "" for none
	scenarios string
	short     bool
	long      bool   // the long version of every limiter shape (issue 26)
	real      bool   // the real-limiter scenarios (nginx, HAProxy)
	format    string // chart format: svg or png
	audit     string // directory for the adaptive pacer's audit trails; "" for none
	arrivals  string // directory for the arrivals each server logged; "" for none
}

func main() {
	if isWorker(os.Args) {
		os.Exit(workerMain(os.Stdin, os.Stdout, os.Stderr))
	}
	o, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "pacebench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pacebench:", err)
		stop()
		os.Exit(1)
	}
}

// parseFlags parses the flags. A short run or a subset of scenarios leaves BENCHMARKS.md and the
// committed charts alone unless -md or -out is given explicitly.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	fs.StringVar(&o.out, "out", "docs/bench", "directory for the charts, one per scenario (\"\" for none)")
	fs.StringVar(&o.md, "md", "BENCHMARKS.md", "Markdown file whose generated section (between the pacebench markers) is replaced (\"\" for none)")
	fs.StringVar(&o.scenarios, "scenarios", "all", "scenarios to run, comma-separated: all (the loopback scenarios), real (the real limiters), low-rate (issue 32's grid, loopback and real) or names among "+scenarioNames(sizeFull))
	fs.BoolVar(&o.short, "short", false, "run the quick version of each scenario (a few seconds each)")
	fs.BoolVar(&o.long, "long", false, "run the long version (at least 3 minutes a host) of every limiter shape, real limiters included, or of those named by -scenarios: "+scenarioNames(sizeLong))
	fs.BoolVar(&o.real, "real", false, "run the scenarios served by real rate limiters (nginx, HAProxy; skipped where not installed), besides those named by -scenarios")
	fs.StringVar(&o.format, "format", "svg", "chart format: svg or png")
	fs.StringVar(&o.audit, "audit", "", "directory to write the adaptive pacer's audit trail of each scenario to (JSON lines)")
	fs.StringVar(&o.arrivals, "arrivals", "", "directory to write the arrivals each host's server (or limiter) logged to, a file per scenario, crawler and host")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./cmd/pacebench [flags]\n\n"+
			"Runs Colly's static LimitRule and ext.AdaptivePacing side by side on local scenario servers and\n"+
			"measures at the servers. Prints a Markdown table; a full run of every scenario also updates\n"+
			"BENCHMARKS.md and the charts (a -short run or a subset does only when -md or -out is given).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.format != "svg" && o.format != "png" {
		return o, fmt.Errorf("-format must be svg or png, not %q", o.format)
	}
	if o.short && o.long {
		return o, errors.New("-short and -long exclude each other")
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if o.real {
		if explicit["scenarios"] {
			o.scenarios += "," + realSetName
		} else {
			o.scenarios = realSetName
		}
	}
	if o.short || o.long || strings.TrimSpace(o.scenarios) != "all" {
		if !explicit["md"] {
			o.md = ""
		}
		if !explicit["out"] {
			o.out = ""
		}
	}
	return o, nil
}

// ScenarioResult is one scenario's two crawls and their metrics.
type ScenarioResult struct {
	Scenario Scenario
	Runs     [2]*Run       // indexed by Mode
	Metrics  [2][]*Metrics // indexed by Mode, then group
	Wall     time.Duration // both crawls, side by side
}

// runScenario crawls the scenario with static Colly and the adaptive pacer at the same time, each on
// its own servers, and measures both. The two crawls share nothing but the two CPU cores; together
// they send at most a few dozen requests a second, so they barely contend for them.
func runScenario(ctx context.Context, sc Scenario) (*ScenarioResult, error) {
	r := &ScenarioResult{Scenario: sc}
	start := time.Now()
	var wg sync.WaitGroup
	var errs [2]error
	for _, mode := range []Mode{Static, Adaptive} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Runs[mode], errs[mode] = crawl(ctx, &r.Scenario, mode)
		}()
	}
	wg.Wait()
	r.Wall = time.Since(start)
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	for _, mode := range []Mode{Static, Adaptive} {
		for g := range sc.Groups {
			r.Metrics[mode] = append(r.Metrics[mode], measure(&r.Scenario, g, r.Runs[mode]))
		}
	}
	return r, nil
}

// run runs the selected scenarios one after another, then reports.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	scs, err := selectScenarios(o.scenarios, o.size())
	if err != nil {
		return err
	}
	start, loadStart := time.Now(), loadAverage()
	var results []*ScenarioResult
	for i := range scs {
		if err := ctx.Err(); err != nil {
			return err
		}
		sc, ok := installed(scs[i], stderr)
		if !ok {
			continue
		}
		fmt.Fprintf(stderr, "pacebench: %s (%d of %d)…\n", scs[i].Name, i+1, len(scs))
		r, err := runScenario(ctx, sc)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "pacebench: %s done in %s (static %s, adaptive %s)\n", scs[i].Name,
			fmtDur(r.Wall), fmtDur(r.Runs[Static].Wall), fmtDur(r.Runs[Adaptive].Wall))
		if o.audit != "" {
			if err := writeAudit(o.audit, r); err != nil {
				return err
			}
		}
		if o.arrivals != "" {
			if err := writeArrivals(o.arrivals, r); err != nil {
				return err
			}
		}
		results = append(results, r)
	}
	total := time.Since(start)
	var issue4Wall time.Duration
	issue4Ran := 0
	for _, r := range results {
		if issue4(r.Scenario.Name) {
			issue4Wall += r.Wall
			issue4Ran++
		}
	}
	targets := evaluate(results, issue4Wall, issue4Ran == 6 && !o.short)

	charts := map[string]string{}
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
		for _, r := range results {
			if r.Scenario.NoChart {
				continue
			}
			path := filepath.Join(o.out, r.Scenario.Name+"."+o.format)
			if err := renderChart(r, path); err != nil {
				return err
			}
			rel := path
			if o.md != "" {
				if p, err := filepath.Rel(filepath.Dir(o.md), path); err == nil {
					rel = p
				}
			}
			charts[r.Scenario.Name] = rel
		}
	}
	info := RunInfo{
		Date: start, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		Procs: runtime.GOMAXPROCS(0), Total: total, Short: o.short, Long: o.long, Command: command(o),
		Load: [2]string{loadStart, loadAverage()},
	}
	section := renderSection(info, results, targets, charts)
	fmt.Fprint(stdout, section)
	if o.md != "" {
		if err := updateMarkdown(o.md, section); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "pacebench: updated %s\n", o.md)
	}
	return nil
}

// installed returns the scenario with what the machine can run: a scenario whose limiter is not
// installed is skipped (ok false), and so are the groups whose own limiter is not (a scenario left with
// no group is skipped), each saying so on stderr.
func installed(sc Scenario, stderr io.Writer) (Scenario, bool) {
	if l := sc.Limiter; l != nil {
		if _, err := l.Kind.binary(); err != nil {
			fmt.Fprintf(stderr, "pacebench: skipping %s: %v\n", sc.Name, err)
			return sc, false
		}
	}
	var kept []Group
	for _, g := range sc.Groups {
		if l := g.Limiter; l != nil {
			if _, err := l.Kind.binary(); err != nil {
				fmt.Fprintf(stderr, "pacebench: skipping %s's group %s: %v\n", sc.Name, g.Label, err)
				continue
			}
		}
		kept = append(kept, g)
	}
	if len(kept) == 0 {
		fmt.Fprintf(stderr, "pacebench: skipping %s: none of its limiters is installed\n", sc.Name)
		return sc, false
	}
	sc.Groups = kept
	return sc, true
}

// command reconstructs the command line of the run, for the report.
func command(o options) string {
	cmd := "go run ./cmd/pacebench"
	switch {
	case o.short:
		cmd += " -short"
	case o.long:
		cmd += " -long"
	}
	if strings.TrimSpace(o.scenarios) != "all" {
		cmd += " -scenarios " + o.scenarios
	}
	return cmd
}

// size is the length of the scenarios the flags ask for.
func (o options) size() size {
	switch {
	case o.short:
		return sizeShort
	case o.long:
		return sizeLong
	}
	return sizeFull
}

// writeAudit writes the adaptive pacer's audit trail of a scenario to dir/<scenario>.jsonl.
func writeAudit(dir string, r *ScenarioResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.Scenario.Name+".jsonl"), r.Runs[Adaptive].Audit, 0o644)
}

// writeArrivals writes what each host's server (or its real limiter) logged in each crawl of a scenario
// to dir/<scenario>.<mode>.<host>.tsv: a line per request, in order of arrival, with its arrival and
// its client's send stamp in milliseconds from the start of the crawl, its status and its path. The
// limiters' own logs go with their temporary directories: this keeps the evidence.
func writeArrivals(dir string, r *ScenarioResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ms := func(t, from time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(t.Sub(from))/float64(time.Millisecond))
	}
	for _, mode := range []Mode{Static, Adaptive} {
		run := r.Runs[mode]
		for _, h := range run.Hosts {
			var b strings.Builder
			fmt.Fprintf(&b, "# %s, %s crawl, host %s (%s), from %s\n# arrival_ms\tsent_ms\tstatus\tpath\n",
				r.Scenario.Name, mode, h.Config.Name, h.Key, run.Start.UTC().Format(time.RFC3339Nano))
			for _, a := range h.Arrivals {
				fmt.Fprintf(&b, "%s\t%s\t%d\t%s\n", ms(a.At, run.Start), ms(a.Sent, run.Start), a.Status, a.Path)
			}
			name := fmt.Sprintf("%s.%s.%s.tsv", r.Scenario.Name, mode, h.Config.Name)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadAverage returns the 1, 5 and 15 minute load averages ("0.52/0.40/0.31"), or "" where
// /proc/loadavg does not exist: other work on the machine skews the gaps, and the report says so.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], "/")
}
