package ext

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// robotsFetchTimeout bounds one robots.txt fetch, redirects included.
const robotsFetchTimeout = 10 * time.Second

// robotsMaxRedirects is how many redirects a robots.txt fetch follows (RFC 9309 §2.3.1.2: at least five).
const robotsMaxRedirects = 5

// robotsCache holds one robots.txt per origin, fetched once through the pacer and kept for the TTL
// (24 h); an unavailable one (5xx, network error) is fetched again after the retry delay.
type robotsCache struct {
	mu    sync.Mutex // protects m and byKey
	m     map[string]*robotsEntry
	byKey map[string][]string // host key → the origins paced under it (WithHostKey can join several)
}

type robotsEntry struct {
	key       string        // the host key of the origin, set at creation
	done      chan struct{} // closed when the fetch ends; the fields below are then read-only
	fetchedAt time.Time
	retryAt   time.Time // set when robots.txt was unavailable
	status    int
	info      robotsInfo
	err       error
}

func (c *robotsCache) init() {
	c.m = make(map[string]*robotsEntry)
	c.byKey = make(map[string][]string)
}

// fresh reports whether e can be used at now (or is still being fetched).
func (e *robotsEntry) fresh(now time.Time, ttl time.Duration) bool {
	select {
	case <-e.done:
	default:
		return true
	}
	if !e.retryAt.IsZero() {
		return now.Before(e.retryAt)
	}
	return now.Before(e.fetchedAt.Add(ttl))
}

// robotsKnown reports whether the robots.txt of rawURL's origin is known and fresh at now.
func (p *Pacer) robotsKnown(rawURL string, now time.Time) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true // nothing to fetch: the request will fail on its own
	}
	p.robots.mu.Lock()
	e := p.robots.m[u.Scheme+"://"+u.Host]
	p.robots.mu.Unlock()
	if e == nil {
		return false
	}
	select {
	case <-e.done:
		return e.fresh(now, p.cfg.robotsTTL)
	default:
		return false
	}
}

// ensureRobots makes sure the robots.txt of u's origin is known (fetching it once, through the pacer)
// and returns its entry. agent is the User-Agent the fetch sends.
func (p *Pacer) ensureRobots(ctx context.Context, u *url.URL, agent string) (*robotsEntry, error) {
	origin := u.Scheme + "://" + u.Host
	key := p.cfg.hostKey(u) // before the lock: a key function may look the name up (ByIP)
	now := p.now()
	p.robots.mu.Lock()
	e := p.robots.m[origin]
	if e != nil && e.fresh(now, p.cfg.robotsTTL) {
		p.robots.mu.Unlock()
		select {
		case <-e.done:
			return e, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("ext: waiting for robots.txt of %s: %w", origin, context.Cause(ctx))
		}
	}
	if p.robots.m[origin] == nil {
		p.robots.byKey[key] = append(p.robots.byKey[key], origin)
	}
	e = &robotsEntry{key: key, done: make(chan struct{})}
	p.robots.m[origin] = e
	p.robots.mu.Unlock()

	p.fetchRobots(ctx, e, u, origin, agent)
	close(e.done)
	return e, nil
}

// fetchRobots fills e with the robots.txt of origin and applies its Crawl-delay to the host.
func (p *Pacer) fetchRobots(ctx context.Context, e *robotsEntry, u *url.URL, origin, agent string) {
	h := p.host(e.key)
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, robotsFetchKey{}, true), robotsFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/robots.txt", nil)
	if err != nil {
		e.err = err
		return
	}
	if agent != "" {
		req.Header.Set("User-Agent", agent)
	}
	client := &http.Client{
		Transport: p.rt,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > robotsMaxRedirects {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	var body []byte
	resp, err := client.Do(req)
	if err == nil {
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxRobotsBody+1))
		resp.Body.Close()
		e.status = resp.StatusCode
	}
	e.fetchedAt = p.now()
	token := p.cfg.robotsAgent
	if token == "" {
		token = productToken(agent)
	}
	switch {
	case err != nil || e.status >= 500 || e.status == http.StatusTooManyRequests:
		e.err = err
		e.retryAt = e.fetchedAt.Add(p.cfg.robotsRetry)
		detail := fmt.Sprintf("robots.txt unavailable (status %d", e.status)
		if err != nil {
			detail += ", " + err.Error() // the audit log strips URL userinfo
		}
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: e.fetchedAt, host: h.key, event: EventRobotsUnavailable,
			trigger: TriggerRobots, base: h.policy.BaseDelay, compliant: true, status: e.status,
			detail: detail + "): Crawl-delay unknown, fetched again after " + p.cfg.robotsRetry.String()})
		return
	case e.status >= 300 && e.status < 400:
		// Too many redirects: RFC 9309 lets us treat robots.txt as unavailable, that is, no rules.
		e.info = parseRobots(http.StatusNotFound, nil, token, p.cfg.maxCrawlDelay)
	default:
		e.info = parseRobots(e.status, body, token, p.cfg.maxCrawlDelay)
	}
	p.applyCrawlDelay(h, e)
}

// applyCrawlDelay makes a robots.txt's Crawl-delay part of the host's interval and audits what was
// not taken as published.
func (p *Pacer) applyCrawlDelay(h *host, e *robotsEntry) {
	now := e.fetchedAt
	info := e.info
	delay, published := p.keyCrawlDelay(e)
	h.mu.Lock()
	changed := delay != h.crawlDelay
	h.crawlDelay = delay
	h.crawlClamped = published > delay
	if changed {
		h.changedLocked()
	}
	var brk *breakerChange
	if h.crawlClamped && !p.cfg.breaker.IgnoreCaps {
		brk = h.brk.tripLocked(now, TripCrawlDelay)
	}
	h.mu.Unlock()
	h.markDirty(p)
	p.reportBreaker(h, brk, now)

	for _, problem := range info.Problems {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: EventRobotsInvalid, trigger: TriggerRobots,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: true, status: e.status, detail: problem})
	}
	if info.Published > info.CrawlDelay {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: EventCrawlDelayClamped, trigger: TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: false, status: e.status,
			detail: fmt.Sprintf("robots.txt asks for %v, honoured up to %v", info.Published, info.CrawlDelay)})
	}
	if info.CrawlDelay > 0 {
		compliant := info.Published <= info.CrawlDelay
		level := zerolog.InfoLevel
		if !compliant {
			level = zerolog.WarnLevel
		}
		p.audit.emit(level, auditEvent{at: now, host: h.key, event: EventCrawlDelayApplied, trigger: TriggerCrawlDelay,
			base: h.policy.BaseDelay, computed: info.CrawlDelay, compliant: compliant, status: e.status})
	}
}

// keyCrawlDelay returns the largest Crawl-delay, as honoured and as published, among the robots.txt
// of the origins sharing e's host key: e's, and the others' already fetched. With the default host key
// that is e's alone; a key joining several origins (ByRegistrableDomain, ByIP) paces them by the
// strictest.
func (p *Pacer) keyCrawlDelay(e *robotsEntry) (delay, published time.Duration) {
	delay, published = e.info.CrawlDelay, e.info.Published
	p.robots.mu.Lock()
	defer p.robots.mu.Unlock()
	for _, origin := range p.robots.byKey[e.key] {
		o := p.robots.m[origin]
		if o == nil || o == e {
			continue
		}
		select {
		case <-o.done:
			delay, published = max(delay, o.info.CrawlDelay), max(published, o.info.Published)
		default:
		}
	}
	return delay, published
}

// serveRobots answers Colly's own robots.txt request from the cache, so robots.txt is fetched once
// per origin and Colly parses the sanitized body (one bad Crawl-delay line no longer fails every Visit).
func (p *Pacer) serveRobots(req *http.Request) (*http.Response, error) {
	e, err := p.ensureRobots(req.Context(), req.URL, req.Header.Get("User-Agent"))
	if err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	var body []byte
	if e.status >= 200 && e.status < 300 {
		body = e.info.Body
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", e.status, http.StatusText(e.status)),
		StatusCode:    e.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}
