package main

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// Mode is the pacing under test.
type Mode int

// The two crawlers compared.
const (
	Static   Mode = iota // Colly's LimitRule{Delay, Parallelism: 1}, one rule per host
	Adaptive             // ext.AdaptivePacing
)

func (m Mode) String() string {
	if m == Static {
		return "static"
	}
	return "adaptive"
}

// Bounds of one crawl besides the scenario's Limit.
const (
	// maxRetries is the retry budget of each URL, for both crawlers: the pacer's default, and the
	// same number of re-sends for static Colly.
	maxRetries = ext.DefaultMaxRetries
	// drainGrace is how long a crawl that reached its Limit gets to wind down before it is left behind
	// (static Colly sleeps its Delay even for a cancelled request, while holding its slot).
	drainGrace = 5 * time.Second
	// sampleEvery is how often the adaptive pacer's per-host state is sampled for the charts.
	sampleEvery = 100 * time.Millisecond
)

// HostRun is one host of a finished crawl, as its server logged it.
type HostRun struct {
	Group    int // index in Scenario.Groups
	Key      string
	Config   scenario.HostConfig
	Arrivals []scenario.Arrival
	Windows  []scenario.Window
	LastDone time.Time // when the crawler last finished a response of this host (client side)
}

// Sample is the adaptive pacer's state of one host at one instant (Pacer.Host).
type Sample struct {
	At     time.Time
	Status ext.HostStatus
}

// Run is one finished crawl of a scenario in one mode.
type Run struct {
	Mode     Mode
	Start    time.Time // just before the first Visit
	Wall     time.Duration
	TimedOut bool // the scenario's Limit was reached
	Hosts    []*HostRun
	Samples  map[string][]Sample // adaptive only: per host key, every sampleEvery
	Audit    []byte              // adaptive only: the pacer's audit trail, JSON lines
	Deferred int                 // adaptive only: requests parked by the breaker and never sent
}

// crawl starts fresh servers for the scenario's hosts, crawls every page of every host once in the
// given mode (the frontier is seeded up front: gaps measure pacing, not link discovery), and returns
// what the servers logged. It stops at the scenario's Limit or when ctx ends.
func crawl(ctx context.Context, sc *Scenario, mode Mode) (*Run, error) {
	var cfgs []scenario.HostConfig
	var groups []int
	for gi, g := range sc.Groups {
		for _, h := range g.Hosts {
			cfgs = append(cfgs, h)
			groups = append(groups, gi)
		}
	}
	site, err := scenario.StartSite(cfgs)
	if err != nil {
		return nil, err
	}
	defer site.Close()

	ctx, cancel := context.WithTimeout(ctx, sc.Limit)
	defer cancel()
	c := colly.NewCollector(colly.Async(true), colly.StdlibContext(ctx))
	run := &Run{Mode: mode}
	done := newDoneTracker()

	var pacer *ext.Pacer
	var audit lockedBuffer
	switch mode {
	case Static:
		for _, h := range site.Hosts {
			if err := c.Limit(&colly.LimitRule{DomainGlob: h.Key(), Delay: sc.Interval, Parallelism: 1}); err != nil {
				return nil, err
			}
		}
		budget := newRetryBudget(maxRetries)
		c.OnError(func(r *colly.Response, err error) {
			if ctx.Err() != nil || r.Request == nil || !refused(r.StatusCode) {
				return
			}
			if budget.take(r.Request.URL.String()) {
				_ = r.Request.Retry()
			}
		})
	case Adaptive:
		pacer = ext.AdaptivePacing(c,
			ext.WithBaseDelay(sc.Interval),
			ext.WithJitter(sc.Jitter),
			ext.WithLogger(zerolog.New(&audit)),
		)
	}
	c.OnResponse(func(r *colly.Response) { done.mark(r.Request.URL.Host) })
	c.OnError(func(r *colly.Response, _ error) {
		if r.Request != nil {
			done.mark(r.Request.URL.Host)
		}
	})

	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	if pacer != nil {
		run.Samples = map[string][]Sample{}
		sampling.Add(1)
		go func() {
			defer sampling.Done()
			sample(ctx, pacer, site, run.Samples, stopSampling)
		}()
	}

	run.Start = time.Now()
	for _, h := range site.Hosts {
		for i := range h.Pages() {
			_ = c.Visit(h.PageURL(i)) // async: errors come back through OnError
		}
	}
	finished := make(chan struct{})
	go func() { c.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		run.TimedOut = true
		select {
		case <-finished:
		case <-time.After(drainGrace):
		}
	}
	run.Wall = time.Since(run.Start)
	close(stopSampling)
	sampling.Wait()
	cancel()
	site.Close()

	for i, h := range site.Hosts {
		run.Hosts = append(run.Hosts, &HostRun{
			Group: groups[i], Key: h.Key(), Config: h.Config(),
			Arrivals: h.Arrivals(), Windows: h.Windows(), LastDone: done.last(h.Key()),
		})
	}
	if pacer != nil {
		run.Audit = audit.Bytes()
		if d, err := pacer.DeferredRequests(context.Background(), ""); err == nil {
			run.Deferred = len(d)
		}
	}
	return run, nil
}

// sample records the pacer's state of every host every sampleEvery until stop or ctx ends.
func sample(ctx context.Context, p *ext.Pacer, site *scenario.Site, into map[string][]Sample, stop <-chan struct{}) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, h := range site.Hosts {
				if st, ok := p.Host(h.Key()); ok {
					into[h.Key()] = append(into[h.Key()], Sample{At: now, Status: st})
				}
			}
		}
	}
}

// refused reports whether static Colly's retry loop re-sends a request that ended with status:
// the outcomes the pacer retries (429, 5xx, and a transport error, status 0).
func refused(status int) bool {
	return status == 0 || status == http.StatusTooManyRequests || status >= 500
}

// retryBudget counts the re-sends of each URL for static Colly's retry loop.
type retryBudget struct {
	max int
	mu  sync.Mutex // protects n
	n   map[string]int
}

func newRetryBudget(max int) *retryBudget { return &retryBudget{max: max, n: map[string]int{}} }

// take reports whether url may be sent again, and counts the re-send.
func (b *retryBudget) take(url string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[url] >= b.max {
		return false
	}
	b.n[url]++
	return true
}

// doneTracker remembers when a response of each host last reached the crawler's callbacks.
type doneTracker struct {
	mu sync.Mutex // protects at
	at map[string]time.Time
}

func newDoneTracker() *doneTracker { return &doneTracker{at: map[string]time.Time{}} }

func (d *doneTracker) mark(host string) {
	d.mu.Lock()
	d.at[host] = time.Now()
	d.mu.Unlock()
}

func (d *doneTracker) last(host string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at[host]
}

// lockedBuffer is a bytes.Buffer safe for the pacer's concurrent audit writes.
type lockedBuffer struct {
	mu  sync.Mutex // protects buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
