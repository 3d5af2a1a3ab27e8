package ext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/rs/zerolog"
)

// robotsFetchTimeout bounds the network part of one robots.txt fetch: each hop from its departure to
// its response, and the body. The wait for its departure slot is not counted (a Crawl-delay, a
// Retry-After window or the backoff below would otherwise read as an unreachable host), whatever the
// transport (WithTransport).
const robotsFetchTimeout = 10 * time.Second

// robotsMaxRedirects is how many redirects a robots.txt fetch follows (RFC 9309 §2.3.1.2: at least five).
const robotsMaxRedirects = 5

// robotsRetryFirst is the wait before reading an unreachable robots.txt again; it doubles after each
// failure, up to the retry delay (defaultRobotsRetryDelay).
const robotsRetryFirst = time.Second

// errRobotsNoAnswer is why a robots.txt fetch is cut off: no answer within robotsFetchTimeout. It is a
// deadline (a transport error, a refusal like any timeout), not the crawler cancelling.
var errRobotsNoAnswer = fmt.Errorf("no answer within %v: %w", robotsFetchTimeout, context.DeadlineExceeded)

// robotsCache holds one robots.txt per origin, read through the pacer and kept for the TTL (24 h).
//
// An unreachable one (5xx, 429, network error, timeout) means complete disallow for now (RFC 9309
// §2.3.1.4): when no earlier copy applies, the host's pages wait (in ensureRobots, holding no
// in-flight slot) while one of them reads it again after 1 s, 2 s, 4 s… up to the retry delay; after
// robotsUnreachableLimit the host's breaker opens (robots_unreachable), its pages are deferred, and the
// breaker's probe is the next read. When a copy was read before, it still applies meanwhile (§2.4).
type robotsCache struct {
	mu    sync.RWMutex // protects the fields below
	m     map[string]*robotsEntry
	byKey map[string][]string // host key → the origins paced under it (WithHostKey can join several)
	idle  []idleKey           // host keys evicted from memory, oldest first (robotsevict.go)
	peak  int                 // the most origins m held at an eviction sweep
}

// robotsEntry is one attempt at reading an origin's robots.txt.
type robotsEntry struct {
	key string // the host key of the origin, set at creation
	// wait is closed when the attempt ends, and dropped (nil): the fields below are then read-only. Not
	// kept once done, so that a cached entry does not hold a channel.
	wait      atomic.Pointer[chan struct{}]
	fetchedAt time.Time
	info      robotstxt.Info
	err       error
	*robotsOutage

	// applied is the serial of the host state its rules were last applied to: idle eviction makes a
	// new one, which gets them again. A number, so that an evicted host's state does not stay in memory.
	applied atomic.Uint32
	status  int16 // the HTTP status of the read (0: none); the small fields share one word
	// unavailable: robots.txt was not read; *robotsOutage says why and what applies meanwhile (set
	// with it, nil otherwise: most entries are read and need none of it).
	unavailable bool
	// void: nothing was learned (the host's breaker refused the fetch, or its caller gave up); the
	// entry it replaced is put back.
	void bool
}

// robotsOutage is what an unavailable robots.txt entry keeps.
type robotsOutage struct {
	attempt     int          // failed attempts in a row, this one included
	since       time.Time    // when the first of them ended
	retryAt     time.Time    // when the next attempt is due (once the host's breaker lets it go)
	cached      *robotsEntry // the last robots.txt read, which still applies; nil: none, pages wait
	unreachable bool         // the origin cannot be reached at all (no such name, connection refused)
	tripped     bool         // this failure opened the host's breaker (robots_unreachable)
}

func (c *robotsCache) init() {
	c.m = make(map[string]*robotsEntry)
	c.byKey = make(map[string][]string)
}

// newPendingRobotsEntry is an attempt under way for an origin under key.
func newPendingRobotsEntry(key string) *robotsEntry {
	e := &robotsEntry{key: key}
	wait := make(chan struct{})
	e.wait.Store(&wait)
	return e
}

// pending reports whether e's attempt is still under way.
func (e *robotsEntry) pending() bool {
	return e.wait.Load() != nil
}

// finish marks e's attempt ended and wakes the requests waiting on it.
func (e *robotsEntry) finish() {
	if wait := e.wait.Swap(nil); wait != nil {
		close(*wait)
	}
}

// rules returns the entry whose robots.txt applies: e when it was read, the earlier copy when it was
// unavailable, nil when none applies (the host's pages wait).
func (e *robotsEntry) rules() *robotsEntry {
	switch {
	case e.void:
		return nil
	case e.unavailable:
		return e.cached
	}
	return e
}

// due reports whether robots.txt must be read again at now: its TTL is over, or, unavailable, its next
// try has come. e must be done.
func (e *robotsEntry) due(now time.Time, ttl time.Duration) bool {
	if e.unavailable {
		return !now.Before(e.retryAt)
	}
	return !now.Before(e.fetchedAt.Add(ttl))
}

// robotsKnown reports whether the robots.txt of rawURL's origin is known, fresh at now and applied to
// the host's current state: a Queue reads it first otherwise (tryRobots).
func (p *Pacer) robotsKnown(rawURL string, now time.Time) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true // nothing to fetch: the request will fail on its own
	}
	key := p.cfg.hostKey(u) // before the lock: a key function may look the name up (ByIP)
	p.robots.mu.Lock()
	e := p.robots.m[u.Scheme+"://"+u.Host]
	p.robots.mu.Unlock()
	if e == nil || e.pending() || e.rules() == nil || e.due(now, p.cfg.robotsTTL) {
		return false
	}
	h, ok := p.hosts.Load(key)
	return ok && e.appliedTo(h)
}

// ensureRobots makes sure the robots.txt of u's origin is known before a request to it departs,
// reading it (once, through the pacer) when needed, and returns its entry; key is u's host key (the
// caller has it), agent the User-Agent the read sends. While it is unreachable and no earlier copy
// applies, it waits, until it is read, the host is parked (returned at once: the caller's breaker
// check defers the request), or ctx ends.
func (p *Pacer) ensureRobots(ctx context.Context, u *url.URL, key, agent string) (*robotsEntry, error) {
	return p.robotsFor(ctx, u, key, agent, true)
}

// tryRobots is ensureRobots without the wait for a later try: it reads robots.txt when a read is
// due and returns. A Queue calls it; while robots.txt is unreachable, the host is held until the next
// try, so the queue does not hand it out before.
func (p *Pacer) tryRobots(ctx context.Context, u *url.URL, agent string) (*robotsEntry, error) {
	return p.robotsFor(ctx, u, p.cfg.hostKey(u), agent, false)
}

func (p *Pacer) robotsFor(ctx context.Context, u *url.URL, key, agent string, wait bool) (*robotsEntry, error) {
	if e := p.robotsFresh(u, p.host(key)); e != nil {
		return e, nil
	}
	origin := u.Scheme + "://" + u.Host
	for {
		h := p.host(key)
		now := p.now()
		p.robots.mu.Lock()
		e := p.robots.m[origin]
		if wait := pendingWait(e); wait != nil { // another request reads it: wait for its outcome
			p.robots.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("ext: waiting for robots.txt of %s: %w", origin, context.Cause(ctx))
			}
		}
		if e != nil && !e.due(now, p.cfg.robotsTTL) {
			p.robots.mu.Unlock()
			if r := e.rules(); r != nil {
				p.reapplyRobots(h, e, r)
				return e, nil
			}
			if !wait || h.parked(now, p.cfg.breaker) {
				return e, nil
			}
			if !e.unavailable { // void: never left in the cache once its read ends; look again
				continue
			}
			if e.unreachable { // nothing to wait for: its pages fail at once, with the network's error
				return nil, fmt.Errorf("%w: %s (robots.txt: %w)", errHostUnreachable, origin, e.err)
			}
			if err := p.sleepUntil(ctx, e.retryAt); err != nil { // held until the next try
				return nil, fmt.Errorf("ext: waiting for robots.txt of %s: %w", origin, err)
			}
			continue
		}
		p.robots.mu.Unlock()
		// A read is due. A parked host is not asked (its breaker's probe will be the read): an
		// earlier copy still applies meanwhile, or its requests are deferred.
		if h.parked(now, p.cfg.breaker) {
			if e != nil && e.rules() != nil {
				p.reapplyRobots(h, e, e.rules())
				return e, nil
			}
			return &robotsEntry{void: true, err: ErrBreakerOpen}, nil
		}
		p.robots.mu.Lock()
		if p.robots.m[origin] != e { // another request started a read meanwhile
			p.robots.mu.Unlock()
			continue
		}
		if !slices.Contains(p.robots.byKey[h.key], origin) {
			p.robots.byKey[h.key] = append(p.robots.byKey[h.key], origin)
		}
		ne := newPendingRobotsEntry(h.key) // the host's own copy of the key: a URL's Host keeps its URL alive
		p.robots.m[origin] = ne
		p.robots.mu.Unlock()
		p.readRobots(ctx, ne, e, h, origin, agent)
		ne.finish()
		if ne.void {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("ext: reading robots.txt of %s: %w", origin, context.Cause(ctx))
			}
			if errors.Is(ne.err, errWaitBeyondDeadline) {
				return nil, fmt.Errorf("ext: reading robots.txt of %s: %w", origin, ne.err)
			}
			if e != nil && e.rules() != nil {
				return e, nil
			}
			return ne, nil // refused by the host's breaker: the caller's breaker check defers the request
		}
	}
}

// pendingWait is the channel to wait on for e's attempt, nil when there is no attempt under way.
func pendingWait(e *robotsEntry) <-chan struct{} {
	if e == nil {
		return nil
	}
	if wait := e.wait.Load(); wait != nil {
		return *wait
	}
	return nil
}

// robotsFresh returns the entry of u's origin when its rules apply now without a read or a wait, as
// they do for nearly every request, after applying them to h if it is a new host state; nil otherwise.
// It allocates nothing: the origin it looks up does not outlive the lookup.
func (p *Pacer) robotsFresh(u *url.URL, h *host) *robotsEntry {
	now := p.now()
	p.robots.mu.RLock()
	e := p.robots.m[u.Scheme+"://"+u.Host]
	p.robots.mu.RUnlock()
	if e == nil || e.pending() || e.due(now, p.cfg.robotsTTL) {
		return nil
	}
	r := e.rules()
	if r == nil {
		return nil
	}
	p.reapplyRobots(h, e, r)
	return e
}

// sleepUntil waits until t or until ctx ends.
func (p *Pacer) sleepUntil(ctx context.Context, t time.Time) error {
	d := t.Sub(p.now())
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// appliedTo reports whether e's rules were last applied to h.
func (e *robotsEntry) appliedTo(h *host) bool {
	return e.applied.Load() == h.serial
}

// reapplyRobots applies r (e's rules) to h when e was last applied to another host state: one made
// anew after idle eviction forgets the Crawl-delay the robots cache still knows.
func (p *Pacer) reapplyRobots(h *host, e, r *robotsEntry) {
	old := e.applied.Load()
	if old == h.serial || !e.applied.CompareAndSwap(old, h.serial) {
		return
	}
	now := p.now()
	if !p.applyRules(h, e, r, now) || r.info.CrawlDelay == 0 {
		return
	}
	compliant, level, why := p.crawlDelayCompliance(r.info)
	p.audit.emit(level, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayApplied, trigger: audit.TriggerCrawlDelay,
		base: h.policy.BaseDelay, computed: r.info.CrawlDelay, compliant: compliant, status: int(r.status),
		detail: why + "restored from the robots.txt read at " + r.fetchedAt.UTC().Format(time.RFC3339)})
}

// crawlDelayCompliance says whether crawling at info's Crawl-delay complies with what robots.txt asks:
// it does when the delay is taken as published, and when it is above the cap and the host is parked
// (nothing departs); it does not with BreakerPolicy.IgnoreCaps, which crawls at the cap. why starts the
// event's detail.
func (p *Pacer) crawlDelayCompliance(info robotstxt.Info) (compliant bool, level zerolog.Level, why string) {
	switch {
	case info.Published <= info.CrawlDelay:
		return true, zerolog.InfoLevel, ""
	case p.cfg.breaker.IgnoreCaps:
		return false, zerolog.WarnLevel, fmt.Sprintf("robots.txt asks for %s; crawled at the cap (IgnoreCaps); ", robotstxt.FormatDelay(info.Published))
	}
	return true, zerolog.WarnLevel, fmt.Sprintf("robots.txt asks for %s, above the cap: the host is parked, nothing departs; ", robotstxt.FormatDelay(info.Published))
}

// applyRules makes the Crawl-delay of r, the rules read for e's origin, part of h's interval at now
// (the largest among the origins sharing h's key) and parks h while it is above the cap (until
// robots.txt is due to be read again). It reports whether h's Crawl-delay or clamp changed.
func (p *Pacer) applyRules(h *host, e, r *robotsEntry, now time.Time) bool {
	delay, published := p.keyCrawlDelay(e, r)
	clamped := published > delay
	h.mu.Lock()
	changed := delay != h.crawlDelay || clamped != h.crawlClamped
	raised := delay > h.crawlDelay
	h.crawlDelay, h.crawlClamped = delay, clamped
	var brk *breaker.Change
	if clamped && !p.cfg.breaker.IgnoreCaps {
		brk = h.brk.Park(now, audit.TripCrawlDelay, r.fetchedAt.Add(p.cfg.robotsTTL))
	}
	h.wakeHeadLocked() // the head computes its time again: a new interval, or a breaker that opened
	h.mu.Unlock()
	h.markDirty(p)
	p.reportBreaker(h, brk, now) // a transition is written through
	if raised && brk == nil {
		p.persistNow(h) // a longer interval stops other processes: written through
	}
	return changed
}

// applyCrawlDelay makes a robots.txt's Crawl-delay part of the host's interval at now and audits what
// was not taken as published.
func (p *Pacer) applyCrawlDelay(h *host, e *robotsEntry, now time.Time) {
	info := e.info
	e.applied.Store(h.serial)
	p.applyRules(h, e, e, now)

	for _, problem := range info.Problems {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventRobotsInvalid, trigger: audit.TriggerRobots,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: true, status: int(e.status), detail: problem})
	}
	compliant, level, why := p.crawlDelayCompliance(info)
	if info.Published > info.CrawlDelay {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayClamped, trigger: audit.TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: compliant, status: int(e.status),
			detail: p.crawlClampDetail(info)})
	}
	if info.CrawlDelay > 0 {
		p.audit.emit(level, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayApplied, trigger: audit.TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: compliant, status: int(e.status), detail: strings.TrimSuffix(why, "; ")})
	}
}

// crawlClampDetail says what a Crawl-delay above the cap does: it parks the host, or with IgnoreCaps
// it is held to the cap.
func (p *Pacer) crawlClampDetail(info robotstxt.Info) string {
	if p.cfg.breaker.IgnoreCaps {
		return fmt.Sprintf("robots.txt asks for %s, honoured up to %v (IgnoreCaps)", robotstxt.FormatDelay(info.Published), info.CrawlDelay)
	}
	return fmt.Sprintf("robots.txt asks for %s, above the cap of %v: the host is parked (%s), its requests deferred until robots.txt is read again",
		robotstxt.FormatDelay(info.Published), p.cfg.maxCrawlDelay, audit.TripCrawlDelay)
}

// keyCrawlDelay returns the largest Crawl-delay, as honoured and as published, among the robots.txt
// of the origins sharing e's host key: r's (the rules that apply for e's origin), and the others' that
// apply. With the default host key that is r's alone; a key joining several origins
// (ByRegistrableDomain, ByIP) paces them by the strictest.
func (p *Pacer) keyCrawlDelay(e, r *robotsEntry) (delay, published time.Duration) {
	delay, published = r.info.CrawlDelay, r.info.Published
	p.robots.mu.Lock()
	defer p.robots.mu.Unlock()
	for _, origin := range p.robots.byKey[e.key] {
		o := p.robots.m[origin]
		if o == nil || o == e || o.pending() {
			continue
		}
		if or := o.rules(); or != nil {
			delay, published = max(delay, or.info.CrawlDelay), max(published, or.info.Published)
		}
	}
	return delay, published
}

// hostParkedOrProbing reports whether h's breaker is not closed: a robots.txt read it refused says
// nothing of robots.txt.
func (p *Pacer) hostParkedOrProbing(h *host) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.brk.State() != audit.BreakerClosed
}

// serveRobots answers Colly's own robots.txt request from the cache, so robots.txt is fetched once
// per origin and Colly parses the sanitized body (one bad Crawl-delay line no longer fails every Visit).
func (p *Pacer) serveRobots(req *http.Request) (*http.Response, error) {
	e, err := p.ensureRobots(req.Context(), req.URL, p.cfg.hostKey(req.URL), req.Header.Get("User-Agent"))
	if err != nil {
		return nil, err
	}
	r := e.rules()
	if r == nil {
		// Unreachable and the host parked. An error, which Colly does not cache: a 5xx would be read as
		// disallow-all for the collector's whole life.
		cause := e.err
		if cause == nil {
			cause = fmt.Errorf("status %d", e.status)
		}
		return nil, fmt.Errorf("%w: robots.txt of %s://%s not read (%v)", ErrBreakerOpen, req.URL.Scheme, req.URL.Host, cause)
	}
	e = r
	var body []byte
	if e.status >= 200 && e.status < 300 {
		body = e.info.Body
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", e.status, http.StatusText(int(e.status))),
		StatusCode:    int(e.status),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}
