package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// AdaptivePacing installs start-based, adaptive, per-host pacing on c and returns the Pacer, whose
// Hosts method shows each host's state. Call it right after creating the collector: it wraps the
// collector's transport (pass your own with WithTransport, not Collector.WithTransport) and registers
// OnRequestHeaders, OnResponse and OnError callbacks that must run before yours.
func AdaptivePacing(c *colly.Collector, opts ...Option) *Pacer {
	p := NewPacer(opts...)
	p.Install(c)
	return p
}

// Install paces c with p, for collectors made with Clone (which share the transport but not callbacks)
// or several collectors sharing one schedule per host.
// Installing the same Pacer twice on one collector does nothing the second time.
func (p *Pacer) Install(c *colly.Collector) {
	c.WithTransport(p.rt)
	if _, dup := p.installed.LoadOrStore(c, true); dup {
		return
	}
	b := &binding{p: p, c: c}
	c.OnRequestHeaders(b.onRequestHeaders)
	c.OnResponse(b.onResponse)
	c.OnError(b.onError)
}

// binding is the pacer's state for one collector: Colly request IDs are unique per collector.
type binding struct {
	p       *Pacer
	c       *colly.Collector
	flights sync.Map     // request ID (uint32) → *flight, from departure to the request's callback
	stacked atomic.Int32 // consecutive responses whose callbacks ran late, as after a LimitRule Delay
	claimMu sync.Mutex   // makes claimAttempt's read and write of a request's Context one step
}

// claimAttempt reports whether r may go as the attempt its Context counts: false when that attempt
// was sent already, by another copy. That happens when an OnError callback calls Retry for a request
// the pacer retries too: both copies share the Context, so they share one retry counter, and the
// second copy of an attempt is dropped. Requests the pacer never retried are not tracked.
func (b *binding) claimAttempt(r *colly.Request) bool {
	key := attemptsKey(r)
	attempt := r.Ctx.Get(key)
	if attempt == "" {
		return true
	}
	b.claimMu.Lock()
	defer b.claimMu.Unlock()
	sent := sentKeyPrefix + key
	if r.Ctx.Get(sent) == attempt {
		return false
	}
	r.Ctx.Put(sent, attempt)
	return true
}

// dropDuplicate aborts a second copy of an attempt: the pacer retries the request already, or has
// given up on it. Its OnError sees ErrAbortedBeforeRequest with pacer.Retrying(resp) true.
func (b *binding) dropDuplicate(r *colly.Request) {
	p := b.p
	now := p.now()
	p.retrying.mark(r, now)
	if p.warn.first("retry_duplicate") {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: p.cfg.hostKey(r.URL), event: audit.EventRetryDuplicate, trigger: audit.TriggerRefusal,
			url: p.auditURL(r.URL), compliant: true,
			detail: "a refused request the pacer retries was retried by an OnError callback too: the second copy is dropped; " +
				"call Retry only when !pacer.Retrying(resp), or turn the pacer's retries off with WithMaxRetries(0)"})
	}
	r.Abort()
}

// onRequestHeaders is where a Colly request waits for its departure: after the cache (hits are not
// delayed) and the LimitRule slot, before http.Client.Do starts its timeout.
func (b *binding) onRequestHeaders(r *colly.Request) {
	p := b.p
	ctx := b.c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if !b.claimAttempt(r) {
		b.dropDuplicate(r)
		return
	}
	h := p.host(p.cfg.hostKey(r.URL))
	if p.cfg.robots { // first, whatever the breaker says: robots.txt is read again on its TTL
		agent := r.Headers.Get("User-Agent")
		if agent == "" {
			agent = b.c.UserAgent
		}
		if _, err := p.ensureRobots(ctx, r.URL, agent); err != nil {
			r.Abort()
			return
		}
	}
	if h.parked(p.now(), p.cfg.breaker) {
		b.deferRequest(r, h, ErrBreakerOpen)
		return
	}
	f, err := p.depart(ctx, h, true, false)
	if errors.Is(err, ErrBreakerOpen) {
		b.deferRequest(r, h, err)
		return
	}
	if err != nil {
		r.Abort()
		return
	}
	p.markDispatched(*r.Headers)
	f.parent, f.reqURL, f.res.url = ctx, r.URL, p.auditURL(r.URL)
	b.flights.Store(r.ID, f)
	p.rt.announce(r.URL, f)
}

// onResponse settles the flight. With ParseHTTPErrorResponse, refusals (429, 5xx) come here rather
// than to OnError: they are retried the same way.
func (b *binding) onResponse(resp *colly.Response) {
	f := b.settle(resp)
	if f == nil || resp.StatusCode < 400 {
		return
	}
	b.retryRefused(f, resp, nil)
}

// onError settles the flight and retries a refused request after the host's window; a request whose
// redirect hop met an open breaker is deferred.
func (b *binding) onError(resp *colly.Response, err error) {
	f := b.settle(resp)
	if f == nil || resp.Request == nil {
		return
	}
	b.retryRefused(f, resp, err)
}

// retryRefused retries a refused request after the host's window, or defers one whose redirect hop
// met an open breaker.
func (b *binding) retryRefused(f *flight, resp *colly.Response, err error) {
	if errors.Is(err, ErrBreakerOpen) {
		b.deferRequest(resp.Request, b.p.host(b.p.cfg.hostKey(resp.Request.URL)), err)
		return
	}
	v := b.verdict(f, resp, err)
	if ctx := b.c.Context; ctx != nil && ctx.Err() != nil {
		return // the crawl is ending: no retries
	}
	if v.Retry {
		b.retry(resp, v)
	}
}

// verdict is the verdict of the response the callbacks see: the one the flight's outcome received
// when it is that response (the transport observed it, or settle did for a bypassed transport), else
// resp classified here: a redirect hop's outcome, or a request that never left.
func (b *binding) verdict(f *flight, resp *colly.Response, err error) Verdict {
	if fv := f.verdict.Load(); fv != nil && fv.status == resp.StatusCode && resp.Request.URL == f.reqURL {
		return fv.v
	}
	return classify(Outcome{Status: resp.StatusCode, Header: responseHeader(resp), Err: transportErr(resp, err)})
}

// responseHeader is resp's header; nil when it has none.
func responseHeader(resp *colly.Response) http.Header {
	if resp.Headers == nil {
		return nil
	}
	return *resp.Headers
}

// transportErr returns err when it is a transport error (no status), nil otherwise: Colly turns a
// status ≥ 203 into an error of its own.
func transportErr(resp *colly.Response, err error) error {
	if resp.StatusCode != 0 {
		return nil
	}
	return err
}

// settle ends the flight of a network response: it detects a bypassed transport and a stacked
// LimitRule Delay. It returns the flight, nil when the response did not come from the network (the
// cache).
func (b *binding) settle(resp *colly.Response) *flight {
	if resp.Request == nil {
		return nil
	}
	v, ok := b.flights.LoadAndDelete(resp.Request.ID)
	if !ok {
		return nil
	}
	f := v.(*flight)
	p := b.p
	now := p.now()
	if !f.claimed.Load() {
		p.rt.unannounce(f.reqURL)
		if f.res.probe && resp.StatusCode == 0 {
			f.h.abandonProbe() // aborted before it left: the next request is the probe
		}
		if resp.StatusCode != 0 {
			// The response came back without passing the pacer's transport.
			f.wire(p, f.res.At, true)
			b.bypassed(f, resp, now)
		}
		f.finish(p, now)
		return f
	}
	f.finish(p, now)
	b.checkStacked(resp, now)
	return f
}

// bypassed reports loudly that requests reach the network without the pacing transport (a proxy,
// transport or client set after AdaptivePacing) and keeps pacing from the callbacks: departures still
// wait in OnRequestHeaders, and outcomes are observed here. Redirect hops are no longer paced.
func (b *binding) bypassed(f *flight, resp *colly.Response, now time.Time) {
	p := b.p
	o := Outcome{Status: resp.StatusCode, Header: responseHeader(resp), Latency: now.Sub(f.departed)}
	f.verdict.Store(&flightVerdict{v: p.ObserveAt(f.res, o, now), status: o.Status})
	if p.warn.first("bypass") {
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: f.h.key, event: audit.EventPacingBypassed, trigger: audit.TriggerTransport,
			base: f.h.policy.BaseDelay, status: resp.StatusCode, compliant: true,
			detail: "the collector's transport was replaced after AdaptivePacing (SetProxy, SetProxyFunc, SetClient or WithTransport): " +
				"redirect hops and robots.txt are no longer paced; pass your transport with ext.WithTransport instead"})
	}
}

// checkStacked warns when Colly's callbacks run long after the response body was closed, the
// signature of a LimitRule Delay sleeping while holding its slot: that adds latency + delay on top.
func (b *binding) checkStacked(resp *colly.Response, now time.Time) {
	if resp.Request == nil || resp.Request.URL == nil {
		return
	}
	h, ok := b.p.hosts.Load(b.p.cfg.hostKey(resp.Request.URL))
	if !ok {
		return
	}
	gap := now.Sub(time.Unix(0, h.lastBodyDone.Load()))
	if gap < defaultStackedDelayAlarm {
		b.stacked.Store(0)
		return
	}
	if b.stacked.Add(1) >= 2 && b.p.warn.first("limit_rule:"+h.key) {
		b.p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventLimitRuleStacked, trigger: audit.TriggerLimitRule,
			base: h.policy.BaseDelay, computed: gap, compliant: true, status: resp.StatusCode,
			detail: "responses reach callbacks late, as after a LimitRule Delay: it adds latency + delay on top of pacing; remove Delay from the LimitRule"})
	}
}

// retry sends a refused request again, tracked by c.Wait; it departs once the host's window ends.
func (b *binding) retry(resp *colly.Response, v Verdict) {
	p := b.p
	r := resp.Request
	h := p.host(p.cfg.hostKey(r.URL))
	key := attemptsKey(r)
	attempts, _ := strconv.Atoi(r.Ctx.Get(key)) // a string, so it survives deferral and queueing
	now := p.now()
	ev := auditEvent{at: now, host: h.key, trigger: v.Trigger, base: h.policy.BaseDelay, compliant: true, status: resp.StatusCode, url: p.auditURL(r.URL)}
	if attempts >= p.cfg.maxRetries {
		ev.event, ev.detail = audit.EventRetriesExhausted, fmt.Sprintf("gave up after %d retries", attempts)
		p.audit.emit(zerolog.WarnLevel, ev)
		return
	}
	r.Ctx.Put(key, strconv.Itoa(attempts+1))
	h.mu.Lock()
	h.retries++
	ev.computed = max(h.holdUntil.Sub(now), 0)
	h.mu.Unlock()
	ev.event, ev.detail = audit.EventRetryScheduled, fmt.Sprintf("retry %d of %d", attempts+1, p.cfg.maxRetries)
	p.audit.emit(zerolog.InfoLevel, ev)
	p.retrying.mark(r, now)
	if q, ok := r.Ctx.GetAny(queueCtxKey).(*Queue); ok {
		q.requeue(r) // a queue's worker must not wait out the window: the queue holds the retry
		return
	}
	if err := retryWithOwnHeaders(r); err != nil {
		p.retrying.unmark(r)
		ev.event, ev.detail = audit.EventRetriesExhausted, "retry not sent: "+err.Error()
		p.audit.emit(zerolog.WarnLevel, ev)
	}
}

// sentKeyPrefix starts the Context key recording the attempt last sent. It is not captured with a
// deferred or queued request: the copy sent again later is that attempt's only copy.
const sentKeyPrefix = "_collypace_sent "

// retryWithOwnHeaders sends r again with Request.Retry, giving the new request a copy of r's header
// map: Colly's fetch writes to the map it is given (User-Agent), and an OnError callback after ours
// that calls Retry too reads r's map meanwhile.
func retryWithOwnHeaders(r *colly.Request) error {
	orig := r.Headers
	if orig != nil {
		own := orig.Clone()
		r.Headers = &own
		defer func() { r.Headers = orig }()
	}
	return r.Retry()
}

// attemptsKey is the Context key counting the pacer's retries of r.
func attemptsKey(r *colly.Request) string {
	return "_collypace_attempts " + r.Method + " " + r.URL.String()
}

// Retrying reports, inside an OnError callback, whether the pacer is retrying this refused request;
// the final failure of a request, when retries run out, reports false.
func (p *Pacer) Retrying(resp *colly.Response) bool {
	return p.retrying.marked(resp)
}

// responseMarks remembers responses whose request is being retried (or was deferred), for Retrying
// and Deferred. Marks expire after retryMarkTTL, long after the OnError callbacks that read them have run.
type responseMarks struct {
	mu sync.Mutex // protects m
	m  map[*colly.Request]time.Time
}

const retryMarkTTL = 10 * time.Minute

func (m *responseMarks) mark(r *colly.Request, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[*colly.Request]time.Time)
	}
	if len(m.m) >= 1024 {
		for r, at := range m.m {
			if now.Sub(at) > retryMarkTTL {
				delete(m.m, r)
			}
		}
	}
	m.m[r] = now
}

func (m *responseMarks) unmark(r *colly.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, r)
}

func (m *responseMarks) marked(resp *colly.Response) bool {
	if resp == nil || resp.Request == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.m[resp.Request]
	return ok
}
