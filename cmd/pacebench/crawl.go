package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/redisproc"
	"github.com/collypace/ext/internal/scenario"
	"github.com/collypace/ext/redisstore"
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
	Status ext.HostSnapshot
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
// what the servers logged. It stops at the scenario's Limit or when ctx ends. A scenario with several
// Processes runs that many crawler processes (this program re-executed as workers), each crawling its
// share of every host's pages; in adaptive mode they share one redisstore on a private redis-server.
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
	// With a real limiter, the crawler meets the limiter, and the host serves the pages behind it.
	base := make([]string, len(site.Hosts)) // what the crawler connects to, "http://127.0.0.1:PORT"
	fronts := make([]*front, len(site.Hosts))
	for i, h := range site.Hosts {
		base[i] = h.URL()
		l := sc.limiterOf(groups[i])
		if l == nil {
			continue
		}
		f, err := startFront(*l, h.Key())
		if err != nil {
			return nil, fmt.Errorf("%s in front of %s: %w", l.Kind, h.Name(), err)
		}
		defer f.Close()
		fronts[i], base[i] = f, f.URL()
	}

	procs := max(sc.Processes, 1)
	specs := make([]workerSpec, procs)
	for i := range specs {
		specs[i] = workerSpec{Mode: mode, Interval: sc.Interval, Jitter: sc.Jitter, Sample: i == 0 && mode == Adaptive}
		if procs > 1 {
			specs[i].Member = fmt.Sprintf("member-%d", i+1) // the merged audit trail says whose each event is
		}
		for _, b := range base {
			specs[i].Hosts = append(specs[i].Hosts, strings.TrimPrefix(b, "http://"))
		}
	}
	for i, h := range site.Hosts {
		for p := range h.Pages() {
			specs[p%procs].URLs = append(specs[p%procs].URLs, base[i]+scenario.PagePath(p))
		}
	}

	run := &Run{Mode: mode}
	var res *workerResult
	if sc.Processes > 1 {
		if mode == Adaptive {
			rs, err := redisproc.Start(ctx, "pacebench")
			if err != nil {
				return nil, err
			}
			defer rs.Close()
			for i := range specs {
				specs[i].Redis = rs.Addr()
			}
		}
		run.Start = time.Now()
		for i := range specs {
			specs[i].Deadline = run.Start.Add(sc.Limit)
		}
		res, err = crawlFleet(ctx, specs)
	} else {
		run.Start = time.Now()
		specs[0].Deadline = run.Start.Add(sc.Limit)
		res, err = crawlClient(ctx, specs[0])
	}
	if err != nil {
		return nil, err
	}
	run.Wall = time.Since(run.Start)
	run.TimedOut, run.Audit, run.Deferred, run.Samples = res.TimedOut, res.Audit, res.Deferred, res.Samples
	site.Close()

	for i, h := range site.Hosts {
		hr := &HostRun{
			Group: groups[i], Key: h.Key(), Config: h.Config(),
			Arrivals: h.Arrivals(), Windows: h.Windows(),
		}
		if f := fronts[i]; f != nil {
			// Measured at the limiter, from its own log; the host behind it saw only what it let through.
			hr.Key = strings.TrimPrefix(f.URL(), "http://")
			hr.Config.Capacity = f.limiter.capacity()
			if hr.Arrivals, hr.Windows, err = f.Log(); err != nil {
				return nil, err
			}
		}
		hr.LastDone = res.LastDone[hr.Key]
		run.Hosts = append(run.Hosts, hr)
	}
	return run, nil
}

// crawlClient is one crawler: a collector in the spec's mode crawling the spec's URLs until they are
// done or the spec's Deadline (the collector's context deadline) passes, then drainGrace at most more.
// Every request carries scenario.SentHeader, stamped as the request is handed to the network transport
// (after the pacer admitted it).
func crawlClient(ctx context.Context, spec workerSpec) (*workerResult, error) {
	ctx, cancel := context.WithDeadline(ctx, spec.Deadline)
	defer cancel()
	c := colly.NewCollector(colly.Async(true), colly.StdlibContext(ctx))
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	stamp := sentStamp{base: base}
	res := &workerResult{}
	done := newDoneTracker()

	var pacer *ext.Pacer
	var audit lockedBuffer
	switch spec.Mode {
	case Static:
		c.WithTransport(stamp)
		for _, h := range spec.Hosts {
			if err := c.Limit(&colly.LimitRule{DomainGlob: h, Delay: spec.Interval, Parallelism: 1}); err != nil {
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
		opts := []ext.Option{
			ext.WithBaseDelay(spec.Interval),
			ext.WithJitter(spec.Jitter),
			ext.WithLogger(zerolog.New(&audit)),
			ext.WithTransport(stamp),
		}
		if spec.Member != "" {
			opts = append(opts, ext.WithPipelineID(spec.Member))
		}
		if spec.Redis != "" {
			store, err := redisstore.Open(spec.Redis)
			if err != nil {
				return nil, err
			}
			defer store.Close()
			opts = append(opts, ext.WithStore(store))
		}
		pacer = ext.AdaptivePacing(c, opts...)
	}
	c.OnResponse(func(r *colly.Response) { done.mark(r.Request.URL.Host) })
	c.OnError(func(r *colly.Response, _ error) {
		if r.Request != nil {
			done.mark(r.Request.URL.Host)
		}
	})

	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	if pacer != nil && spec.Sample {
		res.Samples = map[string][]Sample{}
		sampling.Add(1)
		go func() {
			defer sampling.Done()
			sample(ctx, pacer, spec.Hosts, res.Samples, stopSampling)
		}()
	}

	for _, u := range spec.URLs {
		_ = c.Visit(u) // async: errors come back through OnError
	}
	finished := make(chan struct{})
	go func() { c.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		res.TimedOut = true
		select {
		case <-finished:
		case <-time.After(drainGrace):
		}
	}
	close(stopSampling)
	sampling.Wait()
	cancel()

	res.LastDone = done.all()
	if pacer != nil {
		if d, err := pacer.DeferredRequests(context.Background(), ""); err == nil {
			res.Deferred = len(d)
		}
		if err := pacer.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pacebench: closing the pacer:", err)
		}
		res.Audit = audit.Bytes()
	}
	return res, nil
}

// sentStamp is the network transport under both crawlers: it stamps each request with the instant it
// is handed to the network (scenario.SentHeader), after any pacing, so the server can tell a request
// already on its way when a refusal was answered from one sent after.
type sentStamp struct{ base http.RoundTripper }

func (s sentStamp) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set(scenario.SentHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
	return s.base.RoundTrip(r)
}

// sample records the pacer's state of every host every sampleEvery until stop or ctx ends.
func sample(ctx context.Context, p *ext.Pacer, hosts []string, into map[string][]Sample, stop <-chan struct{}) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, h := range hosts {
				if st, ok := p.Host(h); ok {
					into[h] = append(into[h], Sample{At: now, Status: st})
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

// all returns a copy of the last response time of every host.
func (d *doneTracker) all() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.at)
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
