package ext

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/robots"
)

// This file is a host's line: each request waits in its host's FIFO, at its head, until the breaker,
// the admission rule and (in a fleet) the shared store let it depart; a change of any input wakes the
// head at once.

// waiter is one request in its host's FIFO.
type waiter struct {
	r    float64       // its jitter draw, in [0, 1)
	wake chan struct{} // signalled (capacity 1) when it becomes the head or, as the head, when its inputs change
}

// wakeHeadLocked signals the head of the FIFO, if any: it became the head, or its inputs changed (an
// interval up or down, a hold, a wire instant, the breaker) and it computes its time again at once.
func (h *host) wakeHeadLocked() {
	if len(h.waiters) > 0 {
		select {
		case h.waiters[0].wake <- struct{}{}:
		default:
		}
	}
}

// leaveLocked removes w from the FIFO; when it was the head, the next one becomes the head.
func (h *host) leaveLocked(w *waiter) {
	for i, x := range h.waiters {
		if x == w {
			copy(h.waiters[i:], h.waiters[i+1:])
			h.waiters[len(h.waiters)-1] = nil
			h.waiters = h.waiters[:len(h.waiters)-1]
			if i == 0 {
				h.wakeHeadLocked()
			}
			return
		}
	}
}

// depart waits for the departure of a request to h asking at start (now), and
// returns its flight. traced says the pacer's transport will carry the request and report its wire
// instant. A first request waits until it departs or ctx ends; a redirect hop (hop) gives up
// deadlineMargin before ctx's deadline with errWaitBeyondDeadline. u is the request's URL (nil when
// unknown), for the audit trail.
func (p *Pacer) depart(ctx context.Context, h *host, u *url.URL, start time.Time, traced, hop bool) (*flight, error) {
	if hop {
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			what := "redirect hop to"
			if robots.Fetching(ctx) {
				what = "robots.txt read of"
			}
			ctx, cancel = context.WithDeadlineCause(ctx, deadline.Add(-deadlineMargin),
				fmt.Errorf("%w: %s %s", errWaitBeyondDeadline, what, h.key))
			defer cancel()
		}
	}
	res, err := p.waitDeparture(ctx, h, start, traced)
	if err == ErrBreakerOpen { // the host was parked (not wrapped): deferred at once, not a wait abandoned
		return nil, err
	}
	if err != nil {
		p.auditAbandoned(h, u, err)
		return nil, err
	}
	p.cfg.observer.Departed(h.key, res.Wait)
	f := &flight{res: res}
	f.res.url = u
	if traced {
		f.wirePending.Store(true)
	} else {
		if res.fleet { // no wire instant will come: it departs now
			p.fleetWired(h, res.At, res.At)
		}
		p.auditDeparture(f, res.At)
	}
	return f, nil
}

// waitDeparture joins h's FIFO and waits at its head until the breaker, the admission rule and, in a
// fleet, the shared store let the request go. It holds no lock while it sleeps, and fails only when ctx
// ends or the host's breaker is open (ErrBreakerOpen). The caller holds an in-flight slot.
func (p *Pacer) waitDeparture(ctx context.Context, h *host, start time.Time, traced bool) (Reservation, error) {
	r := p.cfg.random()
	h.mu.Lock()
	if h.parkedLocked(start, p.cfg.breaker) { // deferred at once, without joining the line
		h.mu.Unlock()
		return Reservation{Host: h.key, h: h}, ErrBreakerOpen
	}
	if len(h.waiters) == 0 && h.brk.State() == audit.BreakerClosed {
		// The fast path: nobody waits, and the rule may let it go at once (no fleet to ask).
		if at, res := h.earliestLocked(start, p.cfg.jitter, r); !at.After(start) && !p.fleetActive() && h.inFlight < h.capAt(start) {
			h.departLocked(&res, start, traced)
			h.flyLocked(&res)
			h.mu.Unlock()
			h.markDirty(p)
			return res, nil
		}
	}
	return p.waitInLine(ctx, h, start, traced, r)
}

// waitInLine is waitDeparture when the request cannot go at once: r is its jitter draw. Called with
// h.mu held, which it releases. A function of its own, so that the fast path keeps a small stack
// frame (a Colly request runs on a new goroutine, whose stack grows by copying).
func (p *Pacer) waitInLine(ctx context.Context, h *host, start time.Time, traced bool, r float64) (Reservation, error) {
	w := &waiter{r: r, wake: make(chan struct{}, 1)}
	h.waiters = append(h.waiters, w)
	isHead := len(h.waiters) == 1
	h.mu.Unlock()

	probe := false
	fail := func(err error) (Reservation, error) {
		h.mu.Lock()
		h.leaveLocked(w)
		h.mu.Unlock()
		if probe {
			h.abandonProbe()
		}
		return Reservation{Host: h.key, h: h}, err
	}
	if !isHead {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return fail(fmt.Errorf("ext: waiting to depart to %s: %w", h.key, context.Cause(ctx)))
		}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var wireWaitSince time.Time // when the fleet first said another process's departure was pending
	for {
		now := p.now()
		if !probe {
			adm, resolved, ch := h.admitAt(now, p.cfg.breaker)
			p.reportBreaker(h, ch, now)
			switch adm {
			case breaker.Defer:
				return fail(fmt.Errorf("%w: %s", ErrBreakerOpen, h.key))
			case breaker.WaitProbe:
				select {
				case <-resolved:
					continue
				case <-ctx.Done():
					return fail(fmt.Errorf("ext: waiting for the probe of %s: %w", h.key, context.Cause(ctx)))
				}
			case breaker.AdmittedProbe:
				probe = true
			}
		}
		h.mu.Lock()
		at, res := h.earliestLocked(now, p.cfg.jitter, w.r)
		limit, until := h.capLocked(now)
		capped := h.inFlight >= limit
		h.mu.Unlock()
		if capped && !at.After(now) {
			at = now.Add(maxWireWait) // a flight that lands wakes the head
			if !until.IsZero() && until.After(now) {
				at = until // or the oldest flight is presumed hung
			}
		} else if !at.After(now) {
			res.fleet = p.fleetActive()
			wait, ok, pending, facts, lost := p.fleetAdmit(ctx, h, res.Interval+res.Jitter, now)
			if lost != nil { // its lease no longer holds: it is not sent
				return fail(lost)
			}
			res.facts = facts
			if pending && wireWaitSince.IsZero() {
				wireWaitSince = now
			}
			if !ok {
				at = now.Add(wait)
				if !pending {
					// The fleet said wait (another member departed first, or the fleet's hold or
					// interval runs): this request draws its jitter again, as a member that departed
					// does for its next request, so that no member keeps a high draw and loses slot
					// after slot to the others.
					w.r = p.cfg.random()
					h.mu.Lock()
					_, fresh := h.earliestLocked(now, p.cfg.jitter, w.r)
					h.mu.Unlock()
					at = at.Add(fresh.Jitter - res.Jitter)
				}
			} else {
				if !wireWaitSince.IsZero() {
					p.auditWireWait(h, now.Sub(wireWaitSince), now)
					wireWaitSince = time.Time{}
				}
				h.mu.Lock()
				// A hold learned while the fleet was asked still stops it (the fleet's departure
				// stays recorded, not pending: one interval of conservatism, never an early request).
				if !now.Before(h.holdUntil) {
					h.departLocked(&res, now, traced)
					h.flyLocked(&res)
					h.leaveLocked(w)
					h.mu.Unlock()
					res.probe, res.Wait = probe, now.Sub(start)
					h.markDirty(p)
					return res, nil
				}
				at = h.holdUntil
				h.mu.Unlock()
				if res.fleet { // not a departure: the store must not hold the fleet for it
					p.fleetWired(h, now, now)
				}
			}
		}
		d := at.Sub(p.now())
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-w.wake:
			if !timer.Stop() {
				select { // drained for the next Reset (a timer that fired and was not read)
				case <-timer.C:
				default:
				}
			}
		case <-ctx.Done():
			return fail(fmt.Errorf("ext: waiting to depart to %s: %w", h.key, context.Cause(ctx)))
		}
	}
}
