package ext

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/rs/zerolog"
)

// Reading robots.txt through the pacer, and what an unreachable one does to its host (held, then
// parked): the fetch side of robotscache.go.

// readRobots makes one attempt at the robots.txt of origin into e, which replaces prev (nil for the
// first), and applies its outcome to h.
func (p *Pacer) readRobots(ctx context.Context, e, prev *robotsEntry, h *host, origin, agent string) {
	// A Crawl-delay above the cap keeps the breaker open while it is known; the read that re-evaluates
	// it must be able to go, as the breaker's probe. applyCrawlDelay sets it again from what is read.
	clamped := false
	if !p.cfg.breaker.IgnoreCaps {
		h.mu.Lock()
		clamped, h.crawlClamped = h.crawlClamped, false
		h.mu.Unlock()
	}
	read := p.fetchRobots(ctx, h.key, origin, agent)
	status, body, err := read.status, read.body, read.err
	e.fetchedAt, e.status, e.err = read.fetchedAt, int16(min(max(status, 0), 999)), err
	token := p.cfg.robotsAgent
	if token == "" {
		token = robotstxt.ProductToken(agent)
	}
	switch {
	case ctx.Err() != nil || errors.Is(err, errWaitBeyondDeadline) || errors.Is(err, ErrBreakerOpen) && p.hostParkedOrProbing(h):
		// Nothing learned of the host: its breaker kept the read from leaving, or the caller gave up
		// (or its deadline comes before the read could leave). A redirect to a parked host is a failure.
		e.void = true
		if clamped {
			h.mu.Lock()
			h.crawlClamped = true
			h.mu.Unlock()
		}
		p.robots.mu.Lock()
		if p.robots.m[origin] == e {
			if prev != nil {
				p.robots.m[origin] = prev
			} else {
				delete(p.robots.m, origin)
			}
		}
		p.robots.mu.Unlock()
		return
	case err != nil || robotstxt.StatusClass(status) == robotstxt.Unreachable:
		p.robotsFailed(e, prev, h)
		return
	case robotstxt.StatusClass(status) == robotstxt.Unavailable:
		// A 4xx, or a 3xx left after too many redirects (RFC 9309 lets us treat it as unavailable): no rules.
		e.info = robotstxt.Parse(http.StatusNotFound, nil, token, p.cfg.maxCrawlDelay)
	default:
		e.info = robotstxt.Parse(status, body, token, p.cfg.maxCrawlDelay)
	}
	now := e.fetchedAt
	if read.shared {
		now = p.now() // read by another pacer, earlier: its TTL runs from then, what it does from now
	}
	p.applyCrawlDelay(h, e, now)
}

// getRobots fetches origin's robots.txt through the pacer (a departure like any other) and returns
// its status and (size-limited) body.
func (p *Pacer) getRobots(ctx context.Context, origin, agent string) (int, []byte, error) {
	// Time the network, not the wait for a departure slot, whatever the transport: each hop from its
	// departure (the pacer's transport arms the clock the fetch's context carries) to its end (the body,
	// for the last one). The countdown pauses when a hop goes to the pacer.
	clock := &robotsClock{}
	ctx, cancel := context.WithCancelCause(context.WithValue(ctx, robotsFetchKey{}, clock))
	defer cancel(nil)
	clock.cancel = cancel
	defer clock.stop()
	rt := robotsRoundTrip(func(r *http.Request) (*http.Response, error) {
		clock.pause()
		return p.rt.RoundTrip(r)
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		return 0, nil, err
	}
	if agent != "" {
		req.Header.Set("User-Agent", agent)
	}
	client := &http.Client{
		Transport: rt,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > robotsMaxRedirects {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, robotstxt.MaxBody+1))
	return resp.StatusCode, body, err
}

type robotsRoundTrip func(*http.Request) (*http.Response, error)

func (f robotsRoundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// robotsClock cuts a robots.txt fetch off after robotsFetchTimeout of network time. The fetch's
// context carries it (robotsFetchKey), for the pacer's transport to arm when a hop departs.
type robotsClock struct {
	mu     sync.Mutex // protects timer
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// arm starts (or restarts) the countdown.
func (c *robotsClock) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil {
		c.timer = time.AfterFunc(robotsFetchTimeout, func() { c.cancel(errRobotsNoAnswer) })
		return
	}
	c.timer.Reset(robotsFetchTimeout)
}

// pause stops the countdown until the next arm.
func (c *robotsClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
}

func (c *robotsClock) stop() { c.pause() }

// robotsFailed records an unavailable robots.txt in e: the next try, and what applies until then.
// With an earlier copy, it still applies (RFC 9309 §2.4). Without, the host is held until the next
// try (RFC 9309 §2.3.1.4: unreachable means disallow), so nothing departs to it meanwhile (a Queue
// does not hand it out), and after robotsUnreachableLimit its breaker opens.
func (p *Pacer) robotsFailed(e, prev *robotsEntry, h *host) {
	now := e.fetchedAt
	e.unavailable, e.robotsOutage = true, &robotsOutage{attempt: 1, since: now}
	e.unreachable = unreachable(e.err)
	if prev != nil {
		e.cached = prev.rules()
		if prev.unavailable {
			e.attempt, e.since = prev.attempt+1, prev.since
		}
	}
	backoff := p.cfg.robotsRetry
	if e.attempt <= 30 {
		backoff = min(robotsRetryFirst<<(e.attempt-1), backoff)
	}
	e.retryAt = now.Add(backoff)
	limit := e.since.Add(robotsUnreachableLimit)

	var brk *breaker.Change
	h.mu.Lock()
	if e.cached == nil {
		if now.Before(limit) {
			e.retryAt = later(now, earlier(e.retryAt, limit)) // the last try at the limit
		} else {
			e.tripped = true
			e.retryAt = now // the breaker's probe, when it lets one through
			brk = h.brk.Trip(now, audit.TripRobotsUnreachable)
			h.wakeHeadLocked()
		}
		e.retryAt = later(e.retryAt, h.holdUntil) // a Retry-After on robots.txt itself is obeyed
		if e.retryAt.After(h.holdUntil) {
			h.holdUntil, h.holdTrigger = e.retryAt, audit.TriggerRobots
			if e.unreachable {
				h.holdTrigger = audit.TriggerUnreachable // not stored: a restart asks again at once
			}
			h.wakeHeadLocked()
		}
	}
	parked := h.brk.State() == audit.BreakerOpen
	h.mu.Unlock()
	h.markDirty(p)
	p.reportBreaker(h, brk, now)
	if e.cached != nil {
		p.reapplyRobots(h, e, e.cached) // its Crawl-delay (and clamp) stay in force
	}

	detail := fmt.Sprintf("robots.txt unavailable (status %d", e.status)
	if e.err != nil {
		detail += ", " + e.err.Error() // the audit log strips URL userinfo
	}
	detail += fmt.Sprintf("): attempt %d", e.attempt)
	if e.attempt > 1 {
		detail += " since " + e.since.UTC().Format(time.RFC3339)
	}
	next := "next try at " + e.retryAt.UTC().Format(time.RFC3339Nano)
	if parked {
		next = "next try when the breaker lets its probe through"
	}
	ev := auditEvent{at: now, host: h.key, event: audit.EventRobotsUnavailable, trigger: audit.TriggerRobots,
		base: h.policy.BaseDelay, computed: max(e.retryAt.Sub(now), 0), compliant: true, status: int(e.status)}
	switch {
	case e.cached != nil:
		ev.detail = fmt.Sprintf("%s; the robots.txt read at %s still applies; %s", detail, e.cached.fetchedAt.UTC().Format(time.RFC3339), next)
	case e.tripped:
		ev.detail = fmt.Sprintf("%s; unreachable for %v: host parked (%s), its requests deferred; %s",
			detail, now.Sub(e.since).Round(time.Second), audit.TripRobotsUnreachable, next)
	case e.unreachable:
		ev.windowStart, ev.windowEnd = now, e.retryAt
		ev.detail = fmt.Sprintf("%s; the host cannot be reached: its requests fail at once with this error until %s",
			detail, next)
	default:
		ev.windowStart, ev.windowEnd = now, e.retryAt
		ev.detail = fmt.Sprintf("%s; no rules known: the host's requests wait, %s; parked after %v unreachable",
			detail, next, robotsUnreachableLimit)
	}
	p.audit.emit(zerolog.WarnLevel, ev)
}

// errHostUnreachable is why a request fails without leaving: its origin cannot be reached at all.
var errHostUnreachable = errors.New("ext: host cannot be reached")

// unreachable reports whether err says that a host cannot be reached at all: its name does not resolve,
// or its address refuses connections or has no route. Such a host fails its requests at once (a user
// who misspelt a name or a port hears of it in OnError, as with plain Colly), rather than holding them
// as RFC 9309 asks for a robots.txt that is unavailable (5xx, timeouts), which a passing fault explains.
// Nothing is sent to the host either way.
func unreachable(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && !dns.IsTimeout && !dns.IsTemporary ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
