package ratelimit

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/collypace/ext/internal/httpfield"
)

// family names the three fields of a Limit/Remaining/Reset family.
// Keys are canonical, for http.Header lookups; names are for messages.
type family struct {
	source                              string
	limitKey, remainingKey, resetKey    string
	limitName, remainingName, resetName string
	epochReset                          bool // Reset may be an epoch instead of delta seconds
}

var (
	xFamily = family{
		source:   SourceX,
		limitKey: "X-Ratelimit-Limit", remainingKey: "X-Ratelimit-Remaining", resetKey: "X-Ratelimit-Reset",
		limitName: "X-RateLimit-Limit", remainingName: "X-RateLimit-Remaining", resetName: "X-RateLimit-Reset",
		epochReset: true,
	}
	draftFamily = family{
		source:   SourceDraft,
		limitKey: "Ratelimit-Limit", remainingKey: "Ratelimit-Remaining", resetKey: "Ratelimit-Reset",
		limitName: "RateLimit-Limit", remainingName: "RateLimit-Remaining", resetName: "RateLimit-Reset",
	}
)

// Reset values of X-RateLimit-Reset at or above these are epoch seconds and
// epoch milliseconds (2001-09-09 and 33658 AD as epoch seconds); below,
// delta seconds.
const (
	epochSeconds = 1_000_000_000
	epochMillis  = 1_000_000_000_000
)

// parse reads one Limit/Remaining/Reset family. A malformed Limit is reported
// and dropped; a malformed Remaining or Reset, or Remaining above Limit,
// invalidates the family.
//
// Each field may repeat (several fields or a comma-separated list) if every
// copy agrees. In a Limit field, list elements with parameters ("10;w=1", the
// quota policies of draft-ietf-httpapi-ratelimit-headers up to -06) are
// skipped. Reset accepts fractional seconds ("1.5", as Discord sends), rounded
// up to the millisecond. In the X- family a Reset of 1e9 or more is epoch
// seconds and of 1e12 or more epoch milliseconds, measured from server, the
// server's clock; an epoch not after it means the window already reset: no
// constraint, no error. The signal's instants are on the local clock (now).
func (f family) parse(h http.Header, now, server time.Time, maxReset time.Duration, errs *[]error) (Signal, bool) {
	limVals, remVals, resetVals := h.Values(f.limitKey), h.Values(f.remainingKey), h.Values(f.resetKey)
	if len(limVals) == 0 && len(remVals) == 0 && len(resetVals) == 0 {
		return Signal{}, false
	}
	fail := func(name string, vals []string, reason string) {
		*errs = append(*errs, fieldError(name, strings.Join(vals, ", "), reason))
	}

	limit := int64(-1) // absent
	if len(limVals) > 0 {
		if v, reason := fieldValue(limVals, true); reason != "" {
			fail(f.limitName, limVals, reason)
		} else if n, ok := httpfield.ParseUint(v); !ok {
			fail(f.limitName, limVals, "not a non-negative integer")
		} else if n < 1 {
			fail(f.limitName, limVals, "below 1")
		} else {
			limit = n
		}
	}

	remaining, remOK := int64(0), false
	if len(remVals) > 0 {
		if v, reason := fieldValue(remVals, false); reason != "" {
			fail(f.remainingName, remVals, reason)
		} else if n, ok := httpfield.ParseUint(v); !ok {
			fail(f.remainingName, remVals, "not a non-negative integer")
		} else if limit >= 0 && n > limit {
			fail(f.remainingName, remVals, fmt.Sprintf("above %s %d", f.limitName, limit))
		} else {
			remaining, remOK = n, true
		}
	}

	var (
		reset   time.Duration
		until   time.Time
		resetOK bool
	)
	if len(resetVals) > 0 {
		v, reason := fieldValue(resetVals, false)
		if reason == "" {
			reset, until, reason = f.parseReset(v, now, server, maxReset)
		}
		if reason != "" {
			fail(f.resetName, resetVals, reason)
		} else {
			resetOK = true
		}
	}

	if !remOK || !resetOK {
		return Signal{}, false
	}
	return signalFor(remaining, reset, until, policy{q: -1, w: -1}, f.source)
}

// parseReset returns the time from now to the reset and its instant on the
// local clock, or why v is invalid. An epoch is measured from server, the
// server's clock at now; one at or before it yields a zero reset.
func (f family) parseReset(v string, now, server time.Time, maxReset time.Duration) (time.Duration, time.Time, string) {
	whole, milli, ok := httpfield.ParseDecimal(v)
	if !ok {
		return 0, time.Time{}, "not a non-negative number of seconds"
	}
	if f.epochReset && whole >= epochSeconds {
		var until time.Time
		if whole >= epochMillis {
			until = time.UnixMilli(whole)
			if milli > 0 {
				until = until.Add(time.Millisecond)
			}
		} else {
			until = time.Unix(whole, 0).Add(time.Duration(milli) * time.Millisecond)
		}
		if !until.After(server) {
			return 0, time.Time{}, ""
		}
		reset := until.Sub(server)
		if reset > maxReset {
			return 0, time.Time{}, fmt.Sprintf("resets in %v, above the maximum %v", reset, maxReset)
		}
		return reset, now.Add(reset), ""
	}
	extra := time.Duration(milli) * time.Millisecond
	if whole > int64(maxReset/time.Second) || time.Duration(whole)*time.Second > maxReset-extra {
		return 0, time.Time{}, fmt.Sprintf("above the maximum %v", maxReset)
	}
	reset := time.Duration(whole)*time.Second + extra
	return reset, now.Add(reset), ""
}

// fieldValue returns the one value of a field that may repeat, or
// why there is none: empty, or copies that disagree. skipParams skips list
// elements carrying parameters.
func fieldValue(vals []string, skipParams bool) (string, string) {
	var got string
	have := false
	for _, v := range vals {
		for _, e := range strings.Split(v, ",") {
			e = httpfield.TrimOWS(e)
			if e == "" || (skipParams && strings.Contains(e, ";")) {
				continue
			}
			if have && e != got {
				return "", "conflicting values"
			}
			got, have = e, true
		}
	}
	if !have {
		return "", "no value"
	}
	return got, ""
}
