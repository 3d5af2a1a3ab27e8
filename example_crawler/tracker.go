package main

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
	"github.com/gocolly/colly/v2"
)

// target is one host to crawl.
type target struct {
	name   string         // shown in the tables: the demo host's name, or URL.Host
	key    string         // URL.Host, the pacer's host key
	seed   string         // first URL
	pages  int            // pages the host has, when known (demo); 0 otherwise
	server *scenario.Host // the demo host, for its server-side log; nil with -url
}

// hostCount is what the crawler itself counted for one host.
type hostCount struct {
	scheduled int    // URLs handed to Colly
	done      int    // pages fetched
	failed    int    // requests given up: retries exhausted, or not retryable
	deferred  int    // requests parked by an open circuit breaker (Pacer.Drain would send them again)
	lastErr   string // of the last failure
}

// tracker follows the crawl: it schedules same-host links within the page budget and counts pages
// done and lost per host. It is safe for concurrent use.
type tracker struct {
	ctx    context.Context // the run; no link is scheduled after it ends
	c      *colly.Collector
	pacer  *ext.Pacer
	budget int // pages for the whole run; 0 = no limit

	mu        sync.Mutex // protects the fields below
	targets   []target   // in display order; hosts met on the way (redirects) are appended
	counts    map[string]*hostCount
	asked     map[string]time.Duration // longest interval each host asked for (Crawl-delay, rate limit), as seen
	scheduled int                      // over all hosts, for the budget
}

func newTracker(ctx context.Context, c *colly.Collector, pacer *ext.Pacer, budget int, targets []target) *tracker {
	t := &tracker{ctx: ctx, c: c, pacer: pacer, budget: budget, targets: targets, counts: map[string]*hostCount{}, asked: map[string]time.Duration{}}
	for _, tg := range targets {
		t.counts[tg.key] = &hostCount{}
	}
	return t
}

// install registers the tracker's callbacks. Call it after ext.AdaptivePacing, so the pacer's
// OnError has decided about a retry when the tracker's runs.
func (t *tracker) install() {
	t.c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		u, err := url.Parse(e.Request.AbsoluteURL(e.Attr("href")))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host != e.Request.URL.Host {
			return
		}
		u.Fragment = ""
		_ = t.visit(u.String()) // already visited, disallowed by robots.txt, over the budget: skipped
	})
	t.c.OnResponse(func(r *colly.Response) {
		t.mu.Lock()
		t.count(r.Request.URL.Host).done++
		t.mu.Unlock()
	})
	t.c.OnError(func(r *colly.Response, err error) {
		switch {
		case r.Request == nil, t.pacer.Retrying(r):
			return
		case t.pacer.Deferred(r):
			t.mu.Lock()
			t.count(r.Request.URL.Host).deferred++
			t.mu.Unlock()
			return
		case r.StatusCode >= 200 && r.StatusCode < 203:
			return // an error in a page's callbacks, after it was counted done
		case t.ctx.Err() != nil, errors.Is(err, colly.ErrAbortedBeforeRequest):
			return // cut short by the run's end, or not sent because its slot comes after it: still left
		}
		t.mu.Lock()
		hc := t.count(r.Request.URL.Host)
		hc.failed++
		hc.lastErr = err.Error()
		t.mu.Unlock()
	})
}

// visit schedules rawURL if the run and the budget allow. It returns Colly's error, such as
// colly.ErrAlreadyVisited or colly.ErrRobotsTxtBlocked, and nil when the URL was skipped.
func (t *tracker) visit(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	if t.ctx.Err() != nil {
		return nil
	}
	t.mu.Lock()
	if t.budget > 0 && t.scheduled >= t.budget {
		t.mu.Unlock()
		return nil
	}
	t.scheduled++
	t.count(u.Host).scheduled++
	t.mu.Unlock()
	if err := t.c.Visit(rawURL); err != nil {
		t.mu.Lock()
		t.scheduled--
		t.count(u.Host).scheduled--
		t.mu.Unlock()
		return err
	}
	return nil
}

// count returns the counts of host, adding the host if new. t.mu must be held.
func (t *tracker) count(host string) *hostCount {
	hc, ok := t.counts[host]
	if !ok {
		hc = &hostCount{}
		t.counts[host] = hc
		t.targets = append(t.targets, target{name: host, key: host})
	}
	return hc
}

// hostView is one host's line in the progress and summary tables.
type hostView struct {
	target
	hostCount
	left   int
	status ext.HostSnapshot
	paced  bool          // the pacer has seen the host
	asked  time.Duration // longest Crawl-delay or rate-limit interval seen so far
}

// snapshot returns a view of every host, in display order.
func (t *tracker) snapshot() []hostView {
	t.mu.Lock()
	views := make([]hostView, len(t.targets))
	for i, tg := range t.targets {
		hc := *t.counts[tg.key]
		known := max(tg.pages, hc.scheduled)
		views[i] = hostView{target: tg, hostCount: hc, left: max(known-hc.done-hc.failed-hc.deferred, 0)}
	}
	t.mu.Unlock()
	for i := range views {
		views[i].status, views[i].paced = t.pacer.Host(views[i].key)
	}
	t.mu.Lock()
	for i := range views {
		v := &views[i]
		v.asked = max(t.asked[v.key], v.status.CrawlDelay, v.status.RateLimitInterval)
		t.asked[v.key] = v.asked
	}
	t.mu.Unlock()
	return views
}
