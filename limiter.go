package ext

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrWaitBeyondDeadline is returned when a departure would have to wait past the context's deadline
// (less deadlineMargin, left for the request itself): a redirect hop whose wait does not fit in the
// client's timeout. The request is retried.
var ErrWaitBeyondDeadline = errors.New("ext: departure would wait past the request deadline")

// deadlineMargin is the time a departure must leave before its context's deadline.
const deadlineMargin = time.Second

// host is one host's departure schedule, in-flight cap and pacing state.
//
// The schedule is start-based: a request departs no earlier than the previous departure plus the
// interval in effect then. Reservations hand out departure slots in order; an increase of the
// interval or a new hold (Retry-After, exhausted rate limit) bumps the generation, and a waiter whose
// reservation is of an older generation re-reserves when it wakes instead of departing.
type host struct {
	key    string
	policy HostPolicy
	slots  chan struct{} // the in-flight semaphore, capacity policy.MaxInFlight

	lastBodyDone atomic.Int64  // unix nanos when a response body to this host was last closed
	ready        chan struct{} // closed once the stored state is restored
	dirty        atomic.Bool   // changed since the last write-behind flush
	lastUse      atomic.Int64  // unix nanos of the last lookup, for idle eviction

	mu            sync.Mutex // protects the fields below
	delay         adaptive
	epoch         uint64    // bumped when the interval grows: outstanding reservations are void
	next          time.Time // earliest departure of the next reservation
	lastDeparture time.Time
	holdUntil     time.Time // no departure before: Retry-After window or exhausted rate limit
	holdTrigger   string
	crawlDelay    time.Duration
	crawlClamped  bool // robots.txt asked for more than we honour
	rate          rateLimitSignal
	brk           breaker
	departures    int64
	refusals      int64
	retries       int64
}

func newHost(key string, p HostPolicy) *host {
	return &host{
		key:    key,
		policy: p,
		slots:  make(chan struct{}, p.MaxInFlight),
		delay:  newAdaptive(p.BaseDelay),
		ready:  closed,
	}
}

// closed is the ready channel of hosts with nothing to restore.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Reservation is a departure slot on a host's schedule.
type Reservation struct {
	Host      string
	At        time.Time     // when the request may depart
	Interval  time.Duration // the interval after it, jitter excluded
	Jitter    time.Duration // the random extra added to Interval
	Trigger   string        // what set Interval (or "retry_after"/"rate_limit" for a hold)
	gen       uint64        // the adaptive generation at booking: one increase per burst
	epoch     uint64        // the schedule epoch at booking: a change voids the slot
	compliant bool          // every constraint the host published is honoured in full
	probe     bool          // the half-open breaker's probe
	h         *host
}

// DelayFrom returns how long from now the reservation's departure is.
func (r Reservation) DelayFrom(now time.Time) time.Duration {
	return max(r.At.Sub(now), 0)
}

// intervalLocked returns the host's interval at now and what sets it.
func (h *host) intervalLocked(now time.Time) (time.Duration, string) {
	rate := time.Duration(0)
	if now.Before(h.rate.Until) {
		rate = h.rate.Interval
	}
	return interval(h.policy.BaseDelay, h.crawlDelay, rate, h.delay.delay)
}

// reserveAt books the next departure slot at or after now. r is a random number in [0, 1) for the jitter.
func (h *host) reserveAt(now time.Time, jitterFraction, r float64) Reservation {
	h.mu.Lock()
	defer h.mu.Unlock()
	iv, why := h.intervalLocked(now)
	at := now
	if h.next.After(at) {
		at = h.next
	}
	if h.holdUntil.After(at) {
		at, why = h.holdUntil, h.holdTrigger
	}
	jit := jitter(iv, jitterFraction, r)
	h.next = at.Add(iv + jit)
	return Reservation{Host: h.key, At: at, Interval: iv, Jitter: jit, Trigger: why, gen: h.delay.gen, epoch: h.epoch, compliant: !h.crawlClamped, h: h}
}

// confirmAt turns a reservation into a departure at now. It fails when the schedule changed after the
// reservation was made (an increase or a new hold): the caller must reserve again; or with
// ErrBreakerOpen when the host's breaker opened meanwhile.
func (h *host) confirmAt(res Reservation, now time.Time) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.brk.state == BreakerOpen {
		return false, ErrBreakerOpen
	}
	if res.epoch != h.epoch || now.Before(h.holdUntil) || now.Before(res.At) {
		return false, nil
	}
	h.lastDeparture = now
	h.departures++
	return true, nil
}

// admitAt asks the breaker whether a departure may go at now.
func (h *host) admitAt(now time.Time, b BreakerPolicy) (admission, <-chan struct{}, *breakerChange) {
	h.mu.Lock()
	defer h.mu.Unlock()
	adm, ch := h.brk.admitLocked(now, b.Cooldown, h.crawlClamped && !b.IgnoreCaps)
	return adm, h.brk.resolved, ch
}

// abandonProbe lets another request be the half-open probe when this one gives up waiting.
func (h *host) abandonProbe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.brk.state == BreakerHalfOpen {
		h.brk.settleProbe()
	}
}

// pushNext moves the next departure to at least t (a slot booked in a shared store).
func (h *host) pushNext(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.After(h.next) {
		h.next = t
	}
}

// cancel gives a reservation back when it is the last one booked, so an abandoned wait
// does not push later requests back.
func (h *host) cancel(res Reservation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.next.Equal(res.At.Add(res.Interval+res.Jitter)) && res.epoch == h.epoch {
		h.next = res.At
	}
}

// rescheduleLocked restarts the schedule after the interval grew: outstanding reservations are
// void (their epoch is old) and the next slot is the last departure plus the new interval.
// A hold needs no reschedule: reservations and confirmations check it directly.
func (h *host) rescheduleLocked(now time.Time) {
	h.epoch++
	iv, _ := h.intervalLocked(now)
	h.next = h.lastDeparture.Add(iv)
}

// acquire takes an in-flight slot, or fails when ctx ends first.
func (h *host) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ext: waiting for an in-flight slot on %s: %w", h.key, context.Cause(ctx))
	}
}

func (h *host) release() { <-h.slots }

// waitDeparture blocks until a reservation on h is confirmed, holding no lock while it sleeps.
// It fails when ctx ends first, at once when the departure would come after ctx's deadline, and with
// ErrBreakerOpen when the host is parked. The caller holds an in-flight slot.
func (p *Pacer) waitDeparture(ctx context.Context, h *host) (Reservation, error) {
	probe := false
	for {
		now := p.now()
		if !probe {
			adm, resolved, ch := h.admitAt(now, p.cfg.breaker)
			p.reportBreaker(h, ch, now)
			switch adm {
			case deferIt:
				return Reservation{Host: h.key, h: h}, fmt.Errorf("%w: %s", ErrBreakerOpen, h.key)
			case waitProbe:
				select {
				case <-resolved:
					continue
				case <-ctx.Done():
					return Reservation{Host: h.key, h: h}, fmt.Errorf("ext: waiting for the probe of %s: %w", h.key, context.Cause(ctx))
				}
			case admittedProbe:
				probe = true
			}
		}
		res := p.book(ctx, h, now)
		res.probe = probe
		wait := res.DelayFrom(now)
		if deadline, ok := ctx.Deadline(); ok && res.At.After(deadline.Add(-deadlineMargin)) {
			h.cancel(res)
			p.giveUpProbe(h, probe)
			return res, fmt.Errorf("%w: %s must wait %v", ErrWaitBeyondDeadline, h.key, wait.Round(time.Millisecond))
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				h.cancel(res)
				p.giveUpProbe(h, probe)
				return res, fmt.Errorf("ext: waiting to depart to %s: %w", h.key, context.Cause(ctx))
			}
		}
		ok, err := h.confirmAt(res, p.now())
		if err != nil {
			return res, fmt.Errorf("%w: %s", err, h.key)
		}
		if ok {
			h.markDirty(p)
			return res, nil
		}
	}
}

func (p *Pacer) giveUpProbe(h *host, probe bool) {
	if probe {
		h.abandonProbe()
	}
}
