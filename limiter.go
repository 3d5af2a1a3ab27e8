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
	epoch         uint64        // bumped when the interval changes: outstanding reservations are void
	changed       chan struct{} // closed on the next epoch bump, to wake waiters; nil until one waits
	next          time.Time     // earliest departure of the next reservation
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
		ready:  alreadyReady,
	}
}

// alreadyReady is the ready channel of hosts with nothing to restore.
var alreadyReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Reservation is a departure slot on a host's schedule.
type Reservation struct {
	Host      string
	At        time.Time       // when the request may depart
	Interval  time.Duration   // the interval after it, jitter excluded
	Jitter    time.Duration   // the random extra added to Interval
	Trigger   string          // what set Interval (or "retry_after"/"rate_limit" for a hold)
	gen       uint64          // the adaptive generation at booking: one increase per burst
	epoch     uint64          // the schedule epoch at booking: a change voids the slot
	compliant bool            // every constraint the host published is honoured in full
	probe     bool            // the half-open breaker's probe
	changed   <-chan struct{} // closed when the reservation is void
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
	res := Reservation{Host: h.key, At: at, Interval: iv, Jitter: jit, Trigger: why, gen: h.delay.gen, epoch: h.epoch, compliant: !h.crawlClamped, h: h}
	if at.After(now) {
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		res.changed = h.changed
	}
	return res
}

// confirmation is what confirmAt says of a reservation.
type confirmation int

const (
	departed confirmation = iota // the request departs now
	rebook                       // the schedule changed: reserve again
	tooSoon                      // the previous departure left late: wait until the returned time
)

// confirmAt turns a reservation into a departure at now. The schedule may have changed since the
// reservation was made (an increase or decrease, a new hold): the caller must book again. A departure
// never follows the previous one by less than the interval, even when timers fire late after a stall:
// then the caller waits until the returned time. It fails with ErrBreakerOpen when the host's breaker
// opened meanwhile.
func (h *host) confirmAt(res Reservation, now time.Time) (confirmation, time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.brk.state == BreakerOpen {
		return rebook, time.Time{}, ErrBreakerOpen
	}
	if res.epoch != h.epoch || now.Before(h.holdUntil) {
		return rebook, time.Time{}, nil
	}
	if earliest := h.lastDeparture.Add(res.Interval); now.Before(earliest) || now.Before(res.At) {
		return tooSoon, later(earliest, res.At), nil
	}
	h.lastDeparture = now
	h.departures++
	return departed, time.Time{}, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// departedAt records a departure booked outside the wait (ReserveAt): at is when the caller departs.
func (h *host) departedAt(at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if at.After(h.lastDeparture) {
		h.lastDeparture = at
	}
	h.departures++
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

// rescheduleLocked restarts the schedule after the interval changed: outstanding reservations are
// void (their epoch is old), their waiters wake and book again, and the next slot is the last
// departure plus the new interval. A hold needs no reschedule: reservations and confirmations check it.
func (h *host) rescheduleLocked(now time.Time) {
	h.epoch++
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
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
		if deadline, ok := ctx.Deadline(); ok && res.At.After(deadline.Add(-deadlineMargin)) {
			h.cancel(res)
			p.giveUpProbe(h, probe)
			return res, fmt.Errorf("%w: %s must wait %v", ErrWaitBeyondDeadline, h.key, res.DelayFrom(now).Round(time.Millisecond))
		}
		ok, err := p.waitSlot(ctx, h, res)
		if err != nil {
			h.cancel(res)
			p.giveUpProbe(h, probe)
			return res, err
		}
		if ok {
			h.markDirty(p)
			return res, nil
		}
	}
}

// waitSlot sleeps until res's slot and confirms it. It reports false when the schedule changed and the
// caller must book again.
func (p *Pacer) waitSlot(ctx context.Context, h *host, res Reservation) (bool, error) {
	at := res.At
	for {
		if wait := at.Sub(p.now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-res.changed:
				t.Stop()
				return false, nil
			case <-ctx.Done():
				t.Stop()
				return false, fmt.Errorf("ext: waiting to depart to %s: %w", h.key, context.Cause(ctx))
			}
		}
		c, until, err := h.confirmAt(res, p.now())
		switch {
		case err != nil:
			return false, fmt.Errorf("%w: %s", err, h.key)
		case c == departed:
			return true, nil
		case c == rebook:
			return false, nil
		}
		at = until
	}
}

func (p *Pacer) giveUpProbe(h *host, probe bool) {
	if probe {
		h.abandonProbe()
	}
}
