package ext

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/robots"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/rs/zerolog"
)

// The pacer's side of robots.txt: a request's origin known before it departs, and the rules read
// applied to its host (Crawl-delay, its cap, the audit events). The cache itself (one read per origin,
// its TTL, an unavailable robots.txt, eviction, a fleet's shared reads) is package internal/robots;
// robotsread.go reads it.

// errHostUnreachable is why a request fails without leaving: its origin cannot be reached at all.
var errHostUnreachable = robots.ErrUnreachable

// robotsKnown reports whether the robots.txt of rawURL's origin is known, fresh at now and applied to
// the host's current state: a Queue reads it first otherwise (tryRobots).
func (p *Pacer) robotsKnown(rawURL string, now time.Time) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true // nothing to fetch: the request will fail on its own
	}
	key := p.cfg.hostKey(u) // before the lock: a key function may look the name up (ByIP)
	e := p.robots.Lookup(u.Scheme + "://" + u.Host)
	if e == nil || e.Pending() || e.Rules() == nil || e.Due(now, p.cfg.robotsTTL) {
		return false
	}
	h, ok := p.hosts.Load(key)
	return ok && e.AppliedTo(h.serial)
}

// ensureRobots makes sure the robots.txt of u's origin is known before a request to it departs,
// reading it (once, through the pacer) when needed, and returns its entry; key is u's host key (the
// caller has it), agent the User-Agent the read sends. While it is unreachable and no earlier copy
// applies, it waits, until it is read, the host is parked (returned at once: the caller's breaker
// check defers the request), or ctx ends.
func (p *Pacer) ensureRobots(ctx context.Context, u *url.URL, key, agent string) (*robots.Entry, error) {
	return p.robotsFor(ctx, u, key, agent, true)
}

// tryRobots is ensureRobots without the wait for a later try: it reads robots.txt when a read is
// due and returns. A Queue calls it; while robots.txt is unreachable, the host is held until the next
// try, so the queue does not hand it out before.
func (p *Pacer) tryRobots(ctx context.Context, u *url.URL, agent string) (*robots.Entry, error) {
	return p.robotsFor(ctx, u, p.cfg.hostKey(u), agent, false)
}

func (p *Pacer) robotsFor(ctx context.Context, u *url.URL, key, agent string, wait bool) (*robots.Entry, error) {
	if e := p.robotsFresh(u, p.host(key)); e != nil {
		return e, nil
	}
	return p.robots.Get(ctx, robotsBinding{p: p, agent: agent}, u.Scheme+"://"+u.Host, key, wait, p.cfg.robotsTTL)
}

// robotsBinding is the pacer as the robots cache sees it (robots.Binding), for a read that sends agent.
type robotsBinding struct {
	p     *Pacer
	agent string
}

func (b robotsBinding) Now() time.Time { return b.p.now() }

func (b robotsBinding) SleepUntil(ctx context.Context, t time.Time) error {
	return b.p.sleepUntil(ctx, t)
}

func (b robotsBinding) Host(key string) robots.Host {
	return robotsHost{robotsBinding: b, h: b.p.host(key)}
}

// robotsHost is a host as the robots cache sees it (robots.Host).
type robotsHost struct {
	robotsBinding
	h *host
}

func (r robotsHost) Key() string { return r.h.key }

func (r robotsHost) Parked(now time.Time) error {
	if r.h.parked(now, r.p.cfg.breaker) {
		return ErrBreakerOpen
	}
	return nil
}

func (r robotsHost) Apply(e, rules *robots.Entry) { r.p.reapplyRobots(r.h, e, rules) }

func (r robotsHost) Read(ctx context.Context, e, prev *robots.Entry, origin string) error {
	return r.p.readRobots(ctx, e, prev, r.h, origin, r.agent)
}

// robotsFresh returns the entry of u's origin when its rules apply now without a read or a wait, as
// they do for nearly every request, after applying them to h if it is a new host state; nil otherwise.
// It allocates nothing: the origin it looks up does not outlive the lookup.
func (p *Pacer) robotsFresh(u *url.URL, h *host) *robots.Entry {
	now := p.now()
	e := p.robots.Lookup(u.Scheme + "://" + u.Host)
	if e == nil || e.Pending() || e.Due(now, p.cfg.robotsTTL) {
		return nil
	}
	r := e.Rules()
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

// reapplyRobots applies r (e's rules) to h when e was last applied to another host state: one made
// anew after idle eviction forgets the Crawl-delay the robots cache still knows.
func (p *Pacer) reapplyRobots(h *host, e, r *robots.Entry) {
	if !e.ClaimApply(h.serial) {
		return
	}
	now := p.now()
	if !p.applyRules(h, e, r, now) || r.Info.CrawlDelay == 0 {
		return
	}
	compliant, level, why := p.crawlDelayCompliance(r.Info)
	p.audit.emit(level, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayApplied, trigger: audit.TriggerCrawlDelay,
		base: h.policy.BaseDelay, computed: r.Info.CrawlDelay, compliant: compliant, status: int(r.Status),
		detail: why + "restored from the robots.txt read at " + r.FetchedAt.UTC().Format(time.RFC3339)})
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
func (p *Pacer) applyRules(h *host, e, r *robots.Entry, now time.Time) bool {
	delay, published := p.robots.KeyCrawlDelay(e, r)
	clamped := published > delay
	h.mu.Lock()
	changed := delay != h.crawlDelay || clamped != h.crawlClamped
	raised := delay > h.crawlDelay
	h.crawlDelay, h.crawlClamped = delay, clamped
	var brk *breaker.Change
	if clamped && !p.cfg.breaker.IgnoreCaps {
		brk = h.brk.Park(now, audit.TripCrawlDelay, r.FetchedAt.Add(p.cfg.robotsTTL))
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
func (p *Pacer) applyCrawlDelay(h *host, e *robots.Entry, now time.Time) {
	info := e.Info
	e.MarkApplied(h.serial)
	p.applyRules(h, e, e, now)

	for _, problem := range info.Problems {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventRobotsInvalid, trigger: audit.TriggerRobots,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: true, status: int(e.Status), detail: problem})
	}
	compliant, level, why := p.crawlDelayCompliance(info)
	if info.Published > info.CrawlDelay {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayClamped, trigger: audit.TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: compliant, status: int(e.Status),
			detail: p.crawlClampDetail(info)})
	}
	if info.CrawlDelay > 0 {
		p.audit.emit(level, auditEvent{at: now, host: h.key, event: audit.EventCrawlDelayApplied, trigger: audit.TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: compliant, status: int(e.Status), detail: strings.TrimSuffix(why, "; ")})
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

// serveRobots answers Colly's own robots.txt request from the cache, so robots.txt is fetched once
// per origin and Colly parses the sanitized body (one bad Crawl-delay line no longer fails every Visit).
func (p *Pacer) serveRobots(req *http.Request) (*http.Response, error) {
	e, err := p.ensureRobots(req.Context(), req.URL, p.cfg.hostKey(req.URL), req.Header.Get("User-Agent"))
	if err != nil {
		return nil, err
	}
	r := e.Rules()
	if r == nil {
		// Unreachable and the host parked. An error, which Colly does not cache: a 5xx would be read as
		// disallow-all for the collector's whole life.
		cause := e.Err
		if cause == nil {
			cause = fmt.Errorf("status %d", e.Status)
		}
		return nil, fmt.Errorf("%w: robots.txt of %s://%s not read (%v)", ErrBreakerOpen, req.URL.Scheme, req.URL.Host, cause)
	}
	e = r
	var body []byte
	if e.Status >= 200 && e.Status < 300 {
		body = e.Info.Body
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", e.Status, http.StatusText(int(e.Status))),
		StatusCode:    int(e.Status),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}
