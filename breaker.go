package ext

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/rs/zerolog"
)

// This file is the pacer's side of each host's circuit breaker: its policy and defaults, what it is
// fed, and the transitions it reports (audit events, alerts, the store); the state machine itself is
// internal/breaker.

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

// rule is when a closed breaker trips.
func (b BreakerPolicy) rule() breaker.Rule {
	return breaker.Rule{Threshold: b.Threshold, Sustain: b.Sustain, Failures: b.Failures}
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
func (p *Pacer) reportBreaker(h *host, ch *breaker.Change, now time.Time) {
	if ch == nil {
		return
	}
	event, level := audit.EventBreakerClosed, zerolog.InfoLevel
	switch ch.To {
	case audit.BreakerOpen:
		event, level = audit.EventBreakerOpened, zerolog.ErrorLevel
	case audit.BreakerHalfOpen:
		event = audit.EventBreakerHalfOpen
	}
	p.cfg.observer.BreakerChanged(h.key, ch.To)
	detail := fmt.Sprintf("%s → %s: %s", ch.From, ch.To, ch.Reason)
	p.audit.emit(level, auditEvent{at: now, host: h.key, event: event, trigger: audit.TriggerBreaker,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
	if ch.To == audit.BreakerOpen {
		p.alert(Alert{At: now, Host: h.key, Event: event, Detail: detail})
	}
	p.persistNow(h)
}
