package ext

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// ErrBreakerOpen is returned for a departure to a host whose circuit breaker is open: the request
// is deferred, not sent.
var ErrBreakerOpen = errors.New("ext: host parked: circuit breaker open")

// BreakerState is the state of a host's circuit breaker.
type BreakerState int

// Breaker states: closed sends requests, open defers them, half-open lets one probe through while
// the others wait for its outcome.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

// String returns the state's name: closed, open or half-open ("unknown" for any other value).
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

func (s BreakerState) valid() bool { return s >= BreakerClosed && s <= BreakerHalfOpen }

// Breaker defaults, documented in the README.
const (
	DefaultBreakerThreshold = 45 * time.Second // an interval at or above it…
	DefaultBreakerSustain   = 2 * time.Minute  // …for this long trips the breaker
	DefaultBreakerFailures  = 10               // consecutive refusals that trip it
	DefaultBreakerCooldown  = 5 * time.Minute  // open this long before a probe
)

// BreakerPolicy sets when a host's breaker trips and how long it stays open.
type BreakerPolicy struct {
	Threshold time.Duration // trip when the interval stays at or above it…
	Sustain   time.Duration // …for this long
	Failures  int           // trip after this many consecutive refusals
	Cooldown  time.Duration // stay open this long, then let one probe through
	// IgnoreCaps keeps crawling a host whose Retry-After or Crawl-delay is above its cap (clamped,
	// audited with compliance_flag=false) instead of parking it. By default such a host is parked,
	// and a Crawl-delay above the cap keeps it parked until its robots.txt asks for less.
	IgnoreCaps bool
}

// Breaker trip reasons, in audit details and alerts.
const (
	TripSustainedDelay = "sustained_delay"
	TripFailures       = "consecutive_failures"
	TripRetryAfter     = "retry_after_above_cap"
	TripCrawlDelay     = "crawl_delay_above_cap"
	TripProbeFailed    = "probe_failed"
)

// breaker is one host's circuit breaker. The host's mutex protects it.
type breaker struct {
	state     BreakerState
	changed   time.Time     // when it entered state
	reason    string        // why it last opened
	highSince time.Time     // since when the interval is at or above the threshold; zero when below
	failures  int           // consecutive refusals
	probing   bool          // half-open: the probe is in flight
	resolved  chan struct{} // half-open: closed when the probe's outcome is known
}

// breakerChange is a transition to report once the host's lock is released.
type breakerChange struct {
	from, to BreakerState
	reason   string
}

// tripLocked opens the breaker (from closed or half-open) for reason at now.
func (b *breaker) tripLocked(now time.Time, reason string) *breakerChange {
	if b.state == BreakerOpen {
		return nil
	}
	ch := &breakerChange{from: b.state, to: BreakerOpen, reason: reason}
	b.settleProbe()
	b.state, b.changed, b.reason = BreakerOpen, now, reason
	return ch
}

// closeLocked closes the breaker after a successful probe.
func (b *breaker) closeLocked(now time.Time) *breakerChange {
	if b.state == BreakerClosed {
		return nil
	}
	ch := &breakerChange{from: b.state, to: BreakerClosed, reason: "probe_succeeded"}
	b.settleProbe()
	b.state, b.changed, b.failures, b.highSince = BreakerClosed, now, 0, time.Time{}
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

// admitLocked decides whether a departure may go, moving an open breaker whose cool-down is over to
// half-open. stillTripped reports whether the condition that tripped it persists (a Crawl-delay
// above the cap), in which case it stays open.
func (b *breaker) admitLocked(now time.Time, cooldown time.Duration, stillTripped bool) (admission, *breakerChange) {
	switch b.state {
	case BreakerClosed:
		return admitted, nil
	case BreakerOpen:
		if now.Sub(b.changed) < cooldown || stillTripped {
			return deferIt, nil
		}
		b.state, b.changed = BreakerHalfOpen, now
		b.probing, b.resolved = true, make(chan struct{})
		return admittedProbe, &breakerChange{from: BreakerOpen, to: BreakerHalfOpen, reason: "cooldown_over"}
	default: // half-open
		if !b.probing {
			b.probing, b.resolved = true, make(chan struct{})
			return admittedProbe, nil
		}
		return waitProbe, nil
	}
}

// observeLocked updates the breaker with an outcome at now, given the host's interval after it.
// probe says whether the outcome is the half-open probe's.
func (b *breaker) observeLocked(v Verdict, probe bool, iv time.Duration, p BreakerPolicy, now time.Time) *breakerChange {
	if probe && b.state == BreakerHalfOpen {
		if v.Refused {
			return b.tripLocked(now, TripProbeFailed)
		}
		return b.closeLocked(now)
	}
	if v.Refused {
		b.failures++
	} else if v.Trigger == TriggerClean {
		b.failures = 0
	}
	if iv >= p.Threshold {
		if b.highSince.IsZero() {
			b.highSince = now
		}
	} else {
		b.highSince = time.Time{}
	}
	if b.state != BreakerClosed {
		return nil
	}
	switch {
	case p.Failures > 0 && b.failures >= p.Failures:
		return b.tripLocked(now, TripFailures)
	case !b.highSince.IsZero() && now.Sub(b.highSince) >= p.Sustain:
		return b.tripLocked(now, TripSustainedDelay)
	}
	return nil
}

// Alert is raised when a host's breaker opens, the store fails or an option value is invalid (WithAlert).
type Alert struct {
	At     time.Time
	Host   string
	Event  string // EventBreakerOpened, EventStoreUnavailable or EventOptionInvalid
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
	event, level := EventBreakerClosed, zerolog.InfoLevel
	switch ch.to {
	case BreakerOpen:
		event, level = EventBreakerOpened, zerolog.ErrorLevel
	case BreakerHalfOpen:
		event = EventBreakerHalfOpen
	}
	p.cfg.observer.BreakerChanged(h.key, ch.to)
	detail := fmt.Sprintf("%s → %s: %s", ch.from, ch.to, ch.reason)
	p.audit.emit(level, auditEvent{at: now, host: h.key, event: event, trigger: TriggerBreaker,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
	if ch.to == BreakerOpen {
		p.alert(Alert{At: now, Host: h.key, Event: event, Detail: detail})
	}
	p.persistNow(h)
}
