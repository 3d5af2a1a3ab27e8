package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/collypace/ext/internal/capacity"
	"github.com/collypace/ext/internal/ratelimit"
	"github.com/collypace/ext/internal/retryafter"
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
	Trigger audit.Trigger
}

// classify applies the documented rule: 429 and 503 are refusals; any other 5xx is a server error;
// a transport error (refused or reset connection, timeout) counts as one too, but not a cancellation
// by the crawler itself, nor a redirect hop whose wait did not fit in the timeout (retried only); a 3xx or 4xx with Retry-After is a refusal; other 2xx/3xx are clean; other 4xx
// are neutral (neither back off nor give back).
func classify(o Outcome) Verdict {
	switch {
	case o.Err != nil:
		if errors.Is(o.Err, errWaitBeyondDeadline) {
			return Verdict{Retry: true} // our wait, not the host's failure
		}
		if errors.Is(o.Err, context.Canceled) {
			return Verdict{}
		}
		return Verdict{Refused: true, Retry: true, Trigger: audit.TriggerTransportError}
	case o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable:
		return Verdict{Refused: true, Retry: true, Trigger: audit.TriggerRefusal}
	case o.Status >= 500:
		return Verdict{Refused: true, Retry: true, Trigger: audit.TriggerServerError}
	case o.Status >= 300 && len(o.Header.Values("Retry-After")) > 0:
		return Verdict{Refused: true, Retry: o.Status >= 400, Trigger: audit.TriggerRefusal}
	case o.Status >= 200 && o.Status < 400:
		return Verdict{Trigger: audit.TriggerClean}
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
	return p.observe(res, o, classify(o), now, false, false)
}

// observe records an outcome already classified as v, and returns v: the signals are read from the
// response with no lock held, applied to the host under its lock, then reported. landing ends the
// departure's in-flight count under the same lock (the flight ended with this outcome). live says the
// outcome was received at now on the pacer's own clock (its transport): a hold it sets is recorded as
// learnt when it took effect, under the host's lock, which a loaded machine can delay past now.
func (p *Pacer) observe(res Reservation, o Outcome, v Verdict, now time.Time, landing, live bool) Verdict {
	h := res.h
	if h == nil {
		h = p.host(res.Host)
	}
	sig := p.readSignals(o, v, now)
	sig.live = live
	eff := p.applySignals(h, res, sig, now, landing)
	p.reportOutcome(h, res, sig, eff, now)
	return v
}

// outcomeSignals is what a response says, read without a lock: its verdict, the Retry-After hold and
// the rate-limit signal, and the audit events of the headers that were ignored or honoured.
type outcomeSignals struct {
	o                 Outcome
	v                 Verdict
	hold              time.Time // the end of the Retry-After hold; zero when there is none
	retryAfterValid   bool      // a Retry-After that parsed within the maximum (a 0 wait included)
	retryAfterTooLong bool
	capHold           time.Time // a Retry-After above the cap: parked until then (with IgnoreCaps, held to the cap)
	rate              ratelimit.Signal
	rateFound         bool
	live              bool // received on the pacer's clock: see observe
	events            []auditEvent
}

// readSignals parses the Retry-After and rate-limit fields of o, received at now. A valid
// Retry-After overrides the rate-limit fields, which are then not read.
func (p *Pacer) readSignals(o Outcome, v Verdict, now time.Time) outcomeSignals {
	s := outcomeSignals{o: o, v: v}
	if o.Status >= 300 {
		wait, present, err := retryafter.Parse(o.Header.Values("Retry-After"), o.Header.Get("Date"), now, p.cfg.maxRetryAfter)
		switch {
		case present && err == nil && wait > 0:
			s.retryAfterValid = true
			s.hold = now.Add(retryAfterHold(wait, p.cfg.retryAfterBuffer))
		case present && err == nil: // 0 or a past date: the host may be asked again now
			s.retryAfterValid = true
			s.events = append(s.events, auditEvent{event: audit.EventRetryAfterNow, trigger: audit.TriggerRetryAfter, compliant: true, detail: "Retry-After asks for no wait: no hold"})
		case errors.Is(err, retryafter.ErrTooLong):
			// Never wait less for a longer value: parked (no probe, no departure) until the time
			// announced, with the buffer; with IgnoreCaps, held as long as the cap allows.
			s.retryAfterTooLong = true
			ev := auditEvent{event: audit.EventRetryAfterTooLong, trigger: audit.TriggerRetryAfter, windowStart: now}
			if p.cfg.breaker.IgnoreCaps {
				// Held to the maximum; the window is still the one the server announced, which the
				// departures after the hold do not honour (compliance_flag false).
				s.capHold = holdEnd(now, p.cfg.maxRetryAfter, p.cfg.retryAfterBuffer)
				ev.windowEnd = holdEnd(now, wait, 0)
				ev.detail = err.Error() + "; held to the maximum only (IgnoreCaps)"
			} else {
				s.capHold = holdEnd(now, wait, p.cfg.retryAfterBuffer)
				ev.windowEnd = s.capHold
				ev.compliant = true
				ev.detail = err.Error() + "; host parked until then, its requests deferred"
			}
			// The hold applied, not the value announced (an overflowing one saturates): the number every
			// event about this response carries (retry_scheduled too).
			ev.computed = s.capHold.Sub(now)
			s.events = append(s.events, ev)
		case present:
			s.events = append(s.events, auditEvent{event: audit.EventHeaderInvalid, trigger: audit.TriggerRetryAfter, compliant: true, detail: err.Error()})
		}
	}
	if !s.retryAfterValid && o.Header != nil {
		var errs []error
		s.rate, s.rateFound, errs = ratelimit.Parse(o.Header, now, p.cfg.maxRateLimitReset())
		for _, err := range errs {
			s.events = append(s.events, auditEvent{event: audit.EventHeaderInvalid, trigger: audit.TriggerRateLimit, compliant: true, detail: err.Error()})
		}
	}
	return s
}

// outcomeEffects is what applying an outcome changed on its host, for reporting after the lock.
type outcomeEffects struct {
	base   time.Duration // the host's base delay, for the audit events
	events []auditEvent  // the signals' events and those of the changes
	brk    *breaker.Change
	held   bool // the host is held after the outcome
	stops  bool // a change that stops other processes (a hold, a longer interval): written through
	model  bool // the capacity model changed: written through to a shared store, which the fleet learns from
	// poolBackoff: the model backed off for a fleet's refusal; a store that pools refusals marks it before the model
	// is written (see fleetPoolBackoff).
	poolBackoff bool
	compliant   bool // the host's schedule follows what the server published (no clamped Crawl-delay)
}

// applySignals applies s to h under its lock: the holds and the rate-limit interval, the adaptive
// delay, the breaker.
func (p *Pacer) applySignals(h *host, res Reservation, s outcomeSignals, now time.Time, landing bool) outcomeEffects {
	h.mu.Lock()
	defer h.mu.Unlock()
	if landing {
		h.landLocked(res.At, now)
	}
	before := h.stopMarkLocked(now)
	events := h.applyLimitsLocked(s, now, p.now)
	model, noisy, backoffs := h.delay.Bounds(), h.delay.Noisy(), h.delay.Backoffs()
	moved, event, trigger := h.applyVerdictLocked(res, s, now)
	poolBackoff := res.fleet && res.facts.seq > 0 && h.delay.Backoffs() != backoffs && h.delay.Backoffs() != 0
	if poolBackoff {
		h.markPoolLocked(res.facts.seq)
	}
	governed := h.governLocked(res, s.v, now)
	changed := h.delay.Bounds() != model || h.delay.Noisy() != noisy // the verdict is shared too
	if changed {
		h.delay.Stamp(now)
	}
	after, _ := h.intervalLocked(now)
	h.wakeHeadLocked() // the head computes its time again: an interval up or down, a hold, the breaker
	if moved {
		events = append(events, auditEvent{event: event, trigger: trigger, computed: after, compliant: true})
	}
	if h.delay.Noisy() != noisy {
		events = append(events, noiseEvent(h.delay.Noisy(), s.v.Trigger, after))
	}
	if governed {
		events = append(events, auditEvent{event: audit.EventRefusalShareHigh, trigger: s.v.Trigger, computed: after, compliant: true,
			detail: fmt.Sprintf("%.0f%% or more of the last %d outcomes refused: the interval is held at least %v, whatever the capacity model reads from them",
				capacity.GovernShare*100, capacity.GovernJudge, h.delay.GovernMin().Round(time.Millisecond))})
	}
	brk := h.brk.Observe(s.v.Refused, s.v.Trigger == audit.TriggerClean, res.probe, refusalDelay(h.delay.Delay(), h.policy.BaseDelay), p.cfg.breaker.rule(), now)
	if s.retryAfterTooLong && !p.cfg.breaker.IgnoreCaps {
		if ch := h.brk.Park(now, audit.TripRetryAfter, s.capHold); brk == nil {
			brk = ch
		}
	}
	return outcomeEffects{base: h.policy.BaseDelay, events: events, brk: brk, held: now.Before(h.holdUntil), compliant: !h.crawlClamped,
		stops: h.stopMarkLocked(now).stopsMore(before), model: changed, poolBackoff: poolBackoff}
}

// noiseEvent is the audit event of the capacity model entering noise mode (noisy: the host's refusals
// do not depend on the pace, so they no longer move the delay) or leaving it; interval is the host's
// interval after it.
func noiseEvent(noisy bool, trigger audit.Trigger, interval time.Duration) auditEvent {
	if noisy {
		return auditEvent{event: audit.EventRefusalsUncorrelated, trigger: trigger, computed: interval, compliant: true,
			detail: "refusals as frequent at a slower pace: they no longer move the delay, which decays to the floor; each Retry-After is still obeyed"}
	}
	return auditEvent{event: audit.EventRefusalsCorrelated, trigger: trigger, computed: interval, compliant: true,
		detail: "refusals clearly more frequent than the noise: they move the delay again"}
}

// adoptedNoiseEventLocked is the audit event, at at, of a verdict on h's refusals taken from a store
// (from another process of the fleet, or an earlier run: from). h.mu is held.
func (h *host) adoptedNoiseEventLocked(v audit.NoiseVerdict, from string, at time.Time) auditEvent {
	iv, _ := h.intervalLocked(at)
	e := noiseEvent(v == audit.NoiseSeen, audit.TriggerStore, iv)
	e.at, e.host, e.base, e.detail = at, h.key, h.policy.BaseDelay, from+": "+e.detail
	return e
}

// applyLimitsLocked sets the Retry-After hold and the rate-limit signal on h, and returns the
// signals' events with those of what was honoured. clock is the pacer's, read for a live outcome.
func (h *host) applyLimitsLocked(s outcomeSignals, now time.Time, clock func() time.Time) []auditEvent {
	events := s.events
	before, _ := h.intervalLocked(now)
	if !s.hold.IsZero() && s.hold.After(h.holdUntil) {
		h.holdUntil, h.holdTrigger = s.hold, audit.TriggerRetryAfter
		learnt := now // when the hold took effect: no departure admitted since crosses it
		if s.live {
			learnt = later(now, clock())
		}
		events = append(events, auditEvent{event: audit.EventRetryAfterHonoured, trigger: audit.TriggerRetryAfter, computed: s.hold.Sub(now), compliant: true,
			windowStart: learnt, windowEnd: s.hold})
	}
	if s.capHold.After(h.holdUntil) {
		h.holdUntil, h.holdTrigger = s.capHold, audit.TriggerRetryAfter
	}
	if !s.rateFound {
		return events
	}
	sig := s.rate
	h.rate = sig
	if sig.Exhausted && sig.Reset.After(h.holdUntil) {
		h.holdUntil, h.holdTrigger = sig.Reset, audit.TriggerRateLimit
	}
	if sig.Exhausted || sig.Interval > before {
		e := auditEvent{event: audit.EventRateLimitApplied, trigger: audit.TriggerRateLimit, computed: sig.Interval, compliant: true, detail: sig.Source, until: sig.Until}
		if sig.Exhausted {
			e.computed, e.windowStart, e.windowEnd = sig.Reset.Sub(now), now, sig.Reset
		}
		events = append(events, e)
	}
	return events
}

// applyVerdictLocked moves h's capacity model by the verdict: a refusal teaches the rate signal (see
// refusalKindOf), a clean outcome confirms a rate, feeds the queueing signal and, when slow, backs off
// on latency. moved reports a change of the delay, with its event and trigger.
func (h *host) applyVerdictLocked(res Reservation, s outcomeSignals, now time.Time) (moved bool, event audit.Event, trigger audit.Trigger) {
	floor, ceiling := h.policy.BaseDelay, h.policy.MaxDelay
	smp := h.sampleLocked(res, s, now)
	switch {
	case s.v.Refused:
		h.refusals++
		h.rateRefused = h.rateRefused || refusalKindOf(s) != capacity.RefusedOutage
		if !s.hold.IsZero() {
			h.delay.SpaceProbes(s.hold.Sub(now))
		}
		return h.delay.Refuse(smp, floor, ceiling), audit.EventDelayIncreased, s.v.Trigger
	case s.v.Trigger == audit.TriggerClean:
		if !res.fleet { // a fleet member sees only its share of what the host sustains
			h.delay.Accepted()
		}
		if !res.robots && res.inFlight > 0 {
			h.delay.ObserveQueue(s.o.Latency, res.inFlight, res.Interval, h.policy.MaxInFlight, now)
		}
		if !res.robots && h.delay.ObserveLatency(res.gen, s.o.Latency, res.inFlight, floor, ceiling) {
			return true, audit.EventDelayIncreased, audit.TriggerLatency
		}
		switch d := h.delay.Succeed(smp, floor, ceiling); {
		case d > 0:
			return true, audit.EventDelayIncreased, s.v.Trigger
		case d < 0:
			return true, audit.EventDelayDecreased, s.v.Trigger
		}
	}
	return false, "", s.v.Trigger
}

// creditHorizon bounds the gap since the last accepted departure that a sample credits: a host idle for
// minutes, then refused, says nothing about its rate (the gap is then unknown).
const creditHorizon = 10 * time.Second

// sampleLocked is the outcome s of the departure res as the capacity model learns from it, and records
// an accepted departure (any response but a refusal: the limiter counted it). A fleet member reads the
// fleet's departures from its admission (fleetFacts); without them (a store that does not number its
// departures) spacing and credited stay unknown, and the rules that need them fail slow.
func (h *host) sampleLocked(res Reservation, s outcomeSignals, now time.Time) capacity.Sample {
	smp := capacity.Sample{At: now, Gen: res.gen, Kind: refusalKindOf(s), Paced: !s.hold.IsZero(), AfterHold: res.afterHold, Jitter: res.Jitter, Fleet: res.fleet}
	horizon := creditHorizon + 4*res.Interval
	switch {
	case res.fleet && res.facts.since > 0 && res.facts.since <= horizon:
		// The fleet's spacing, by the store's clock. The departure before was accepted or is in flight
		// (credited as spaced), or was reported as not an accepted page (refused, or a robots.txt read):
		// then the gap since the host's last accepted request is unknown, and twice the spacing is
		// credited as a lower bound (CreditLower).
		smp.Spacing, smp.Credited, smp.Span = res.facts.since, res.facts.since, res.facts.span
		if res.facts.afterUncounted() {
			smp.Credited, smp.CreditLower = 2*res.facts.since, true
		}
	case !res.fleet && !res.At.IsZero():
		if res.before != 0 {
			smp.Spacing = res.At.Sub(time.Unix(0, res.before))
		}
		if c := res.At.Sub(h.lastAccepted); !h.lastAccepted.IsZero() && c > 0 && c <= horizon {
			smp.Credited = c
		}
	}
	if !s.v.Refused && s.o.Err == nil && !res.robots {
		h.lastAccepted = later(h.lastAccepted, res.At)
	}
	if res.fleet && s.v.Refused {
		smp.Pool = h.poolSampleLocked(res.facts.seq)
	}
	return smp
}

// governLocked feeds the refusal governor an outcome of res (a refusal, 429 or 503, or a clean
// response of a page) and reports whether it slowed the host.
func (h *host) governLocked(res Reservation, v Verdict, now time.Time) bool {
	if res.robots || !v.Refused && v.Trigger != audit.TriggerClean || v.Refused && v.Trigger != audit.TriggerRefusal {
		return false // an outage (another 5xx, a broken connection) is the outage probe's and the breaker's
	}
	iv, _ := h.intervalLocked(now)
	return h.delay.Governed(v.Refused, iv, h.policy.BaseDelay, h.policy.MaxDelay)
}

// refusalKindOf says what a refusal teaches: a 429 or a valid Retry-After is a rate refusal; a 503
// without one is unclear (nginx's limiter and an outage answer alike); the rest is an outage.
func refusalKindOf(s outcomeSignals) capacity.RefusalKind {
	switch {
	case s.o.Status == http.StatusTooManyRequests || s.retryAfterValid:
		return capacity.RefusedRate
	case s.o.Status == http.StatusServiceUnavailable:
		return capacity.RefusedUnclear
	}
	return capacity.RefusedOutage
}

// reportOutcome acts on what applying an outcome changed, with no lock held: state written behind,
// or through for what stops other processes (before the response's callbacks run), the breaker's
// transition, the observer and the audit trail.
func (p *Pacer) reportOutcome(h *host, res Reservation, s outcomeSignals, eff outcomeEffects, now time.Time) {
	h.markDirty(p)
	if eff.poolBackoff && p.fleetActive() {
		p.fleetPoolBackoff(h, !s.hold.IsZero())
	}
	p.reportBreaker(h, eff.brk, now) // a transition is written through
	if eff.brk == nil && (eff.stops || eff.model && p.fleetActive()) {
		p.persistNow(h)
	}
	var shared time.Time // a hold written through to a fleet's store: when the others can read it
	if (eff.stops || eff.brk != nil) && p.fleetActive() {
		shared = now // on the caller's clock (ObserveAt); a live outcome reads the pacer's
		if s.live {
			shared = later(now, p.now())
		}
	}

	if s.v.Refused || res.robots {
		p.fleetUncounted(h, res)
	}
	if s.v.Refused {
		p.cfg.observer.Refused(h.key, s.v.Trigger)
	}
	if !s.hold.IsZero() {
		p.cfg.observer.RetryAfter(h.key, s.hold.Sub(now))
	}
	for _, e := range eff.events {
		e.at, e.host, e.base, e.status, e.url = now, h.key, eff.base, s.o.Status, res.url
		e.compliant = e.compliant && eff.compliant
		if !e.windowEnd.IsZero() {
			e.shared = shared
		}
		level := zerolog.InfoLevel
		if !e.compliant {
			level = zerolog.WarnLevel
		}
		p.audit.emit(level, e)
	}
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
	if p.audit.off(level) { // every request departs: not even the event is built
		return
	}
	p.audit.emit(level, auditEvent{
		at: at, host: f.res.h.key, event: audit.EventDelayApplied, trigger: res.Trigger, url: res.url,
		base: f.res.h.policy.BaseDelay, computed: res.Wait, jitter: res.Jitter, compliant: res.compliant,
		departure: true, admitted: res.At, wait: res.Wait, interval: res.Interval, crawlDelay: res.crawlDelay, rateInterval: res.rateInterval,
	})
}

// auditAbandoned records a wait for u (nil: unknown) that ended without a departure.
func (p *Pacer) auditAbandoned(h *host, u *url.URL, err error) {
	event, trigger := audit.EventDepartureAbandoned, audit.TriggerCancel
	switch {
	case errors.Is(err, errWaitBeyondDeadline):
		event = audit.EventRedirectHopTimedOut
	case errors.Is(err, ErrLeaseLost):
		trigger = audit.TriggerFleet
	}
	p.audit.emit(zerolog.InfoLevel, auditEvent{
		at: p.now(), host: h.key, event: event, trigger: trigger, url: u,
		base: h.policy.BaseDelay, compliant: true, detail: fmt.Sprint(err),
	})
}
