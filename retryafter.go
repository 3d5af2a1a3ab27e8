package ext

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors of the Retry-After parser. The errors returned wrap them
// with the offending value; match them with errors.Is.
var (
	// errInvalidRetryAfter reports a Retry-After value that is neither
	// delay-seconds nor an HTTP-date.
	errInvalidRetryAfter = errors.New("ext: invalid Retry-After")
	// errRetryAfterTooLong reports a Retry-After wait above the accepted maximum.
	errRetryAfterTooLong = errors.New("ext: Retry-After above the maximum")
)

// parseRetryAfter returns how long from now the server asked us to wait
// (RFC 9110 §10.2.3).
//
// values are all Retry-After field values of the response
// (h.Values("Retry-After")), date its Date field ("" when absent), now the
// local time the response arrived, maxWait the largest wait we accept (a
// negative maxWait counts as 0). present is false when there is no
// Retry-After at all.
//
// An HTTP-date is measured against the response's own Date when that parses,
// so a server whose clock is skewed still gets the delay it meant; otherwise
// against now. A date in the past means no wait. Several values (several
// fields, or a comma-separated list) yield the largest wait within maxWait.
// When none is, a wait above maxWait is returned with errRetryAfterTooLong
// (the largest such, saturated at the largest Duration on overflow), and
// failing that 0 with errInvalidRetryAfter quoting the first field value.
func parseRetryAfter(values []string, date string, now time.Time, maxWait time.Duration) (wait time.Duration, present bool, err error) {
	if len(values) == 0 {
		return 0, false, nil
	}
	maxWait = max(maxWait, 0)
	base := serverClock(date, now)

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
				if _, ok := parseHTTPDate(hdrTrimOWS(joined)); ok {
					elem = joined
					i++
				}
			}
			w, err := retryAfterElement(elem, base, maxWait)
			switch {
			case err == nil:
				usable = true
				if !haveBest || w > best {
					best, haveBest = w, true
				}
			case errors.Is(err, errRetryAfterTooLong):
				usable = true
				if longErr == nil || w > long {
					long, longErr = w, err
				}
			}
		}
		// Quote the whole value, not the fragment that failed: a bad date
		// would otherwise be reported as its day name.
		if !usable && badErr == nil {
			if v = hdrTrimOWS(v); v == "" {
				badErr = fmt.Errorf("%w: empty value", errInvalidRetryAfter)
			} else {
				badErr = fmt.Errorf("%w: %s", errInvalidRetryAfter, quoteValue(v, hdrQuoteLimit))
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

// retryAfterHold is how long a Retry-After wait holds the host: the wait plus
// buffer × wait, saturated at the largest Duration.
func retryAfterHold(wait time.Duration, buffer float64) time.Duration {
	return satAdd(wait, satMul(wait, buffer))
}

// retryAfterElement parses one delay-seconds or HTTP-date, the date measured
// from base. An invalid element yields the bare errInvalidRetryAfter: the
// caller quotes the whole field value.
func retryAfterElement(raw string, base time.Time, maxWait time.Duration) (time.Duration, error) {
	s := hdrTrimOWS(raw)
	var d time.Duration
	if hdrIsDigits(s) {
		const maxSeconds = int64(maxDuration / time.Second)
		var n int64
		for i := 0; i < len(s); i++ {
			n = n*10 + int64(s[i]-'0')
			if n > maxSeconds {
				return maxDuration, fmt.Errorf("%w: %s seconds overflow a duration", errRetryAfterTooLong, quoteValue(s, hdrQuoteLimit))
			}
		}
		d = time.Duration(n) * time.Second
	} else if t, ok := parseHTTPDate(s); ok {
		d = max(t.Sub(base), 0) // Sub saturates instead of wrapping.
	} else {
		return 0, errInvalidRetryAfter
	}
	if d > maxWait {
		return d, fmt.Errorf("%w: %s is %v, maximum %v", errRetryAfterTooLong, quoteValue(s, hdrQuoteLimit), d, maxWait)
	}
	return d, nil
}

// httpDateLayouts are the three HTTP-date formats of RFC 9110 §5.6.7:
// IMF-fixdate, obsolete RFC 850 and ANSI C asctime.
var httpDateLayouts = [...]string{
	http.TimeFormat,
	"Monday, 02-Jan-06 15:04:05 GMT",
	time.ANSIC,
}

// serverClock is the server's time when it sent a response received at now: the response's Date
// field when that parses, else now. Instants the server names (an HTTP-date in Retry-After, an epoch
// rate-limit reset) are measured from it, so a server whose clock is skewed still gets the wait it
// meant.
func serverClock(date string, now time.Time) time.Time {
	if t, ok := parseHTTPDate(hdrTrimOWS(date)); ok {
		return t
	}
	return now
}

// parseHTTPDate is http.ParseTime in UTC: RFC 850 dates must say GMT, as the
// RFC requires, rather than any zone name, which time.Parse would resolve
// against the process's local zone. The day name is not checked against the
// date (time.Parse ignores it). Two-digit RFC 850 years follow time.Parse:
// 69-99 are 19xx, 00-68 are 20xx.
func parseHTTPDate(s string) (time.Time, bool) {
	for _, layout := range httpDateLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
