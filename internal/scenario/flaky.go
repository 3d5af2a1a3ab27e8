package scenario

import (
	"net/http"
	"time"
)

// FlakyKind is how a Flaky host refuses a page.
type FlakyKind int

// The refusals a Flaky host draws from.
const (
	// FlakyTooMany answers 429, with Flaky.RetryAfter when set.
	FlakyTooMany FlakyKind = iota
	// FlakyUnavailable answers 503 without Retry-After.
	FlakyUnavailable
	// FlakyTimeout answers nothing: the request is held for Flaky.Hold, then the connection is
	// dropped (logged with status 0). A client's own timeout usually ends it first.
	FlakyTimeout
)

// String returns "429", "503" or "timeout".
func (k FlakyKind) String() string {
	switch k {
	case FlakyTooMany:
		return "429"
	case FlakyUnavailable:
		return "503"
	case FlakyTimeout:
		return "timeout"
	}
	return "unknown"
}

// defaultFlakyHold is how long a FlakyTimeout holds a request when Flaky.Hold is zero: longer than
// Colly's 10 s client timeout.
const defaultFlakyHold = 30 * time.Second

// Flaky refuses a Fraction of the pages on their first attempt, whatever the rate: an application
// that fails now and then (a flaky backend, a lock timeout), not a limiter. Slowing down changes
// nothing. Whether a first attempt is refused, and how, is a hash of Seed and its ordinal among the
// host's first attempts (the n-th page requested for the first time), so a run is reproducible
// whichever page a client happens to send n-th; a page refused once is served on every later attempt.
type Flaky struct {
	Fraction float64 // of the pages refused on their first attempt, in [0, 1]
	Seed     uint64
	// Kinds are the refusals drawn from, one per refused page (FlakyTooMany when empty).
	Kinds []FlakyKind
	// RetryAfter is announced with each 429, rounded up to whole seconds. Zero sends none.
	RetryAfter time.Duration
	// Hold is how long a FlakyTimeout holds its request before dropping the connection (30 s when zero).
	Hold time.Duration
}

// refusal decides whether the n-th first attempt of a page (0 for the host's first) is refused, and how.
func (f *Flaky) refusal(n int) (FlakyKind, bool) {
	h := mix(f.Seed ^ mix(uint64(n)))
	if float64(h>>11)/(1<<53) >= f.Fraction {
		return 0, false
	}
	if len(f.Kinds) == 0 {
		return FlakyTooMany, true
	}
	return f.Kinds[mix(h)%uint64(len(f.Kinds))], true
}

// status is the HTTP status a kind answers (0 for a timeout).
func (k FlakyKind) status() int {
	switch k {
	case FlakyTooMany:
		return http.StatusTooManyRequests
	case FlakyUnavailable:
		return http.StatusServiceUnavailable
	}
	return 0
}

// mix is splitmix64's finalizer: a well-spread 64-bit hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
