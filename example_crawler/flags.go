package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/collypace/ext"
)

// options are the command-line settings.
type options struct {
	url         string
	pages       int // page budget for the whole run; 0 = none
	audit       string
	state       string
	baseDelay   time.Duration // 0 = the mode's default
	maxDelay    time.Duration
	jitter      float64
	maxInFlight int
	maxRetries  int
	pipeline    string
	metrics     string        // address serving /metrics; "" = off
	timeout     time.Duration // per request
	duration    time.Duration // whole run
}

const intro = `example_crawler crawls with Colly paced by ext.AdaptivePacing, and shows live, per host,
the pages done and left, the current delay and what set it, the refusals and the circuit breaker.

With no arguments it starts a demo site on 127.0.0.1: six hosts (ports), each with one character
(fast, slow, a hidden capacity answering 429 + Retry-After, a robots.txt Crawl-delay, rate-limit
headers, an outage of 503s that ends), and crawls all of it in about a minute.
With -url it crawls a real site instead: same-host links only, up to -pages pages, obeying robots.txt.

It writes the pacer's audit trail as JSON lines to -audit and ends with a summary table.

Usage:
  go run ./example_crawler [flags]
  go run ./example_crawler -url https://example.org/ -pages 20

Flags:
`

// parseFlags parses args into options; -h prints the intro and the flags (flag.ErrHelp). A bad flag
// (unknown, malformed, or a value the crawler or the pacer cannot use) prints the error and the usage to
// fs.Output() and returns the error: main exits 2, never crawling with a default in its place.
func parseFlags(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		return o, err // fs.Parse has printed it with the usage
	}
	if err := o.check(fs); err != nil {
		_, _ = fmt.Fprintf(fs.Output(), "%s: %v\n", fs.Name(), err)
		fs.Usage()
		return o, err
	}
	return o, nil
}

// define defines the flags on fs, setting o's fields.
func (o *options) define(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "url", "", "crawl this site instead of the demo site (same-host links, robots.txt on)")
	fs.IntVar(&o.pages, "pages", 50, "page budget of the whole run with -url (the demo site crawls all its pages unless set)")
	fs.StringVar(&o.audit, "audit", "audit.jsonl", "file the audit trail is written to, as JSON lines")
	fs.StringVar(&o.state, "state", "pacing.db", "SQLite file keeping the pacing state and deferred requests between runs (\"\" keeps them in memory)")
	fs.DurationVar(&o.baseDelay, "base-delay", 0,
		fmt.Sprintf("floor of each host's interval between request starts (default %v for the demo, %v with -url)", demoBaseDelay, ext.DefaultBaseDelay))
	fs.DurationVar(&o.maxDelay, "max-delay", ext.DefaultMaxDelay, "ceiling of the adaptive delay")
	fs.Float64Var(&o.jitter, "jitter", ext.DefaultJitter, "random extra of up to this fraction of the interval (0 = off)")
	fs.IntVar(&o.maxInFlight, "max-inflight", ext.DefaultMaxInFlight, "requests in flight per host")
	fs.IntVar(&o.maxRetries, "max-retries", ext.DefaultMaxRetries, "retries of a refused request (429, 503, …) after the host's window")
	fs.StringVar(&o.pipeline, "pipeline", "example_crawler", "pipeline_id field of every audit event")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics on this address's /metrics while crawling (e.g. 127.0.0.1:9090)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each HTTP request (the pacing wait before it is not counted)")
	fs.DurationVar(&o.duration, "duration", 3*time.Minute, "maximum run time: the crawl stops cleanly at this bound")
	fs.Usage = func() {
		w := fs.Output()
		_, _ = io.WriteString(w, intro)
		fs.PrintDefaults()
	}
}

// check checks the values parsed by fs and sets the defaults that depend on the mode.
func (o *options) check(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see -h)", fs.Args())
	}
	pagesSet := false
	fs.Visit(func(f *flag.Flag) { pagesSet = pagesSet || f.Name == "pages" })
	switch {
	case o.url == "" && !pagesSet:
		o.pages = 0
	case o.pages < 1:
		return errors.New("-pages must be at least 1")
	}
	if o.url != "" {
		u, err := url.Parse(o.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-url %q: want an absolute http or https URL", o.url)
		}
	}
	if o.baseDelay == 0 {
		o.baseDelay = demoBaseDelay
		if o.url != "" {
			o.baseDelay = ext.DefaultBaseDelay
		}
	}
	switch {
	case o.baseDelay < 0 || o.maxDelay <= 0 || o.timeout <= 0 || o.duration <= 0:
		return errors.New("-base-delay, -max-delay, -timeout and -duration must be positive")
	case o.jitter < 0 || o.jitter > 1:
		return errors.New("-jitter must be between 0 and 1")
	case o.maxInFlight < 1 || o.maxRetries < 0:
		return errors.New("-max-inflight must be at least 1 and -max-retries at least 0")
	}
	// Whatever else the pacer would set aside (option_invalid, its default in its place) is a bad flag.
	p, err := ext.NewPacerErr(o.pacingOptions()...)
	if err != nil {
		return err
	}
	_ = p.Close()
	return nil
}

// pacingOptions turns the options into the pacer's.
func (o options) pacingOptions() []ext.Option {
	return []ext.Option{
		ext.WithBaseDelay(o.baseDelay),
		ext.WithMaxDelay(o.maxDelay),
		ext.WithJitter(o.jitter),
		ext.WithMaxInFlight(o.maxInFlight),
		ext.WithMaxRetries(o.maxRetries),
		ext.WithPipelineID(o.pipeline),
	}
}
