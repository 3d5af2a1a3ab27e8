package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Outcome is what came back for one departure.
type Outcome struct {
	Status  int           // HTTP status; 0 when Err is set
	Header  http.Header   // response header; nil for a transport error
	Err     error         // transport error (connection refused or reset, timeout…)
	Latency time.Duration // from departure to the response headers
}

// Verdict is what the pacer made of an outcome.
type Verdict struct {
	// Refused is true when the host refused or failed (429, 503, other 5xx, Retry-After, transport
	// error): the adaptive delay backed off.
	Refused bool
	// Retry is true when the request is worth sending again after the host's window.
	Retry bool
	// Trigger names the class of the outcome: refusal, server_error, transport_error, clean, or "" (neutral).
	Trigger string
}

// classify applies the documented rule: 429 and 503 are refusals; any other 5xx is a server error;
// a transport error (refused or reset connection, timeout) counts as one too, but not a cancellation
// by the crawler itself, nor a redirect hop whose wait did not fit in the timeout (retried only); a 3xx or 4xx with Retry-After is a refusal; other 2xx/3xx are clean; other 4xx
// are neutral (neither back off nor give back).
func classify(o Outcome) Verdict {
	switch {
	case o.Err != nil:
		if errors.Is(o.Err, ErrWaitBeyondDeadline) {
			return Verdict{Retry: true} // our wait, not the host's failure
		}
		if errors.Is(o.Err, context.Canceled) {
			return Verdict{}
		}
		return Verdict{Refused: true, Retry: true, Trigger: TriggerTransportError}
	case o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable:
		return Verdict{Refused: true, Retry: true, Trigger: TriggerRefusal}
	case o.Status >= 500:
		return Verdict{Refused: true, Retry: true, Trigger: TriggerServerError}
	case o.Status >= 300 && len(o.Header.Values("Retry-After")) > 0:
		return Verdict{Refused: true, Retry: o.Status >= 400, Trigger: TriggerRefusal}
	case o.Status >= 200 && o.Status < 400:
		return Verdict{Trigger: TriggerClean}
	}
	return Verdict{}
}

// Observe records the outcome of a departure made under res, at the current time.
func (p *Pacer) Observe(res Reservation, o Outcome) Verdict {
	return p.ObserveAt(res, o, p.now())
}

// ObserveAt records the outcome of a departure made under res, received at now: it honours Retry-After
// and rate-limit fields, and moves the adaptive delay.
func (p *Pacer) ObserveAt(res Reservation, o Outcome, now time.Time) Verdict {
	h := res.h
	if h == nil {
		h = p.host(res.Host)
	}
	v := classify(o)
	var events []auditEvent

	// Header parsing needs no lock.
	var hold time.Time
	retryAfterValid, retryAfterTooLong := false, false
	if o.Status >= 300 {
		wait, present, err := parseRetryAfter(o.Header.Values("Retry-After"), o.Header.Get("Date"), now, p.cfg.maxRetryAfter)
		switch {
		case present && err == nil && wait > 0:
			retryAfterValid = true
			hold = now.Add(retryAfterHold(wait, p.cfg.retryAfterBuffer))
		case present && err == nil: // 0 or a past date: the host may be asked again now
			retryAfterValid = true
			events = append(events, auditEvent{event: EventRetryAfterNow, trigger: TriggerRetryAfter, compliant: true, detail: "Retry-After asks for no wait: no hold"})
		case errors.Is(err, ErrRetryAfterTooLong):
			retryAfterTooLong = true
			events = append(events, auditEvent{event: EventRetryAfterTooLong, trigger: TriggerRetryAfter, computed: wait, detail: err.Error()})
		case present:
			events = append(events, auditEvent{event: EventHeaderInvalid, trigger: TriggerRetryAfter, compliant: true, detail: err.Error()})
		}
	}
	var sig rateLimitSignal
	var sigFound bool
	if !retryAfterValid && o.Header != nil {
		var errs []error
		sig, sigFound, errs = parseRateLimit(o.Header, now, p.cfg.maxRateLimitReset())
		for _, err := range errs {
			events = append(events, auditEvent{event: EventHeaderInvalid, trigger: TriggerRateLimit, compliant: true, detail: err.Error()})
		}
	}

	h.mu.Lock()
	floor, ceiling := h.policy.BaseDelay, h.policy.MaxDelay
	before, _ := h.intervalLocked(now)
	if !hold.IsZero() && hold.After(h.holdUntil) {
		h.holdUntil, h.holdTrigger = hold, TriggerRetryAfter
		events = append(events, auditEvent{event: EventRetryAfterHonoured, trigger: TriggerRetryAfter, computed: hold.Sub(now), compliant: true,
			windowStart: now, windowEnd: hold})
	}
	if sigFound {
		h.rate = sig
		if sig.Exhausted && sig.Reset.After(h.holdUntil) {
			h.holdUntil, h.holdTrigger = sig.Reset, TriggerRateLimit
		}
		if sig.Exhausted || sig.Interval > before {
			e := auditEvent{event: EventRateLimitApplied, trigger: TriggerRateLimit, computed: sig.Interval, compliant: true, detail: sig.Source}
			if sig.Exhausted {
				e.computed, e.windowStart, e.windowEnd = sig.Reset.Sub(now), now, sig.Reset
			}
			events = append(events, e)
		}
	}
	changed, event, trigger := false, "", v.Trigger
	switch {
	case v.Refused:
		h.refusals++
		rate := o.Status == http.StatusTooManyRequests || retryAfterValid
		changed, event = h.delay.refuse(res.gen, rate, floor, ceiling, now), EventDelayIncreased
	case v.Trigger == TriggerClean:
		if !res.At.IsZero() {
			h.delay.accepted.add(res.At)
		}
		if h.delay.observeLatency(res.gen, o.Latency, floor, ceiling) {
			changed, event, trigger = true, EventDelayIncreased, TriggerLatency
		} else if moved := h.delay.succeed(res.gen, floor, ceiling); moved != 0 {
			changed, event = true, EventDelayDecreased
			if moved > 0 {
				event = EventDelayIncreased
			}
		}
	}
	after, _ := h.intervalLocked(now)
	h.changedLocked() // the head computes its time again: an interval up or down, a hold, the breaker
	if changed {
		events = append(events, auditEvent{event: event, trigger: trigger, computed: after, compliant: true})
	}
	brk := h.brk.observeLocked(v, res.probe, after, p.cfg.breaker, now)
	if retryAfterTooLong && brk == nil && !p.cfg.breaker.IgnoreCaps {
		brk = h.brk.tripLocked(now, TripRetryAfter)
	}
	held := now.Before(h.holdUntil)
	compliant := !h.crawlClamped
	h.mu.Unlock()
	h.markDirty(p)
	p.reportBreaker(h, brk, now)
	if brk == nil && held && !hold.IsZero() {
		p.persistNow(h) // a Retry-After window is written before the next departure
	}

	if v.Refused {
		p.cfg.observer.Refused(h.key, v.Trigger)
	}
	if !hold.IsZero() {
		p.cfg.observer.RetryAfter(h.key, hold.Sub(now))
	}
	for _, e := range events {
		e.at, e.host, e.base, e.status, e.url = now, h.key, floor, o.Status, res.url
		e.compliant = e.compliant && compliant
		level := zerolog.InfoLevel
		if !e.compliant {
			level = zerolog.WarnLevel
		}
		p.audit.emit(level, e)
	}
	return v
}

// auditDeparture records a departure at the instant it left (its headers reached the wire, when the
// pacer's transport carried it): this request's wait and jitter, the interval and every published
// constraint in force.
func (p *Pacer) auditDeparture(f *flight, at time.Time) {
	res := f.res
	level := zerolog.InfoLevel
	if !res.compliant {
		level = zerolog.WarnLevel
	}
	p.audit.emit(level, auditEvent{
		at: at, host: f.h.key, event: EventDelayApplied, trigger: res.Trigger, url: f.url,
		base: f.h.policy.BaseDelay, computed: res.Wait, jitter: res.Jitter, compliant: res.compliant,
		departure: true, wait: res.Wait, interval: res.Interval, crawlDelay: res.crawlDelay, rateInterval: res.rateInterval,
	})
}

// auditAbandoned records a wait that ended without a departure.
func (p *Pacer) auditAbandoned(h *host, err error) {
	event := EventDepartureAbandoned
	if errors.Is(err, ErrWaitBeyondDeadline) {
		event = EventRedirectHopTimedOut
	}
	p.audit.emit(zerolog.InfoLevel, auditEvent{
		at: p.now(), host: h.key, event: event, trigger: TriggerCancel,
		base: h.policy.BaseDelay, compliant: true, detail: fmt.Sprint(err),
	})
}
