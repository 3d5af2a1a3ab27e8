package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
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
	b := newBinding(p, c)
	b.checkCallbackOrder()
	c.OnRequest(b.onRequest)
	c.OnRequestHeaders(b.onRequestHeaders)
	c.OnResponse(b.onResponse)
	c.OnError(b.onError)
}

// binding is the pacer's state for one collector: Colly request IDs are unique per collector.
type binding struct {
	p       *Pacer
	c       *colly.Collector
	flights flightTable[uint32] // by request ID, from departure to the request's callback
	stacked atomic.Int32        // consecutive responses whose callbacks ran late, as after a LimitRule Delay
}

func newBinding(p *Pacer, c *colly.Collector) *binding {
	b := &binding{p: p, c: c}
	b.flights.index = byRequestID
	return b
}

// checkCallbackOrder reports OnError and OnResponse callbacks registered before the pacer's: they run
// before the pacer has decided whether to retry a refusal, so pacer.Retrying says false for a refusal
// it goes on to retry, and a Retry they make goes out beside the pacer's own. Colly has no getter for
// its callbacks; their count is read by reflection (nothing is found if a Colly release renames them).
func (b *binding) checkCallbackOrder() {
	v := reflect.ValueOf(b.c).Elem()
	var before []string
	for _, name := range []string{"errorCallbacks", "responseCallbacks"} {
		if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.Slice && f.Len() > 0 {
			before = append(before, fmt.Sprintf("%d %s", f.Len(), name))
		}
	}
	if len(before) == 0 {
		return
	}
	p := b.p
	now := p.now()
	detail := "callbacks registered before AdaptivePacing/Install (" + strings.Join(before, ", ") + ") see refusals before the pacer does: " +
		"pacer.Retrying is false there for a refusal the pacer then retries, and a Retry they make is sent beside the pacer's; " +
		"call AdaptivePacing right after NewCollector"
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, event: audit.EventCallbacksBeforePacer, trigger: audit.TriggerRefusal, compliant: true, detail: detail})
	p.alert(Alert{At: now, Event: audit.EventCallbacksBeforePacer, Detail: detail})
}

// onRequestHeaders is where a Colly request waits for its departure: after the cache (hits are not
// delayed) and the LimitRule slot, before http.Client.Do starts its timeout.
func (b *binding) onRequestHeaders(r *colly.Request) {
	p := b.p
	ctx := b.c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	now := p.now() // one reading for the lookup, the breaker and the departure's start
	h := p.hostAt(p.cfg.hostKey(r.URL), now)
	if p.cfg.robots { // first, whatever the breaker says: robots.txt is read again on its TTL
		agent := r.Headers.Get("User-Agent")
		if agent == "" {
			agent = b.c.UserAgent
		}
		if _, err := p.ensureRobots(ctx, r.URL, h.key, agent); err != nil {
			switch {
			case ctx.Err() != nil:
				b.crawlEnded(r)
			case errors.Is(err, errHostUnreachable):
				p.rt.failWith(r.URL, err) // OnError gets the network's error, not "Aborted before Do Request"
			default:
				r.Abort()
			}
			return
		}
		now = p.now() // reading robots.txt took time
	}
	disp := p.dispatchOf(*r.Headers) // a Queue's request: the lease it departs under, if any
	wctx := ctx
	if disp != nil && disp.lease != nil {
		wctx = context.WithValue(ctx, leaseCtxKey{}, disp.lease) // its admission proves the lease
	}
	f, err := p.depart(wctx, h, r.URL, now, true, false) // a parked host's request is deferred at once

	if errors.Is(err, ErrBreakerOpen) {
		b.deferRequest(r, h, err)
		return
	}
	if errors.Is(err, ErrLeaseLost) {
		disp.fenced.Store(true)
		b.leaseLost(r, err)
		return
	}
	if err != nil { // only the collector's context ends a first request's wait
		b.crawlEnded(r)
		return
	}
	if disp != nil {
		disp.departed.Store(true)
		f.disp = disp
	}
	f.parent = ctx
	b.flights.store(r.ID, f)
	p.rt.announce(r.URL, f)
}

// leaseLost drops a Queue's request that was not sent because its lease no longer held: the frontier
// hands it to the host's next holder. OnError sees err (ErrLeaseLost) with Deferred true (it is kept),
// and a Retry of it is dropped.
func (b *binding) leaseLost(r *colly.Request, err error) {
	now := b.p.now()
	b.p.deferred.mark(r, now)
	b.p.tries.settle(r, tryDeferred, now)
	b.p.rt.failWith(r.URL, err) // its first hop fails without leaving
}

// crawlEnded lets a request whose wait the collector's context ended go on to http.Client.Do, which
// fails at once with the context's error (the transport sends nothing after the context ends): OnError
// then sees an error that wraps context.Canceled, or the context's cause, rather than Colly's
// "Aborted before Do Request". A Retry of it is dropped as a duplicate: the crawl is over.
func (b *binding) crawlEnded(r *colly.Request) {
	b.p.tries.settle(r, tryCancelled, b.p.now())
}

// onResponse settles the flight. With ParseHTTPErrorResponse, refusals (429, 5xx) come here rather
// than to OnError: they are retried the same way.
func (b *binding) onResponse(resp *colly.Response) {
	f := b.settle(resp)
	if resp.StatusCode < 400 {
		b.p.tries.forget(headerOf(resp.Request)) // nothing will retry it
		return
	}
	if f != nil {
		b.retryRefused(f, resp, nil)
	}
}

// onError settles the flight and retries a refused request after the host's window; a request whose
// redirect hop met an open breaker is deferred.
func (b *binding) onError(resp *colly.Response, err error) {
	f := b.settle(resp)
	if f == nil || resp.Request == nil {
		if resp.Request != nil && resp.StatusCode == 0 {
			b.p.rt.failing.Delete(urlID(resp.Request.URL)) // failed before the transport, if it never got there
		}
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
	if errors.Is(err, ErrLeaseLost) { // not sent (the transport found its lease over): the frontier's
		b.p.leaveToFrontier(resp.Request, b.p.now())
		return
	}
	v, at := b.verdict(f, resp, err)
	if ctx := b.c.Context; ctx != nil && ctx.Err() != nil {
		b.crawlEnded(resp.Request) // the crawl is ending: no retries
		return
	}
	if v.Retry {
		if b.p.retryIsTheFrontiers(resp.Request) {
			return
		}
		b.retry(resp, v, at)
	}
}

// verdict is the verdict of the response the callbacks see, and when the pacer read it: the one the
// flight's outcome received when it is that response (the transport observed it, or settle did for a
// bypassed transport), else resp classified here, now: a redirect hop's outcome, or a request that
// never left.
func (b *binding) verdict(f *flight, resp *colly.Response, err error) (Verdict, time.Time) {
	if fv := f.verdict.Load(); fv != nil && fv.status == resp.StatusCode && resp.Request.URL == f.res.url {
		if fv.at.IsZero() { // cleanOK: no instant kept
			return fv.v, b.p.now()
		}
		return fv.v, fv.at
	}
	return classify(Outcome{Status: resp.StatusCode, Header: responseHeader(resp), Err: transportErr(resp, err)}), b.p.now()
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
	f := b.flights.take(resp.Request.ID)
	if f == nil {
		return nil
	}
	p := b.p
	now := p.now()
	if !f.claimed.Load() {
		p.rt.unannounce(f.res.url)
		if f.res.probe && resp.StatusCode == 0 {
			f.res.h.abandonProbe() // aborted before it left: the next request is the probe
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
	b.checkStacked(f.res.h, resp.StatusCode, now)
	return f
}

// bypassed reports loudly that requests reach the network without the pacing transport (a proxy,
// transport or client set after AdaptivePacing) and keeps pacing from the callbacks: departures still
// wait in OnRequestHeaders, and outcomes are observed here. Redirect hops are no longer paced.
func (b *binding) bypassed(f *flight, resp *colly.Response, now time.Time) {
	p := b.p
	o := Outcome{Status: resp.StatusCode, Header: responseHeader(resp), Latency: now.Sub(f.res.At)}
	f.verdict.Store(&flightVerdict{v: p.ObserveAt(f.res, o, now), status: o.Status, at: now})
	if p.warn.first("bypass") {
		detail := "the collector's transport was replaced after AdaptivePacing (SetProxy, SetProxyFunc, SetClient or WithTransport): " +
			"redirect hops and robots.txt are no longer paced; pass your transport with ext.WithTransport instead"
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: f.res.h.key, event: audit.EventPacingBypassed, trigger: audit.TriggerTransport,
			base: f.res.h.policy.BaseDelay, status: resp.StatusCode, compliant: true, detail: detail})
		p.alert(Alert{At: now, Host: f.res.h.key, Event: audit.EventPacingBypassed, Detail: detail})
	}
}

// checkStacked warns when Colly's callbacks run long after the response body was closed, the
// signature of a LimitRule Delay sleeping while holding its slot: that adds latency + delay on top.
// h is the flight's host, status the response's.
func (b *binding) checkStacked(h *host, status int, now time.Time) {
	gap := now.Sub(time.Unix(0, h.lastBodyDone.Load()))
	if gap < defaultStackedDelayAlarm {
		if b.stacked.Load() != 0 { // written only when it changes: every response reads it, from any core
			b.stacked.Store(0)
		}
		return
	}
	if b.stacked.Add(1) >= 2 && b.p.warn.first("limit_rule:"+h.key) {
		b.p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventLimitRuleStacked, trigger: audit.TriggerLimitRule,
			base: h.policy.BaseDelay, computed: gap, compliant: true, status: status,
			detail: "responses reach callbacks late, as after a LimitRule Delay: it adds latency + delay on top of pacing; remove Delay from the LimitRule"})
	}
}
