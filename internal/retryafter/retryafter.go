// Package retryafter parses the Retry-After field (RFC 9110 §10.2.3): delay-seconds or an HTTP-date,
// the date measured against the response's own Date so a server with a skewed clock still gets the
// wait it meant. It is pure: the instant the response arrived and the largest wait accepted are
// parameters; how long the wait then holds a host is the pacer's decision.
package retryafter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/collypace/ext/internal/duration"
	"github.com/collypace/ext/internal/httpfield"
)

// Sentinel errors of the parser. The errors returned wrap them with the offending value; match them
// with errors.Is.
var (
	// ErrInvalid reports a Retry-After value that is neither delay-seconds nor an HTTP-date.
	ErrInvalid = errors.New("ext: invalid Retry-After")
	// ErrTooLong reports a Retry-After wait above the accepted maximum.
	ErrTooLong = errors.New("ext: Retry-After above the maximum")
)

// Parse returns how long from now the server asked us to wait.
//
// values are all Retry-After field values of the response (h.Values("Retry-After")), date its Date
// field ("" when absent), now the local time the response arrived, maxWait the largest wait we
// accept (a negative maxWait counts as 0). present is false when there is no Retry-After at all.
//
// An HTTP-date is measured against the response's own Date when that parses, so a server whose clock
// is skewed still gets the delay it meant; otherwise against now. A date in the past means no wait.
// Several values (several fields, or a comma-separated list) yield the largest wait within maxWait.
// When none is, a wait above maxWait is returned with ErrTooLong (the largest such, saturated at the
// largest Duration on overflow), and failing that 0 with ErrInvalid quoting the first field value.
func Parse(values []string, date string, now time.Time, maxWait time.Duration) (wait time.Duration, present bool, err error) {
	if len(values) == 0 {
		return 0, false, nil
	}
	maxWait = max(maxWait, 0)
	base := httpfield.ServerClock(date, now)

	var (
		best, long      time.Duration
		haveBest        bool
		longErr, badErr error
	)
	for _, v := range values {
		usable := false
		parts := strings.Split(v, ",")
		for i := 0; i < len(parts); i++ {
			elem := parts[i]
			// IMF-fixdate and RFC 850 dates contain a comma: rejoin the halves.
			if i+1 < len(parts) {
				joined := parts[i] + "," + parts[i+1]
				if _, ok := httpfield.ParseDate(httpfield.TrimOWS(joined)); ok {
					elem = joined
					i++
				}
			}
			w, err := element(elem, base, maxWait)
			switch {
			case err == nil:
				usable = true
				if !haveBest || w > best {
					best, haveBest = w, true
				}
			case errors.Is(err, ErrTooLong):
				usable = true
				if longErr == nil || w > long {
					long, longErr = w, err
				}
			}
		}
		// Quote the whole value, not the fragment that failed: a bad date would otherwise be reported
		// as its day name.
		if !usable && badErr == nil {
			if v = httpfield.TrimOWS(v); v == "" {
				badErr = fmt.Errorf("%w: empty value", ErrInvalid)
			} else {
				badErr = fmt.Errorf("%w: %s", ErrInvalid, httpfield.Quote(v, httpfield.QuoteLimit))
			}
		}
	}
	switch {
	case haveBest:
		return best, true, nil
	case longErr != nil:
		return long, true, longErr
	default:
		return 0, true, badErr
	}
}

// element parses one delay-seconds or HTTP-date, the date measured from base. An invalid element
// yields the bare ErrInvalid: the caller quotes the whole field value.
func element(raw string, base time.Time, maxWait time.Duration) (time.Duration, error) {
	s := httpfield.TrimOWS(raw)
	var d time.Duration
	if httpfield.IsDigits(s) {
		const maxSeconds = int64(duration.Max / time.Second)
		var n int64
		for i := 0; i < len(s); i++ {
			n = n*10 + int64(s[i]-'0')
			if n > maxSeconds {
				return duration.Max, fmt.Errorf("%w: %s seconds overflow a duration", ErrTooLong, httpfield.Quote(s, httpfield.QuoteLimit))
			}
		}
		d = time.Duration(n) * time.Second
	} else if t, ok := httpfield.ParseDate(s); ok {
		d = max(t.Sub(base), 0) // Sub saturates instead of wrapping.
	} else {
		return 0, ErrInvalid
	}
	if d > maxWait {
		return d, fmt.Errorf("%w: %s is %v, maximum %v", ErrTooLong, httpfield.Quote(s, httpfield.QuoteLimit), d, maxWait)
	}
	return d, nil
}
