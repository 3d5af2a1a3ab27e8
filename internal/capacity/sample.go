package capacity

import "time"

// RefusalKind says what a refusal teaches about the host's speed.
type RefusalKind uint8

const (
	// refusedRate: asked too fast (429, or any refusal with a Retry-After).
	RefusedRate RefusalKind = iota
	// refusedUnclear: a 503 without Retry-After, nginx limit_req's default answer and an outage's alike.
	// The first after a clean response is read as a rate refusal; a second in a row shows an outage
	// (spacing wider did not help), and the first one's lesson is taken back.
	RefusedUnclear
	// refusedOutage: another 5xx or a broken connection: nothing about speed.
	RefusedOutage
	// refusedSpaced: a rate refusal of the first departure after a Retry-After hold, spaced from the
	// one before by the whole hold: no limiter refuses that for speed (nginx counts from the last
	// accepted request, a bucket refilled, a window slid on), so it teaches nothing about speed either,
	// only that the host refuses whatever the spacing (noise).
	RefusedSpaced
)

// Sample is one outcome as the capacity model learns from it: every fact a rule reads, explicit.
// A limiter counts from the last request it accepted (nginx, a token bucket) or counts every request
// (HAProxy's window): credited and spacing are those two readings of the same departure, and each
// rule takes the one that makes it fail slow when it reads the host wrong.
type Sample struct {
	At        time.Time     // when the outcome was read
	Gen       uint32        // the model's generation when the request departed
	Kind      RefusalKind   // a refusal's kind, as the response says it (refusedRate, refusedUnclear, refusedOutage)
	Paced     bool          // a refusal that came with a Retry-After hold
	AfterHold bool          // the first departure since a hold ended
	Jitter    time.Duration // the jitter added to the delay (the generation's: the departure was paced by it)
	Spacing   time.Duration // since the previous departure to the host (0: none known)
	Credited  time.Duration // since the host's previous accepted departure (0: unknown)
	// CreditLower: Credited is a lower bound only (a fleet's departure before was refused or a
	// robots.txt read, so the host's previous accepted one lies further back, by how much unknown).
	CreditLower bool
	Fleet       bool // admitted by a shared store: one member's outcomes, a share of the fleet's
	// Span: how many of the fleet's departures a clean response stands for, its own and the other
	// members' since this member's previous one under the same model (0 or 1: itself alone).
	Span uint8
	// Pool is the fleet's outcomes on the host, pooled by a shared store, for the noise test (a fleet
	// member's only: Mark 0 when the store does not pool them or its count is older than this
	// member's last backoff).
	Pool Pool
}

// asked is the gap the departure asked for: the delay it was paced by and its jitter. What was
// measured may be longer by the crawler's own lateness, which is not the host's.
func (s Sample) asked(delay time.Duration) time.Duration {
	return delay + s.Jitter
}

// gap is the interval the host refused, on the longer reading (the bound it sets is then slower):
// since the last accepted departure when known, the departure's own spacing otherwise.
func (s Sample) gap(delay time.Duration) time.Duration {
	return max(s.asked(delay), s.Credited)
}

// bound is the gap a refusal bounds the host's interval by: the longer reading (gap), unless that is
// only a lower bound (CreditLower): then the departure's own spacing. A bound read too long would lie
// above an interval the host then accepts, and the bounds could no longer be bisected: a fleet stuck at
// half HAProxy's rate for minutes (its window counts refused requests, so the refusal after a refused
// one said nothing of the gap since an accepted one).
func (s Sample) bound(delay time.Duration) time.Duration {
	if s.CreditLower {
		return max(s.asked(delay), s.Spacing)
	}
	return s.gap(delay)
}

// exactCredit is Credited when it is exact: 0 when unknown or only a lower bound (CreditLower).
func (s Sample) exactCredit() time.Duration {
	if s.CreditLower {
		return 0
	}
	return s.Credited
}

// provesOnlyLonger reports whether a clean response proves an interval longer than the one tested: the
// limiter counted since its last accepted request, and a refusal (or a hold) came in between. It then
// confirms nothing about the delay under test (creditSlack for the network's and the clock's noise).
func (s Sample) provesOnlyLonger(delay time.Duration) bool {
	tested := s.asked(delay)
	return s.Credited > 0 && s.Credited > tested+tested/creditSlack+2*time.Millisecond
}

// creditSlack: a clean response proves only a longer interval when it came a tenth later than tested.
const creditSlack = 10
