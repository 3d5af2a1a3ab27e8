package ext

import (
	"fmt"
	"maps"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// This file is how a Queue's request goes out: through the collector and the pacer, found again by
// its header map (dispatch), with the lease it departs under, and what the pacer says of its host.

// dispatch is a Queue's request on its way through Colly and the pacer, found by its header map's
// identity (Pacer.dispatched): the lease it departs under, and what became of it.
type dispatch struct {
	lease    *fleetLease // nil: not taken from a fleet's frontier
	departed atomic.Bool // the pacer let it go (it may still be refused on its way: fenced)
	fenced   atomic.Bool // not sent: its lease no longer held (ErrLeaseLost)
}

// send builds the Colly request for d and runs it on the worker's goroutine, under lease (nil: none).
// It reports whether the request departed: false when Colly refused it before it reached the pacer
// (visited, robots) or its wait ended without a departure (the crawl is ending); and whether it was
// not sent because its lease no longer held (fenced: it goes back to the frontier).
func (q *Queue) send(c *colly.Collector, d DeferredRequest, lease *fleetLease) (departed, fenced bool) {
	retry := d.Ctx[queueRetryKey] != ""
	if retry { // the mark is not passed on to the request's context (nor to its children)
		d.Ctx = maps.Clone(d.Ctx)
		delete(d.Ctx, queueRetryKey)
	}
	r, err := q.p.buildRequest(c, d)
	if err != nil {
		q.p.audit.emit(zerolog.ErrorLevel, auditEvent{at: q.p.now(), host: d.Host, event: audit.EventRetriesExhausted, trigger: audit.TriggerDeparture,
			compliant: true, detail: fmt.Sprintf("queued request %s could not be built: %v", q.p.auditRawURL(d.URL), err)})
		return false, false
	}
	r.Ctx.Put(queueCtxKey, q)
	id := headerID(*r.Headers)
	disp := &dispatch{lease: lease}
	q.p.dispatching.Add(1)
	q.p.dispatched.Store(id, disp)
	// Errors reach the collector's OnError, or are Colly's filters (visited, robots). A retry
	// bypasses the revisit check: its URL was marked visited when it was first sent.
	if retry {
		_ = r.Retry()
	} else {
		_ = r.Do()
	}
	q.p.dispatched.Delete(id)
	q.p.dispatching.Add(-1)
	fenced = disp.fenced.Load()
	return disp.departed.Load() && !fenced, fenced
}

// dispatchOf returns the Queue's dispatch of the request with this header map, nil when it is not a
// Queue's.
func (p *Pacer) dispatchOf(header http.Header) *dispatch {
	if p.dispatching.Load() == 0 { // no Queue is sending: most crawls
		return nil
	}
	if v, ok := p.dispatched.Load(headerID(header)); ok {
		return v.(*dispatch)
	}
	return nil
}

// residentHost returns key's host when it is in memory with its stored state restored, so that
// reading it does no store I/O (hostAt may: it restores a host, and may evict others); nil otherwise.
func (p *Pacer) residentHost(key string) *host {
	h, ok := p.hosts.Load(key)
	if !ok {
		return nil
	}
	select {
	case <-h.ready:
		return h
	default:
		return nil
	}
}

// readyAt returns when the next request to h could depart (the later of now, its next slot and its
// hold), whether its breaker has it parked (then: when the cool-down ends), and its interval.
func (p *Pacer) readyAt(h *host, now time.Time) (time.Time, bool, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	iv, _ := h.intervalLocked(now)
	switch h.brk.State() {
	case audit.BreakerOpen:
		if end := h.brk.ReopensAt(p.cfg.breaker.Cooldown); end.After(now) {
			return end, true, iv
		}
		return now, false, iv // the next request is the probe
	case audit.BreakerHalfOpen:
		if h.brk.Probing() {
			return now.Add(queuePoll), true, iv
		}
		return now, false, iv
	}
	if h.inFlight >= h.capAt(now) {
		return now.Add(queuePoll), false, iv
	}
	return later(now, h.nextLocked(now)), false, iv
}
