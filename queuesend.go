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
	// fenced: its lease no longer held. Not sent (ErrLeaseLost), or its retry was asked for once the
	// lease had ended (a pause outlasted it while the request was in flight): either way it is neither
	// queued again nor marked done here, and the frontier hands it to the host's next holder.
	fenced atomic.Bool
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

// retryIsTheFrontiers reports whether r, a fleet Queue's request that asks for a retry, was taken under
// a lease that no longer holds (a pause outlasted it while r was in flight: its timeout fired on
// resuming): the frontier hands r to the host's next holder, as it does every request taken and not
// done, and may have already; queued again here (a retry is queued even though its key was), it would be
// sent once more. r is then deferred, as a request fenced before it left is: OnError's Deferred reports
// true, and the worker neither queues nor marks it done.
func (p *Pacer) retryIsTheFrontiers(r *colly.Request) bool {
	if r.Headers == nil {
		return false
	}
	disp := p.dispatchOf(*r.Headers)
	if disp == nil || disp.lease == nil {
		return false
	}
	now := p.now()
	if holds, _ := disp.lease.holds(now); holds {
		return false
	}
	disp.fenced.Store(true)
	p.leaveToFrontier(r, now)
	return true
}

// leaveToFrontier defers r, a fleet Queue's request whose lease no longer holds, to the frontier, which
// hands it to the host's next holder: OnError's Deferred reports true, and a user's Retry of it would
// send it twice.
func (p *Pacer) leaveToFrontier(r *colly.Request, now time.Time) {
	p.deferred.mark(r, now)
	p.tries.settle(r, tryDeferred, now)
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
