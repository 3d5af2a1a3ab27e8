package ext

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// errInvalidRateLimit reports a malformed rate-limit field that was ignored.
// The errors returned wrap it with the field and its value; match it with
// errors.Is.
var errInvalidRateLimit = errors.New("ext: invalid rate-limit header")

// rateLimitSignal is what a response's rate-limit fields imply for the next
// departures to the host.
type rateLimitSignal struct {
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
	// Source is the header family used: rateLimitSourceX, rateLimitSourceDraft
	// or rateLimitSourceSF.
	Source string
}

// Values of rateLimitSignal.Source.
const (
	rateLimitSourceX     = "x-ratelimit"  // X-RateLimit-Limit, -Remaining, -Reset
	rateLimitSourceDraft = "ratelimit"    // RateLimit-Limit, -Remaining, -Reset (older IETF drafts)
	rateLimitSourceSF    = "ratelimit-sf" // structured RateLimit and RateLimit-Policy (newer IETF drafts)
)

// moreRestrictive reports whether s constrains departures more than o:
// exhausted first (then the later reset), then the longer interval, then the
// later expiry.
func (s rateLimitSignal) moreRestrictive(o rateLimitSignal) bool {
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

// rateLimitSignalFor is the signal of remaining requests until a reset that
// is reset from now, at until. next is the policy of the windows that follow
// (quota and window in seconds), with -1 for what the server did not publish.
// ok is false when it constrains nothing: a reset now, whatever remains,
// means a fresh window.
func rateLimitSignalFor(remaining int64, reset time.Duration, until time.Time, next rateLimitPolicy, source string) (rateLimitSignal, bool) {
	if reset <= 0 {
		return rateLimitSignal{}, false
	}
	sig := rateLimitSignal{Until: until, Reset: until, Source: source}
	if remaining == 0 {
		sig.Exhausted = true
		if next.q >= 1 && next.w >= 1 {
			window := satMul(time.Second, float64(next.w))
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

// parseRateLimit reads the rate-limit fields of a response received at now.
// maxReset bounds the time to reset we accept (larger is invalid; a negative
// maxReset counts as 0). found is false when the response carries no usable
// rate-limit field. errs has one error, wrapping errInvalidRateLimit and
// naming the field and its value, per malformed field that was ignored. An
// epoch reset is measured from the response's Date (see serverClock).
//
// When several families are present and valid, the most restrictive signal
// wins (see moreRestrictive); a tie goes to the structured fields, then the
// draft ones. A family missing its remaining or reset part is ignored
// silently: it is incomplete, not malformed.
func parseRateLimit(h http.Header, now time.Time, maxReset time.Duration) (sig rateLimitSignal, found bool, errs []error) {
	if !hasRateLimitFields(h) {
		return sig, false, nil // most responses: no Date to parse, no closure
	}
	maxReset = max(maxReset, 0)
	consider := func(s rateLimitSignal, ok bool) {
		if ok && (!found || s.moreRestrictive(sig)) {
			sig, found = s, true
		}
	}
	server := serverClock(h.Get("Date"), now)
	consider(parseRateLimitSF(h, now, maxReset, &errs))
	consider(rateLimitDraft.parse(h, now, server, maxReset, &errs))
	consider(rateLimitX.parse(h, now, server, maxReset, &errs))
	return sig, found, errs
}

// hasRateLimitFields reports whether h has any field parseRateLimit reads (RateLimit-Policy is read
// only alongside RateLimit).
func hasRateLimitFields(h http.Header) bool {
	for _, k := range [...]string{rateLimitSFKey,
		rateLimitDraft.limitKey, rateLimitDraft.remainingKey, rateLimitDraft.resetKey,
		rateLimitX.limitKey, rateLimitX.remainingKey, rateLimitX.resetKey} {
		if len(h[k]) > 0 {
			return true
		}
	}
	return false
}

// rateLimitFamily names the three fields of a Limit/Remaining/Reset family.
// Keys are canonical, for http.Header lookups; names are for messages.
type rateLimitFamily struct {
	source                              string
	limitKey, remainingKey, resetKey    string
	limitName, remainingName, resetName string
	epochReset                          bool // Reset may be an epoch instead of delta seconds
}

var (
	rateLimitX = rateLimitFamily{
		source:   rateLimitSourceX,
		limitKey: "X-Ratelimit-Limit", remainingKey: "X-Ratelimit-Remaining", resetKey: "X-Ratelimit-Reset",
		limitName: "X-RateLimit-Limit", remainingName: "X-RateLimit-Remaining", resetName: "X-RateLimit-Reset",
		epochReset: true,
	}
	rateLimitDraft = rateLimitFamily{
		source:   rateLimitSourceDraft,
		limitKey: "Ratelimit-Limit", remainingKey: "Ratelimit-Remaining", resetKey: "Ratelimit-Reset",
		limitName: "RateLimit-Limit", remainingName: "RateLimit-Remaining", resetName: "RateLimit-Reset",
	}
)

// Reset values of X-RateLimit-Reset at or above these are epoch seconds and
// epoch milliseconds (2001-09-09 and 33658 AD as epoch seconds); below,
// delta seconds.
const (
	rateLimitEpochSeconds = 1_000_000_000
	rateLimitEpochMillis  = 1_000_000_000_000
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
func (f rateLimitFamily) parse(h http.Header, now, server time.Time, maxReset time.Duration, errs *[]error) (rateLimitSignal, bool) {
	limVals, remVals, resetVals := h.Values(f.limitKey), h.Values(f.remainingKey), h.Values(f.resetKey)
	if len(limVals) == 0 && len(remVals) == 0 && len(resetVals) == 0 {
		return rateLimitSignal{}, false
	}
	fail := func(name string, vals []string, reason string) {
		*errs = append(*errs, rateLimitError(name, strings.Join(vals, ", "), reason))
	}

	limit := int64(-1) // absent
	if len(limVals) > 0 {
		if v, reason := rateLimitFieldValue(limVals, true); reason != "" {
			fail(f.limitName, limVals, reason)
		} else if n, ok := hdrParseUint(v); !ok {
			fail(f.limitName, limVals, "not a non-negative integer")
		} else if n < 1 {
			fail(f.limitName, limVals, "below 1")
		} else {
			limit = n
		}
	}

	remaining, remOK := int64(0), false
	if len(remVals) > 0 {
		if v, reason := rateLimitFieldValue(remVals, false); reason != "" {
			fail(f.remainingName, remVals, reason)
		} else if n, ok := hdrParseUint(v); !ok {
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
		v, reason := rateLimitFieldValue(resetVals, false)
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
		return rateLimitSignal{}, false
	}
	return rateLimitSignalFor(remaining, reset, until, rateLimitPolicy{q: -1, w: -1}, f.source)
}

// parseReset returns the time from now to the reset and its instant on the
// local clock, or why v is invalid. An epoch is measured from server, the
// server's clock at now; one at or before it yields a zero reset.
func (f rateLimitFamily) parseReset(v string, now, server time.Time, maxReset time.Duration) (time.Duration, time.Time, string) {
	whole, milli, ok := hdrParseDecimal(v)
	if !ok {
		return 0, time.Time{}, "not a non-negative number of seconds"
	}
	if f.epochReset && whole >= rateLimitEpochSeconds {
		var until time.Time
		if whole >= rateLimitEpochMillis {
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

// rateLimitFieldValue returns the one value of a field that may repeat, or
// why there is none: empty, or copies that disagree. skipParams skips list
// elements carrying parameters.
func rateLimitFieldValue(vals []string, skipParams bool) (string, string) {
	var got string
	have := false
	for _, v := range vals {
		for _, e := range strings.Split(v, ",") {
			e = hdrTrimOWS(e)
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

// rateLimitError is the audit error for a rate-limit field that was ignored.
func rateLimitError(name, value, reason string) error {
	return fmt.Errorf("%w: %s %s: %s", errInvalidRateLimit, name, quoteValue(value, hdrQuoteLimit), reason)
}

// Header keys of the structured rate-limit fields (canonical) and their names.
const (
	rateLimitSFKey      = "Ratelimit"
	rateLimitSFName     = "RateLimit"
	rateLimitPolicyKey  = "Ratelimit-Policy"
	rateLimitPolicyName = "RateLimit-Policy"
)

// parseRateLimitSF reads the structured fields of
// draft-ietf-httpapi-ratelimit-headers (-08 and later):
//
//	RateLimit: "default";r=REMAINING;t=SECONDS, "other";r=...
//	RateLimit-Policy: "default";q=QUOTA;w=WINDOW
//
// Each item is a policy's state; the most restrictive valid item wins. An
// item's policy, matched by name, checks r against q and supplies w as the
// time to reset when t is absent; an item with neither is ignored silently.
// A syntax error (RFC 9651, as github.com/dunglas/httpsfv parses it)
// discards the whole field; a bad parameter value (not a non-negative
// integer, r above q, reset above maxReset) or an inner list discards its
// item. RateLimit-Policy is read only alongside RateLimit, whose remaining
// count it needs. Each field yields at most one error, however many items it
// loses.
func parseRateLimitSF(h http.Header, now time.Time, maxReset time.Duration, errs *[]error) (rateLimitSignal, bool) {
	items, ok := parseSFList(rateLimitSFName, h.Values(rateLimitSFKey), errs)
	if !ok {
		return rateLimitSignal{}, false
	}
	policies := parseRateLimitPolicies(h.Values(rateLimitPolicyKey), errs)

	var (
		best  rateLimitSignal
		found bool
		bad   = rateLimitItemErrors{name: rateLimitSFName}
	)
	for _, m := range items {
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			bad.add(m, "an inner list, not an item")
			continue
		}
		r, ok := sfUintParam(it, "r")
		if !ok {
			bad.add(m, "r is not a non-negative integer")
			continue
		}
		t, tOK := sfUintParam(it, "t")
		if !tOK && sfHasParam(it, "t") {
			bad.add(m, "t is not a non-negative integer")
			continue
		}
		pol, ok := policies[sfName(it)]
		if ok && pol.q >= 0 && r > pol.q {
			bad.add(m, fmt.Sprintf("r above the policy quota q=%d", pol.q))
			continue
		}
		if !tOK {
			if !ok || pol.w < 0 {
				continue
			}
			t = pol.w
		}
		if t > int64(maxReset/time.Second) {
			bad.add(m, fmt.Sprintf("reset %ds above the maximum %v", t, maxReset))
			continue
		}
		reset := time.Duration(t) * time.Second
		next := rateLimitPolicy{q: -1, w: -1}
		if ok && pol.w <= int64(maxReset/time.Second) {
			next = pol // the window after the reset, bounded as a reset is
		}
		if s, ok := rateLimitSignalFor(r, reset, now.Add(reset), next, rateLimitSourceSF); ok && (!found || s.moreRestrictive(best)) {
			best, found = s, true
		}
	}
	bad.flush(errs)
	return best, found
}

// rateLimitPolicy is one item of RateLimit-Policy: q is the quota, w the
// window in seconds; -1 when absent.
type rateLimitPolicy struct {
	q, w int64
}

// parseRateLimitPolicies returns the valid items of RateLimit-Policy by name;
// the first of a name wins.
func parseRateLimitPolicies(lines []string, errs *[]error) map[string]rateLimitPolicy {
	items, ok := parseSFList(rateLimitPolicyName, lines, errs)
	if !ok {
		return nil
	}
	policies := make(map[string]rateLimitPolicy, len(items))
	bad := rateLimitItemErrors{name: rateLimitPolicyName}
	for _, m := range items {
		it, isItem := m.(httpsfv.Item)
		if !isItem {
			bad.add(m, "an inner list, not an item")
			continue
		}
		p := rateLimitPolicy{q: -1, w: -1}
		if q, ok := sfUintParam(it, "q"); ok && q >= 1 {
			p.q = q
		} else if sfHasParam(it, "q") {
			bad.add(m, "q is not a positive integer")
			continue
		}
		if w, ok := sfUintParam(it, "w"); ok {
			p.w = w
		} else if sfHasParam(it, "w") {
			bad.add(m, "w is not a non-negative integer")
			continue
		}
		if _, dup := policies[sfName(it)]; !dup {
			policies[sfName(it)] = p
		}
	}
	bad.flush(errs)
	return policies
}

// rateLimitItemErrors folds the ignored items of one structured field into a
// single error, so a hostile list cannot flood the audit log.
type rateLimitItemErrors struct {
	name   string         // field name
	first  httpsfv.Member // first ignored item
	reason string         // why it was ignored
	n      int            // items ignored
}

func (e *rateLimitItemErrors) add(m httpsfv.Member, reason string) {
	if e.n == 0 {
		e.first, e.reason = m, reason
	}
	e.n++
}

// flush appends the error, if any item was ignored. The item is quoted in
// its canonical serialization.
func (e *rateLimitItemErrors) flush(errs *[]error) {
	if e.n == 0 {
		return
	}
	raw, err := httpsfv.Marshal(httpsfv.List{e.first})
	if err != nil {
		raw = "(unserializable item)"
	}
	reason := e.reason
	if e.n > 1 {
		reason = fmt.Sprintf("%s (and %d more items ignored)", e.reason, e.n-1)
	}
	*errs = append(*errs, rateLimitError(e.name, raw, reason))
}

// parseSFList parses the lines of a structured list field (RFC 9651 §4.2.1),
// combined as RFC 9651 §4.2 says, empty lines skipped. ok is false when the
// field is absent, or malformed: then one error names it. lines of no list
// member at all (only empty lines) yield no items, no error.
func parseSFList(name string, lines []string, errs *[]error) (items httpsfv.List, ok bool) {
	if len(lines) == 0 {
		return nil, false
	}
	value := sfJoinLines(lines)
	items, err := httpsfv.UnmarshalList([]string{value})
	if err != nil {
		// Servers send what RFC 9651 rejects as a whole: spaces around ";" and "=", integers of more
		// than 15 digits. Read it the way it was meant before giving up on the field.
		var retryErr error
		if items, retryErr = httpsfv.UnmarshalList([]string{sfLenient(value)}); retryErr != nil {
			*errs = append(*errs, rateLimitError(name, value, err.Error()))
			return nil, false
		}
	}
	return items, true
}

// sfMaxInteger is RFC 9651's largest integer (15 digits): longer ones are saturated to it.
const sfMaxInteger = "999999999999999"

// sfLenient rewrites a structured field value that strict parsing refused: it drops spaces and tabs
// around ";" and "=", and saturates an integer of more than 15 digits (a number not part of a token,
// outside strings) at sfMaxInteger. Strings are copied as they are.
func sfLenient(v string) string {
	var b strings.Builder
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			b.WriteByte(c)
			if c == '\\' && i+1 < len(v) {
				i++
				b.WriteByte(v[i])
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
			b.WriteByte(c)
		case c == ' ' || c == '\t':
			j := i
			for j < len(v) && (v[j] == ' ' || v[j] == '\t') {
				j++
			}
			prev := strings.TrimRight(b.String(), " \t")
			if j < len(v) && (v[j] == ';' || v[j] == '=') || strings.HasSuffix(prev, ";") || strings.HasSuffix(prev, "=") {
				i = j - 1 // drop the run
				continue
			}
			b.WriteString(v[i:j])
			i = j - 1
		case c >= '0' && c <= '9' && sfNumberStart(v, i):
			j := i
			for j < len(v) && v[j] >= '0' && v[j] <= '9' {
				j++
			}
			if j-i > len(sfMaxInteger) && (j == len(v) || v[j] != '.') {
				b.WriteString(sfMaxInteger)
			} else {
				b.WriteString(v[i:j])
			}
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// sfNumberStart reports whether the digit at v[i] begins a number: it follows the start, a separator
// or a minus sign, not a token's letters.
func sfNumberStart(v string, i int) bool {
	if i > 0 && v[i-1] == '-' {
		i--
	}
	return i == 0 || strings.IndexByte("=,;( \t", v[i-1]) >= 0
}

// sfJoinLines combines the lines of a structured list field, skipping empty
// ones.
func sfJoinLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if l = hdrTrimOWS(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// sfName is the name of a rate-limit item: the text of a string or token
// (so "default" and default are one policy), the serialization of any other
// bare item.
func sfName(it httpsfv.Item) string {
	switch v := it.Value.(type) {
	case string:
		return v
	case httpsfv.Token:
		return string(v)
	}
	s, _ := httpsfv.Marshal(httpsfv.NewItem(it.Value))
	return s
}

func sfHasParam(it httpsfv.Item, key string) bool {
	_, ok := it.Params.Get(key)
	return ok
}

// sfUintParam returns parameter key when it is a non-negative integer.
func sfUintParam(it httpsfv.Item, key string) (int64, bool) {
	v, ok := it.Params.Get(key)
	n, isInt := v.(int64)
	if !ok || !isInt || n < 0 {
		return 0, false
	}
	return n, true
}
