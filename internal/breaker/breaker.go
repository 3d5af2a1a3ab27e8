// Package breaker is one host's circuit breaker, a state machine of explicit inputs (as gobreaker):
// closed, open (tripped by consecutive refusals, a sustained refusal-driven delay, a failed probe, or
// parked until a host's announced time), half-open (one probe through). The pacer feeds it each
// outcome and asks it before each departure; it reports each transition for the pacer to audit. The
// host's mutex guards a Breaker: it has no lock, no clock and no logger of its own.
package breaker

import (
	"math"
	"time"

	"github.com/collypace/ext/audit"
)

// Rule is when a closed breaker trips (ext.BreakerPolicy's Threshold, Sustain and Failures): a
// refusal-driven delay at or above Threshold for Sustain, or Failures consecutive refusals (0: never).
type Rule struct {
	Threshold, Sustain time.Duration
	Failures           int
}

// Restore sets what a store kept of the breaker: its state, since when, its consecutive refusals and
// the instant it is parked until (zero: not parked). A half-open breaker's probe died with the process
// that sent it: it is open again, and probes again.
func (b *Breaker) Restore(state audit.BreakerState, changed time.Time, failures int, parkUntil time.Time) {
	b.state, b.changed, b.failures = state, changed, failures
	if !parkUntil.IsZero() {
		b.until = parkUntil.UnixNano()
	}
	if b.state == audit.BreakerHalfOpen {
		b.state = audit.BreakerOpen
	}
}

// State is the breaker's state, Changed when it entered it, and Failures its consecutive refusals.
func (b *Breaker) State() audit.BreakerState { return b.state }
func (b *Breaker) Changed() time.Time        { return b.changed }
func (b *Breaker) Failures() int             { return b.failures }

// Probing reports whether a half-open breaker's probe is in flight, and Resolved is closed when its
// outcome is known (nil when no probe is in flight).
func (b *Breaker) Probing() bool             { return b.probing }
func (b *Breaker) Resolved() <-chan struct{} { return b.resolved }

// Breaker is one host's circuit breaker. The host's mutex protects it.
type Breaker struct {
	state     audit.BreakerState
	changed   time.Time     // when it entered state
	until     int64         // open: no probe before then either (a Retry-After or Crawl-delay above its cap), unix nanos (a host stays within a size class); 0 when none
	reason    audit.Trip    // why it last opened
	highSince time.Time     // since when the interval is at or above the threshold; zero when below
	failures  int           // consecutive refusals
	probing   bool          // half-open: the probe is in flight
	resolved  chan struct{} // half-open: closed when the probe's outcome is known
}

// Change is a transition to report once the host's lock is released.
type Change struct {
	From, To audit.BreakerState
	Reason   string
}

// Trip opens the breaker (from closed or half-open) for reason at now.
func (b *Breaker) Trip(now time.Time, reason audit.Trip) *Change {
	if b.state == audit.BreakerOpen {
		return nil
	}
	ch := &Change{From: b.state, To: audit.BreakerOpen, Reason: string(reason)}
	b.SettleProbe()
	b.state, b.changed, b.reason = audit.BreakerOpen, now, reason
	return ch
}

// Park opens the breaker for reason at now, as Trip, and keeps it open until at least
// until (it stays open longer when already open until later). It reports the transition, if any.
func (b *Breaker) Park(now time.Time, reason audit.Trip, until time.Time) *Change {
	ch := b.Trip(now, reason)
	if until.IsZero() {
		return ch
	}
	t := int64(math.MaxInt64) // UnixNano saturates at the latest instant a store can write, in 2262
	if until.Before(time.Unix(0, math.MaxInt64)) {
		t = until.UnixNano()
	}
	b.until = max(b.until, t)
	return ch
}

// ParkEnd returns the instant an open breaker is parked until, zero when it is not parked.
func (b *Breaker) ParkEnd() time.Time {
	if b.state != audit.BreakerOpen || b.until == 0 {
		return time.Time{}
	}
	return time.Unix(0, b.until)
}

// ReopensAt returns when an open breaker lets its probe through: at the end of the cool-down that
// began when it opened, or later when it was parked until a given time.
func (b *Breaker) ReopensAt(cooldown time.Duration) time.Time {
	end := b.changed.Add(cooldown)
	if b.until == 0 {
		return end
	}
	if park := time.Unix(0, b.until); park.After(end) {
		return park
	}
	return end
}

// closeProbe closes the breaker after a successful probe.
func (b *Breaker) closeProbe(now time.Time) *Change {
	if b.state == audit.BreakerClosed {
		return nil
	}
	ch := &Change{From: b.state, To: audit.BreakerClosed, Reason: "probe_succeeded"}
	b.SettleProbe()
	b.state, b.changed, b.failures, b.highSince, b.until = audit.BreakerClosed, now, 0, time.Time{}, 0
	return ch
}

// SettleProbe ends the half-open probe: whoever waits for its outcome (Resolved) goes on.
func (b *Breaker) SettleProbe() {
	if b.resolved != nil {
		close(b.resolved)
		b.resolved = nil
	}
	b.probing = false
}

// Admission is what the breaker says about a departure.
type Admission int

const (
	Admitted      Admission = iota // closed: depart
	AdmittedProbe                  // half-open: this departure is the probe
	Defer                          // open: defer the request
	WaitProbe                      // half-open, probe in flight: wait for its outcome
)

// Admit decides whether a departure may go, moving an open breaker whose cool-down (and park,
// see Park) is over to half-open. stillTripped reports whether the condition that tripped it
// persists (a Crawl-delay above the cap, as last read), in which case it stays open; the robots.txt
// read that re-evaluates it clears it first, so that read can be the probe.
func (b *Breaker) Admit(now time.Time, cooldown time.Duration, stillTripped bool) (Admission, *Change) {
	switch b.state {
	case audit.BreakerClosed:
		return Admitted, nil
	case audit.BreakerOpen:
		if now.Before(b.ReopensAt(cooldown)) || stillTripped {
			return Defer, nil
		}
		b.state, b.changed = audit.BreakerHalfOpen, now
		b.probing, b.resolved = true, make(chan struct{})
		return AdmittedProbe, &Change{From: audit.BreakerOpen, To: audit.BreakerHalfOpen, Reason: "cooldown_over"}
	default: // half-open
		if !b.probing {
			b.probing, b.resolved = true, make(chan struct{})
			return AdmittedProbe, nil
		}
		return WaitProbe, nil
	}
}

// Observe updates the breaker with an outcome at now (a refusal, or a clean response, which resets
// the count of refusals in a row), given the host's refusal-driven delay after it (adaptive). probe
// says whether the outcome is the half-open probe's.
func (b *Breaker) Observe(refused, clean, probe bool, adaptive time.Duration, p Rule, now time.Time) *Change {
	if probe && b.state == audit.BreakerHalfOpen {
		if refused {
			return b.Trip(now, audit.TripProbeFailed)
		}
		return b.closeProbe(now)
	}
	if refused {
		b.failures++
	} else if clean {
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
		return b.Trip(now, audit.TripFailures)
	case !b.highSince.IsZero() && now.Sub(b.highSince) >= p.Sustain:
		return b.Trip(now, audit.TripSustainedDelay)
	}
	return nil
}
