package ext

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// ErrBreakerOpen is returned for a departure to a host whose circuit breaker is open: the request
// is deferred, not sent.
var ErrBreakerOpen = errors.New("ext: host parked: circuit breaker open")

// validBreakerState reports whether s is one of the breaker's states (a stored value may not be).
func validBreakerState(s audit.BreakerState) bool {
	return s >= audit.BreakerClosed && s <= audit.BreakerHalfOpen
}

// Breaker defaults, documented in the README.
const (
	defaultBreakerThreshold = 45 * time.Second // an interval at or above it…
	defaultBreakerSustain   = 2 * time.Minute  // …for this long trips the breaker
	defaultBreakerFailures  = 10               // consecutive refusals that trip it
	defaultBreakerCooldown  = 5 * time.Minute  // open this long before a probe
)

// BreakerPolicy sets when a host's breaker trips and how long it stays open.
type BreakerPolicy struct {
	// Threshold and Sustain: trip when the host's adaptive delay (what its refusals drove it to, above
	// the base delay) stays at or above Threshold for Sustain. A Crawl-delay or rate limit the host
	// publishes is obeyed, never held against it. The adaptive delay never exceeds the ceiling
	// (WithMaxDelay), so this rule only fires with a ceiling at or above Threshold.
	Threshold time.Duration
	Sustain   time.Duration
	Failures  int           // trip after this many consecutive refusals
	Cooldown  time.Duration // stay open this long, then let one probe through
	// IgnoreCaps keeps crawling a host whose Retry-After or Crawl-delay is above its cap (clamped,
	// audited with compliance_flag=false) instead of parking it. By default such a host is parked:
	// for a Retry-After, until the time it announced; for a Crawl-delay, until its robots.txt, read
	// again when its cache entry expires, asks for less.
	IgnoreCaps bool
}

// breaker is one host's circuit breaker. The host's mutex protects it.
type breaker struct {
	state     audit.BreakerState
	changed   time.Time     // when it entered state
	until     int64         // open: no probe before then either (a Retry-After or Crawl-delay above its cap), unix nanos (a host stays within a size class); 0 when none
	reason    audit.Trip    // why it last opened
	highSince time.Time     // since when the interval is at or above the threshold; zero when below
	failures  int           // consecutive refusals
	probing   bool          // half-open: the probe is in flight
	resolved  chan struct{} // half-open: closed when the probe's outcome is known
}

// breakerChange is a transition to report once the host's lock is released.
type breakerChange struct {
	from, to audit.BreakerState
	reason   string
}

// tripLocked opens the breaker (from closed or half-open) for reason at now.
func (b *breaker) tripLocked(now time.Time, reason audit.Trip) *breakerChange {
	if b.state == audit.BreakerOpen {
		return nil
	}
	ch := &breakerChange{from: b.state, to: audit.BreakerOpen, reason: string(reason)}
	b.settleProbe()
	b.state, b.changed, b.reason = audit.BreakerOpen, now, reason
	return ch
}

// parkLocked opens the breaker for reason at now, as tripLocked, and keeps it open until at least
// until (it stays open longer when already open until later). It reports the transition, if any.
func (b *breaker) parkLocked(now time.Time, reason audit.Trip, until time.Time) *breakerChange {
	ch := b.tripLocked(now, reason)
	if until.IsZero() {
		return ch
	}
	if t := earlier(until, maxInstant).UnixNano(); t > b.until {
		b.until = t
	}
	return ch
}

// maxInstant is the latest instant a store can write (UnixNano saturates there, in 2262).
var maxInstant = time.Unix(0, math.MaxInt64)

// holdEnd returns when a Retry-After wait received at now ends, with its buffer (retryAfterHold),
// saturating: an overflowing wait (a Retry-After of 20 digits or in year 9999) ends at maxInstant,
// never wraps into the past.
func holdEnd(now time.Time, wait time.Duration, buffer float64) time.Time {
	if end := now.Add(retryAfterHold(max(wait, 0), buffer)); end.Before(maxInstant) {
		return end
	}
	return maxInstant
}

// parkEnd returns the instant an open breaker is parked until, zero when it is not parked.
func (b *breaker) parkEnd() time.Time {
	if b.state != audit.BreakerOpen || b.until == 0 {
		return time.Time{}
	}
	return time.Unix(0, b.until)
}

// reopensAt returns when an open breaker lets its probe through: at the end of the cool-down that
// began when it opened, or later when it was parked until a given time.
func (b *breaker) reopensAt(cooldown time.Duration) time.Time {
	end := b.changed.Add(cooldown)
	if b.until == 0 {
		return end
	}
	return later(end, time.Unix(0, b.until))
}

// closeLocked closes the breaker after a successful probe.
func (b *breaker) closeLocked(now time.Time) *breakerChange {
	if b.state == audit.BreakerClosed {
		return nil
	}
	ch := &breakerChange{from: b.state, to: audit.BreakerClosed, reason: "probe_succeeded"}
	b.settleProbe()
	b.state, b.changed, b.failures, b.highSince, b.until = audit.BreakerClosed, now, 0, time.Time{}, 0
	return ch
}

func (b *breaker) settleProbe() {
	if b.resolved != nil {
		close(b.resolved)
		b.resolved = nil
	}
	b.probing = false
}

// admission is what the breaker says about a departure.
type admission int

const (
	admitted      admission = iota // closed: depart
	admittedProbe                  // half-open: this departure is the probe
	deferIt                        // open: defer the request
	waitProbe                      // half-open, probe in flight: wait for its outcome
)

// admitLocked decides whether a departure may go, moving an open breaker whose cool-down (and park,
// see parkLocked) is over to half-open. stillTripped reports whether the condition that tripped it
// persists (a Crawl-delay above the cap, as last read), in which case it stays open; the robots.txt
// read that re-evaluates it clears it first, so that read can be the probe.
func (b *breaker) admitLocked(now time.Time, cooldown time.Duration, stillTripped bool) (admission, *breakerChange) {
	switch b.state {
	case audit.BreakerClosed:
		return admitted, nil
	case audit.BreakerOpen:
		if now.Before(b.reopensAt(cooldown)) || stillTripped {
			return deferIt, nil
		}
		b.state, b.changed = audit.BreakerHalfOpen, now
		b.probing, b.resolved = true, make(chan struct{})
		return admittedProbe, &breakerChange{from: audit.BreakerOpen, to: audit.BreakerHalfOpen, reason: "cooldown_over"}
	default: // half-open
		if !b.probing {
			b.probing, b.resolved = true, make(chan struct{})
			return admittedProbe, nil
		}
		return waitProbe, nil
	}
}

// refusalDelay is what the sustained-delay rule watches: the host's adaptive delay when it is above
// the base delay floor, 0 otherwise. The base delay is the user's; a Crawl-delay or rate-limit
// interval is the host's own request, obeyed and not held against it.
func refusalDelay(delay, floor time.Duration) time.Duration {
	if delay <= floor {
		return 0
	}
	return delay
}

// observeLocked updates the breaker with an outcome at now, given the host's refusal-driven delay
// after it (refusalDelay). probe says whether the outcome is the half-open probe's.
func (b *breaker) observeLocked(v Verdict, probe bool, adaptive time.Duration, p BreakerPolicy, now time.Time) *breakerChange {
	if probe && b.state == audit.BreakerHalfOpen {
		if v.Refused {
			return b.tripLocked(now, audit.TripProbeFailed)
		}
		return b.closeLocked(now)
	}
	if v.Refused {
		b.failures++
	} else if v.Trigger == audit.TriggerClean {
		b.failures = 0
	}
	if adaptive >= p.Threshold && adaptive > 0 {
		if b.highSince.IsZero() {
			b.highSince = now
		}
	} else {
		b.highSince = time.Time{}
	}
	if b.state != audit.BreakerClosed {
		return nil
	}
	switch {
	case p.Failures > 0 && b.failures >= p.Failures:
		return b.tripLocked(now, audit.TripFailures)
	case !b.highSince.IsZero() && now.Sub(b.highSince) >= p.Sustain:
		return b.tripLocked(now, audit.TripSustainedDelay)
	}
	return nil
}

// Alert is raised when a host's breaker opens, the store fails or an option value is invalid (WithAlert).
type Alert struct {
	At     time.Time
	Host   string
	Event  audit.Event // audit.EventBreakerOpened, EventStoreUnavailable, EventOptionInvalid, EventPacingBypassed, EventCallbacksBeforePacer or EventAuditWriteFailed
	Detail string
}

func (p *Pacer) alert(a Alert) {
	if p.cfg.alert != nil {
		p.cfg.alert(a)
	}
}

// reportBreaker audits a breaker transition (and alerts on opening) and writes it through to the store.
func (p *Pacer) reportBreaker(h *host, ch *breakerChange, now time.Time) {
	if ch == nil {
		return
	}
	event, level := audit.EventBreakerClosed, zerolog.InfoLevel
	switch ch.to {
	case audit.BreakerOpen:
		event, level = audit.EventBreakerOpened, zerolog.ErrorLevel
	case audit.BreakerHalfOpen:
		event = audit.EventBreakerHalfOpen
	}
	p.cfg.observer.BreakerChanged(h.key, ch.to)
	detail := fmt.Sprintf("%s → %s: %s", ch.from, ch.to, ch.reason)
	p.audit.emit(level, auditEvent{at: now, host: h.key, event: event, trigger: audit.TriggerBreaker,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
	if ch.to == audit.BreakerOpen {
		p.alert(Alert{At: now, Host: h.key, Event: event, Detail: detail})
	}
	p.persistNow(h)
}
