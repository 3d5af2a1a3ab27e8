// Command example_crawler crawls with Colly paced by ext.AdaptivePacing and shows, live, how each
// host is paced. With no arguments it crawls an embedded demo site on 127.0.0.1 in about a minute;
// with -url it crawls a real site. Run it with -h for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
	"github.com/gocolly/colly/v2"
)

const (
	userAgent     = "collypace-example/1.0 (+https://github.com/collypace/ext)"
	demoBaseDelay = scenario.DemoBaseDelay
	// stopGrace is how long in-flight requests get to end once the run's bound is reached.
	stopGrace = 10 * time.Second
)

func main() {
	fs := flag.NewFlagSet("example_crawler", flag.ContinueOnError)
	o, err := parseFlags(fs, os.Args[1:]) // a bad flag prints its error and the usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example_crawler:", err)
		stop()
		os.Exit(1)
	}
}

// run crawls until every page is done, the -duration bound, or ctx ends, then prints the summary.
func run(ctx context.Context, o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()

	targets, site, err := startTargets(o, out)
	if err != nil {
		return err
	}
	if site != nil {
		defer site.Close()
	}
	audit, err := createAudit(o.audit)
	if err != nil {
		return err
	}
	defer audit.Close()
	stateOpts, closeState, err := openState(o.state, out)
	if err != nil {
		return err
	}
	defer closeState()
	metrics, metricsOpts, err := startMetrics(o.metrics, out)
	if err != nil {
		return err
	}
	defer metrics.close()
	_, _ = fmt.Fprintf(out, "audit:  %s (JSON lines)\npacing: base %v, max %v, jitter %g, %d in flight per host, %d retries; bound %v\n\n",
		o.audit, o.baseDelay, o.maxDelay, o.jitter, o.maxInFlight, o.maxRetries, o.duration)

	c := colly.NewCollector(colly.Async(true), colly.UserAgent(userAgent), colly.StdlibContext(ctx))
	c.IgnoreRobotsTxt = o.url == "" // a real site's robots.txt is obeyed; the pacer reads Crawl-delay either way
	c.SetRequestTimeout(o.timeout)
	inner := http.DefaultTransport.(*http.Transport).Clone()
	defer inner.CloseIdleConnections()
	rec := newRecorder(inner)
	opts := append(o.pacingOptions(), ext.WithAuditWriter(audit), ext.WithTransport(rec))
	pacer := ext.AdaptivePacing(c, append(append(opts, stateOpts...), metricsOpts...)...)
	metrics.watch(pacer)
	defer pacer.Close() // writes the state not yet written (before the store closes: defers run last-in first-out)
	tr := newTracker(ctx, c, pacer, o.pages, targets)
	tr.install()

	start := time.Now()
	prog := newProgress(out, tr, start)
	stopProgress, progressDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(progressDone)
		prog.run(stopProgress, time.Second)
	}()
	var seedErrs []string
	for _, t := range targets {
		if err := tr.visit(t.seed); err != nil {
			_, _ = fmt.Fprintf(out, "%s: not crawled: %v\n", t.seed, err)
			seedErrs = append(seedErrs, fmt.Sprintf("%s: %v", t.seed, err))
		}
	}
	outcome := wait(ctx, c)
	close(stopProgress)
	<-progressDone
	if site != nil {
		site.Close() // waits for the handlers, so requests cut short are in the server logs
	}
	views := tr.snapshot()
	writeSummary(out, views, rec, time.Since(start), outcome, audit, o.audit)
	writeReport(out, o.audit, targets)
	// Close names a hole in the trail (a failed audit write) and a state it could not write.
	return errors.Join(pacer.Close(), nothingCrawled(views, seedErrs))
}

// errNothingCrawled is run's error when no page was fetched: the summary and the report prove nothing.
var errNothingCrawled = errors.New("nothing was crawled: no page was fetched, so the report proves nothing")

// nothingCrawled returns errNothingCrawled, with why: the seeds' errors (a Visit refused: robots.txt
// could not be read) and each host's last error, when no page was fetched.
func nothingCrawled(views []hostView, why []string) error {
	for _, v := range views {
		if v.done > 0 {
			return nil
		}
		if v.lastErr != "" {
			why = append(why, v.name+": "+v.lastErr)
		}
	}
	if len(why) == 0 {
		return errNothingCrawled
	}
	return fmt.Errorf("%w (%s)", errNothingCrawled, strings.Join(why, "; "))
}

// wait waits for the crawl to end, or for ctx; then it gives the requests in flight stopGrace to
// end (their context is ctx, so they are cancelled). It returns how the crawl ended.
func wait(ctx context.Context, c *colly.Collector) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Wait()
	}()
	select {
	case <-done:
		return "crawl finished"
	case <-ctx.Done():
	}
	why := "stopped at the -duration bound"
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "interrupted"
	}
	select {
	case <-done:
		return why
	case <-time.After(stopGrace):
		// The Wait goroutine ends with the process.
		return why + fmt.Sprintf(" (requests still running after %v were abandoned)", stopGrace)
	}
}

// startTargets starts the demo site, or parses -url, and prints what will be crawled.
func startTargets(o options, out io.Writer) ([]target, *scenario.Site, error) {
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil {
			return nil, nil, err
		}
		_, _ = fmt.Fprintf(out, "crawl:  %s (same-host links, up to %d pages, robots.txt obeyed)\n", o.url, o.pages)
		return []target{{name: u.Host, key: u.Host, seed: o.url}}, nil, nil
	}
	site, err := scenario.DemoSite()
	if err != nil {
		return nil, nil, err
	}
	targets := make([]target, len(site.Hosts))
	total := 0
	for i, h := range site.Hosts {
		targets[i] = target{name: h.Name(), key: h.Key(), seed: h.PageURL(0), pages: h.Pages(), server: h}
		total += h.Pages()
	}
	_, _ = fmt.Fprintf(out, "demo site on 127.0.0.1: %d hosts, %d pages\n", len(targets), total)
	for _, h := range site.Hosts {
		_, _ = fmt.Fprintf(out, "  %-12s %-16s %s\n", h.Name(), h.Key(), h.Config().Describe())
	}
	if o.pages > 0 {
		_, _ = fmt.Fprintf(out, "budget: %d pages\n", o.pages)
	}
	return targets, site, nil
}
