package ext

import (
	"context"
	"time"
)

// A departure taken from the fleet's frontier under a lease reports its wire instant to the shared
// store late: the host's next admission under the same lease carries it (FrontierAdmit's
// departedAgo), so that a busy leased host costs the store one call a page for its pacing instead of
// two. Until the store knows it, the departure stays pending there, which holds back only departures
// this member does not make: the lease gives this member every departure of the frontier's requests to
// the host, its own admissions carry the instant, and a process pacing the same host outside the
// frontier (plain Colly on the SharedStore) is held by a pending departure only once the interval from
// it has passed, so at most wireLingerExtra longer than it would be. The instant goes on its own when
// no admission takes it within wireLinger, when the lease is given back or found lost, and at Close; a
// process killed meanwhile leaves it pending until its store's liveness runs out, as a kill between a
// departure and its report always did (the store ends the pending departure of a dead process).

// wireLingerExtra bounds how long past the host's interval a deferred wire instant waits for the next
// admission: the jitter and the Queue's scheduling put the next departure a little after the interval.
const wireLingerExtra = 250 * time.Millisecond

// wireLinger is how long a departure's wire instant waits for the host's next admission under the same
// lease, for an interval iv: iv plus a quarter of it, at most wireLingerExtra more.
func wireLinger(iv time.Duration) time.Duration {
	return iv + min(iv/4, wireLingerExtra)
}

// deferredWire is a wire instant not yet reported to the shared store: the departure admitted at
// admitted, under lease, reached the wire at at. timer reports it on its own after wireLinger.
type deferredWire struct {
	admitted, at time.Time
	lease        *fleetLease
	timer        *time.Timer
}

// deferWire keeps the wire instant at of h's departure admitted at admitted under lease l for the
// host's next admission (takeWire), and arms its report on its own after wireLinger.
func (p *Pacer) deferWire(h *host, admitted, at time.Time, l *fleetLease) {
	dw := &deferredWire{admitted: admitted, at: at, lease: l}
	h.mu.Lock()
	iv, _ := h.intervalLocked(at)
	prev := h.wire
	h.wire = dw
	dw.timer = time.AfterFunc(wireLinger(iv), func() { p.flushWire(h, dw) })
	h.mu.Unlock()
	if prev != nil { // a departure that reached the wire before the one admitted after it asked: rare
		prev.timer.Stop()
		p.reportWired(h, prev.admitted, prev.at)
	}
}

// flushWire reports dw, h's deferred wire instant, on its own, unless an admission took it already.
func (p *Pacer) flushWire(h *host, dw *deferredWire) {
	h.mu.Lock()
	mine := h.wire == dw
	if mine {
		h.wire = nil
	}
	h.mu.Unlock()
	if mine {
		dw.timer.Stop()
		p.reportWired(h, dw.admitted, dw.at)
	}
}

// flushWireOf reports h's deferred wire instant on its own, if it has one: its lease is given back or
// lost, so no admission of this member will carry it.
func (p *Pacer) flushWireOf(h *host) {
	h.mu.Lock()
	dw := h.wire
	h.mu.Unlock()
	if dw != nil {
		p.flushWire(h, dw)
	}
}

// takeWire takes h's deferred wire instant for an admission under lease l to carry, nil when there is
// none. One deferred under another lease of the host is reported on its own instead.
func (p *Pacer) takeWire(h *host, l *fleetLease) *deferredWire {
	h.mu.Lock()
	dw := h.wire
	h.wire = nil
	h.mu.Unlock()
	if dw == nil {
		return nil
	}
	dw.timer.Stop()
	if dw.lease != l {
		p.reportWired(h, dw.admitted, dw.at)
		return nil
	}
	return dw
}

// flushWires reports every deferred wire instant, each in one call, before the pacer closes.
func (p *Pacer) flushWires() {
	p.hosts.Range(func(h *host) {
		h.mu.Lock()
		dw := h.wire
		h.wire = nil
		h.mu.Unlock()
		if dw == nil {
			return
		}
		dw.timer.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		start := p.now()
		if err := p.persist.shared.Departed(ctx, h.key, start.Sub(dw.at)); err != nil {
			p.storeStalled(h.key, "departed", err, start, p.now())
		}
	})
}
