package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/robots"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/rs/zerolog"
)

// One read of robots.txt and what its outcome does to the host: its rules applied, or, unavailable,
// the host held, then parked. The read itself (through the pacer's transport, or a fleet's store) is
// package internal/robots's Fetcher.

// readRobots makes one attempt at the robots.txt of origin into e, which replaces prev (nil for the
// first), and applies its outcome to h. It returns the error that makes the caller give up, if any.
func (p *Pacer) readRobots(ctx context.Context, e, prev *robots.Entry, h *host, origin, agent string) error {
	// A Crawl-delay above the cap keeps the breaker open while it is known; the read that re-evaluates
	// it must be able to go, as the breaker's probe. applyCrawlDelay sets it again from what is read.
	clamped := false
	if !p.cfg.breaker.IgnoreCaps {
		h.mu.Lock()
		clamped, h.crawlClamped = h.crawlClamped, false
		h.mu.Unlock()
	}
	read := p.robotsFetcher().Fetch(ctx, h.key, origin, agent)
	status, body, err := read.Status, read.Body, read.Err
	e.FetchedAt, e.Status, e.Err = read.FetchedAt, int16(min(max(status, 0), 999)), err
	token := p.cfg.robotsAgent
	if token == "" {
		token = robotstxt.ProductToken(agent)
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, errWaitBeyondDeadline) || errors.Is(err, ErrBreakerOpen) && p.hostParkedOrProbing(h):
		// Nothing learned of the host: its breaker kept the read from leaving, or the caller gave up
		// (or its deadline comes before the read could leave). A redirect to a parked host is a failure.
		e.Void = true
		if clamped {
			h.mu.Lock()
			h.crawlClamped = true
			h.mu.Unlock()
		}
		p.robots.Abandon(origin, e, prev)
		if errors.Is(err, errWaitBeyondDeadline) {
			return err
		}
		return nil
	case err != nil || robotstxt.StatusClass(status) == robotstxt.Unreachable:
		p.robotsFailed(e, prev, h)
		return nil
	case robotstxt.StatusClass(status) == robotstxt.Unavailable:
		// A 4xx, or a 3xx left after too many redirects (RFC 9309 lets us treat it as unavailable): no rules.
		e.Info = robotstxt.Parse(http.StatusNotFound, nil, token, p.cfg.maxCrawlDelay)
	default:
		e.Info = robotstxt.Parse(status, body, token, p.cfg.maxCrawlDelay)
	}
	now := e.FetchedAt
	if read.Shared {
		now = p.now() // read by another pacer, earlier: its TTL runs from then, what it does from now
	}
	p.applyCrawlDelay(h, e, now)
	return nil
}

// robotsFetcher reads robots.txt through the pacer's transport, and through its store when the store
// shares reads (robotsStore).
func (p *Pacer) robotsFetcher() *robots.Fetcher {
	f := &robots.Fetcher{Transport: p.rt, TTL: p.cfg.robotsTTL, StoreTimeout: storeTimeout, Corrupt: ErrCorruptState,
		Now: p.now, SleepUntil: p.sleepUntil, Event: p.robotsStoreEvent}
	if rs, ok := p.cfg.store.(robotsStore); ok {
		f.Store = rs
	}
	return f
}

// robotsStoreEvent audits what the store did to a robots.txt read.
func (p *Pacer) robotsStoreEvent(hostKey string, event audit.Event, detail string) {
	p.audit.emit(zerolog.ErrorLevel, auditEvent{at: p.now(), host: hostKey, event: event, trigger: audit.TriggerStore,
		compliant: true, detail: detail})
}

// hostParkedOrProbing reports whether h's breaker is not closed: a robots.txt read it refused says
// nothing of robots.txt.
func (p *Pacer) hostParkedOrProbing(h *host) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.brk.State() != audit.BreakerClosed
}

// robotsFailed records an unavailable robots.txt in e (robots.Entry.Fail: the next try, and what
// applies until then) and applies it to h. With an earlier copy, it still applies (RFC 9309 §2.4).
// Without, the host is held until the next try (RFC 9309 §2.3.1.4: unreachable means disallow), so
// nothing departs to it meanwhile (a Queue does not hand it out), and after robotsUnreachableLimit its
// breaker opens.
func (p *Pacer) robotsFailed(e, prev *robots.Entry, h *host) {
	now := e.FetchedAt
	e.Fail(prev, p.cfg.robotsRetry, robotsUnreachableLimit)

	var brk *breaker.Change
	h.mu.Lock()
	if e.Cached == nil {
		if e.Tripped {
			brk = h.brk.Trip(now, audit.TripRobotsUnreachable)
			h.wakeHeadLocked()
		}
		e.RetryAt = later(e.RetryAt, h.holdUntil) // a Retry-After on robots.txt itself is obeyed
		if e.RetryAt.After(h.holdUntil) {
			h.holdUntil, h.holdTrigger = e.RetryAt, audit.TriggerRobots
			if e.Unreachable {
				h.holdTrigger = audit.TriggerUnreachable // not stored: a restart asks again at once
			}
			h.wakeHeadLocked()
		}
	}
	parked := h.brk.State() == audit.BreakerOpen
	h.mu.Unlock()
	h.markDirty(p)
	p.reportBreaker(h, brk, now)
	if e.Cached != nil {
		p.reapplyRobots(h, e, e.Cached) // its Crawl-delay (and clamp) stay in force
	}

	detail := fmt.Sprintf("robots.txt unavailable (status %d", e.Status)
	if e.Err != nil {
		detail += ", " + e.Err.Error() // the audit log strips URL userinfo
	}
	detail += fmt.Sprintf("): attempt %d", e.Attempt)
	if e.Attempt > 1 {
		detail += " since " + e.Since.UTC().Format(time.RFC3339)
	}
	next := "next try at " + e.RetryAt.UTC().Format(time.RFC3339Nano)
	if parked {
		next = "next try when the breaker lets its probe through"
	}
	ev := auditEvent{at: now, host: h.key, event: audit.EventRobotsUnavailable, trigger: audit.TriggerRobots,
		base: h.policy.BaseDelay, computed: max(e.RetryAt.Sub(now), 0), compliant: true, status: int(e.Status)}
	switch {
	case e.Cached != nil:
		ev.detail = fmt.Sprintf("%s; the robots.txt read at %s still applies; %s", detail, e.Cached.FetchedAt.UTC().Format(time.RFC3339), next)
	case e.Tripped:
		ev.detail = fmt.Sprintf("%s; unreachable for %v: host parked (%s), its requests deferred; %s",
			detail, now.Sub(e.Since).Round(time.Second), audit.TripRobotsUnreachable, next)
	case e.Unreachable:
		ev.windowStart, ev.windowEnd = now, e.RetryAt
		ev.detail = fmt.Sprintf("%s; the host cannot be reached: its requests fail at once with this error until %s",
			detail, next)
	default:
		ev.windowStart, ev.windowEnd = now, e.RetryAt
		ev.detail = fmt.Sprintf("%s; no rules known: the host's requests wait, %s; parked after %v unreachable",
			detail, next, robotsUnreachableLimit)
	}
	p.audit.emit(zerolog.WarnLevel, ev)
}
