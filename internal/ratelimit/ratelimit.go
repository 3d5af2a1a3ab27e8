// Package ratelimit parses the rate-limit fields of a response into one signal for the next
// departures to its host: X-RateLimit-Limit/Remaining/Reset, the older IETF drafts' RateLimit-Limit/
// Remaining/Reset, and the newer drafts' structured RateLimit and RateLimit-Policy (RFC 9651). It is
// pure: the instant the response arrived and the longest reset accepted are parameters; turning the
// signal into holds, intervals and audit events is the pacer's work.
package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/collypace/ext/internal/duration"
	"github.com/collypace/ext/internal/httpfield"
)

// ErrInvalid reports a malformed rate-limit field that was ignored.
// The errors returned wrap it with the field and its value; match it with
// errors.Is.
var ErrInvalid = errors.New("ext: invalid rate-limit header")

// Parse reads the rate-limit fields of a response received at now.
// maxReset bounds the time to reset we accept (larger is invalid; a negative
// maxReset counts as 0). found is false when the response carries no usable
// rate-limit field. errs has one error, wrapping ErrInvalid and
// naming the field and its value, per malformed field that was ignored. An
// epoch reset is measured from the response's Date (see httpfield.ServerClock).
//
// When several families are present and valid, the most restrictive signal
// wins (see moreRestrictive); a tie goes to the structured fields, then the
// draft ones. A family missing its remaining or reset part is ignored
// silently: it is incomplete, not malformed.
func Parse(h http.Header, now time.Time, maxReset time.Duration) (sig Signal, found bool, errs []error) {
	if !hasFields(h) {
		return sig, false, nil // most responses: no Date to parse, no closure
	}
	maxReset = max(maxReset, 0)
	consider := func(s Signal, ok bool) {
		if ok && (!found || s.moreRestrictive(sig)) {
			sig, found = s, true
		}
	}
	server := httpfield.ServerClock(h.Get("Date"), now)
	consider(parseSF(h, now, maxReset, &errs))
	consider(draftFamily.parse(h, now, server, maxReset, &errs))
	consider(xFamily.parse(h, now, server, maxReset, &errs))
	return sig, found, errs
}

// Signal is what a response's rate-limit fields imply for the next
// departures to the host.
type Signal struct {
	// Interval spreads the remaining quota over the time to reset:
	// reset / (remaining+1), rounded up, so the remaining requests all
	// depart before the reset and the one after them opens the next window
	// (reset / remaining would leave one request of every window unused:
	// its last departure lands at the reset). When Exhausted, it is the
	// next window's: window / quota when the server published both
	// (RateLimit-Policy), else 0; the exhausted window is the hold to Reset,
	// not an interval, so the first departure after the reset does not cost
	// a second window.
	// 0 = no constraint.
	Interval time.Duration
	// Until is when Interval expires: the reset, or when Exhausted with a
	// known window, the end of the next window.
	Until time.Time
	// Reset is the reset instant.
	Reset time.Time
	// Exhausted reports remaining == 0: nothing may depart before Reset.
	Exhausted bool
	// Source is the header family used: SourceX, SourceDraft
	// or SourceSF.
	Source string
}

// Values of Signal.Source.
const (
	SourceX     = "x-ratelimit"  // X-RateLimit-Limit, -Remaining, -Reset
	SourceDraft = "ratelimit"    // RateLimit-Limit, -Remaining, -Reset (older IETF drafts)
	SourceSF    = "ratelimit-sf" // structured RateLimit and RateLimit-Policy (newer IETF drafts)
)

// moreRestrictive reports whether s constrains departures more than o:
// exhausted first (then the later reset), then the longer interval, then the
// later expiry.
func (s Signal) moreRestrictive(o Signal) bool {
	if s.Exhausted != o.Exhausted {
		return s.Exhausted
	}
	if s.Exhausted && !s.Reset.Equal(o.Reset) {
		return s.Reset.After(o.Reset)
	}
	if s.Interval != o.Interval {
		return s.Interval > o.Interval
	}
	return s.Until.After(o.Until)
}

// signalFor is the signal of remaining requests until a reset that
// is reset from now, at until. next is the policy of the windows that follow
// (quota and window in seconds), with -1 for what the server did not publish.
// ok is false when it constrains nothing: a reset now, whatever remains,
// means a fresh window.
func signalFor(remaining int64, reset time.Duration, until time.Time, next policy, source string) (Signal, bool) {
	if reset <= 0 {
		return Signal{}, false
	}
	sig := Signal{Until: until, Reset: until, Source: source}
	if remaining == 0 {
		sig.Exhausted = true
		if next.q >= 1 && next.w >= 1 {
			window := duration.Mul(time.Second, float64(next.w))
			sig.Interval, sig.Until = spread(window, next.q), until.Add(window)
		}
		return sig, true
	}
	// The remaining requests before the reset, the next one at it; remaining
	// is at most MaxInt64, so the +1 saturates (any n above reset is 1 ns).
	sig.Interval = spread(reset, min(remaining, math.MaxInt64-1)+1)
	return sig, true
}

// spread is d / n rounded up (n ≥ 1): never spend a quota faster than allowed.
func spread(d time.Duration, n int64) time.Duration {
	iv := d / time.Duration(n)
	if d%time.Duration(n) != 0 {
		iv++
	}
	return iv
}

// hasFields reports whether h has any field Parse reads (RateLimit-Policy is read
// only alongside RateLimit).
func hasFields(h http.Header) bool {
	for _, k := range [...]string{sfKey,
		draftFamily.limitKey, draftFamily.remainingKey, draftFamily.resetKey,
		xFamily.limitKey, xFamily.remainingKey, xFamily.resetKey} {
		if len(h[k]) > 0 {
			return true
		}
	}
	return false
}

// fieldError is the audit error for a rate-limit field that was ignored.
func fieldError(name, value, reason string) error {
	return fmt.Errorf("%w: %s %s: %s", ErrInvalid, name, httpfield.Quote(value, httpfield.QuoteLimit), reason)
}
