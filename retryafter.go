package ext

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors of the response-header parsers. The errors returned wrap
// them with the offending value; match them with errors.Is.
var (
	// ErrInvalidRetryAfter reports a Retry-After value that is neither
	// delay-seconds nor an HTTP-date.
	ErrInvalidRetryAfter = errors.New("ext: invalid Retry-After")
	// ErrRetryAfterTooLong reports a Retry-After wait above the accepted maximum.
	ErrRetryAfterTooLong = errors.New("ext: Retry-After above the maximum")
	// ErrInvalidRateLimit reports a malformed rate-limit field that was ignored.
	ErrInvalidRateLimit = errors.New("ext: invalid rate-limit header")
)

// hdrQuoteLimit bounds how many bytes of a header value an error quotes, so a
// hostile server cannot flood the audit log.
const hdrQuoteLimit = 64

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
// When none is, a wait above maxWait is returned with ErrRetryAfterTooLong
// (the largest such, saturated at the largest Duration on overflow), and
// failing that 0 with ErrInvalidRetryAfter quoting the first field value.
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
			case errors.Is(err, ErrRetryAfterTooLong):
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
				badErr = fmt.Errorf("%w: empty value", ErrInvalidRetryAfter)
			} else {
				badErr = fmt.Errorf("%w: %s", ErrInvalidRetryAfter, hdrQuote(v))
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
// from base. An invalid element yields the bare ErrInvalidRetryAfter: the
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
				return maxDuration, fmt.Errorf("%w: %s seconds overflow a duration", ErrRetryAfterTooLong, hdrQuote(s))
			}
		}
		d = time.Duration(n) * time.Second
	} else if t, ok := parseHTTPDate(s); ok {
		d = max(t.Sub(base), 0) // Sub saturates instead of wrapping.
	} else {
		return 0, ErrInvalidRetryAfter
	}
	if d > maxWait {
		return d, fmt.Errorf("%w: %s is %v, maximum %v", ErrRetryAfterTooLong, hdrQuote(s), d, maxWait)
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

// rateLimitSignal is what a response's rate-limit fields imply for the next
// departures to the host.
type rateLimitSignal struct {
	// Interval spreads the remaining quota over the time to reset:
	// reset / remaining, rounded up. When Exhausted, it is the next window's:
	// window / quota when the server published both (RateLimit-Policy), else
	// 0; the exhausted window is the hold to Reset, not an interval, so the
	// first departure after the reset does not cost a second window.
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
	sig.Interval = spread(reset, remaining)
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
// rate-limit field. errs has one error, wrapping ErrInvalidRateLimit and
// naming the field and its value, per malformed field that was ignored. An
// epoch reset is measured from the response's Date (see serverClock).
//
// When several families are present and valid, the most restrictive signal
// wins (see moreRestrictive); a tie goes to the structured fields, then the
// draft ones. A family missing its remaining or reset part is ignored
// silently: it is incomplete, not malformed.
func parseRateLimit(h http.Header, now time.Time, maxReset time.Duration) (sig rateLimitSignal, found bool, errs []error) {
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
	return fmt.Errorf("%w: %s %s: %s", ErrInvalidRateLimit, name, hdrQuote(value), reason)
}

// Header keys of the structured rate-limit fields (canonical) and their names.
const (
	rateLimitSFKey        = "Ratelimit"
	rateLimitSFName       = "RateLimit"
	rateLimitPolicyKey    = "Ratelimit-Policy"
	rateLimitPolicyName   = "RateLimit-Policy"
	rateLimitSFMaxInteger = 999_999_999_999_999 // RFC 8941 integers have at most 15 digits
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
// A syntax error discards the whole field; a bad parameter value (not a
// non-negative integer, r above q, reset above maxReset) discards its item.
// RateLimit-Policy is read only alongside RateLimit, whose remaining count it
// needs. Each field yields at most one error, however many items it loses.
func parseRateLimitSF(h http.Header, now time.Time, maxReset time.Duration, errs *[]error) (rateLimitSignal, bool) {
	lines := h.Values(rateLimitSFKey)
	if len(lines) == 0 {
		return rateLimitSignal{}, false
	}
	value := sfJoinLines(lines)
	items, reason := parseSFList(value)
	if reason != "" {
		*errs = append(*errs, rateLimitError(rateLimitSFName, value, reason))
		return rateLimitSignal{}, false
	}
	policies := parseRateLimitPolicies(h.Values(rateLimitPolicyKey), errs)

	var (
		best  rateLimitSignal
		found bool
		bad   = rateLimitItemErrors{name: rateLimitSFName}
	)
	for _, it := range items {
		r, ok := it.uintParam("r")
		if !ok {
			bad.add(it.raw, "r is not a non-negative integer")
			continue
		}
		t, tOK := it.uintParam("t")
		if !tOK && it.hasParam("t") {
			bad.add(it.raw, "t is not a non-negative integer")
			continue
		}
		pol, ok := policies[it.val]
		if ok && pol.q >= 0 && r > pol.q {
			bad.add(it.raw, fmt.Sprintf("r above the policy quota q=%d", pol.q))
			continue
		}
		if !tOK {
			if !ok || pol.w < 0 {
				continue
			}
			t = pol.w
		}
		if t > int64(maxReset/time.Second) {
			bad.add(it.raw, fmt.Sprintf("reset %ds above the maximum %v", t, maxReset))
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
	if len(lines) == 0 {
		return nil
	}
	value := sfJoinLines(lines)
	items, reason := parseSFList(value)
	if reason != "" {
		*errs = append(*errs, rateLimitError(rateLimitPolicyName, value, reason))
		return nil
	}
	policies := make(map[string]rateLimitPolicy, len(items))
	bad := rateLimitItemErrors{name: rateLimitPolicyName}
	for _, it := range items {
		p := rateLimitPolicy{q: -1, w: -1}
		if q, ok := it.uintParam("q"); ok && q >= 1 {
			p.q = q
		} else if it.hasParam("q") {
			bad.add(it.raw, "q is not a positive integer")
			continue
		}
		if w, ok := it.uintParam("w"); ok {
			p.w = w
		} else if it.hasParam("w") {
			bad.add(it.raw, "w is not a non-negative integer")
			continue
		}
		if _, dup := policies[it.val]; !dup {
			policies[it.val] = p
		}
	}
	bad.flush(errs)
	return policies
}

// rateLimitItemErrors folds the ignored items of one structured field into a
// single error, so a hostile list cannot flood the audit log.
type rateLimitItemErrors struct {
	name, raw, reason string // field name; first ignored item and why
	n                 int    // items ignored
}

func (e *rateLimitItemErrors) add(raw, reason string) {
	if e.n == 0 {
		e.raw, e.reason = raw, reason
	}
	e.n++
}

// flush appends the error, if any item was ignored.
func (e *rateLimitItemErrors) flush(errs *[]error) {
	switch {
	case e.n == 1:
		*errs = append(*errs, rateLimitError(e.name, e.raw, e.reason))
	case e.n > 1:
		*errs = append(*errs, rateLimitError(e.name, e.raw, fmt.Sprintf("%s (and %d more items ignored)", e.reason, e.n-1)))
	}
}

// sfJoinLines combines the lines of a structured list field (RFC 8941 §3.1),
// skipping empty ones.
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

// sfKind is the type of a structured-field bare item (RFC 8941 §3.3).
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBoolean
)

// sfItem is one list member: its bare item (a string is unescaped, any other
// kind kept as written), its parameters and its source text for messages.
type sfItem struct {
	kind   sfKind
	val    string
	params []sfParam
	raw    string
}

// sfParam is one parameter; a parameter without a value is the boolean true.
type sfParam struct {
	key  string
	kind sfKind
	val  string
}

// param returns the last parameter named key: RFC 8941 lets later ones
// override earlier ones.
func (it sfItem) param(key string) (sfParam, bool) {
	for i := len(it.params) - 1; i >= 0; i-- {
		if it.params[i].key == key {
			return it.params[i], true
		}
	}
	return sfParam{}, false
}

func (it sfItem) hasParam(key string) bool {
	_, ok := it.param(key)
	return ok
}

// uintParam returns parameter key when it is a non-negative sf-integer.
func (it sfItem) uintParam(key string) (int64, bool) {
	p, ok := it.param(key)
	if !ok || p.kind != sfInteger {
		return 0, false
	}
	n, ok := hdrParseUint(p.val)
	if !ok || n > rateLimitSFMaxInteger {
		return 0, false
	}
	return n, true
}

// parseSFList parses a structured-field list (RFC 8941 §4.2.1), or returns
// why it cannot. Tolerant beyond the RFC: tabs count as spaces, spaces may
// surround ";" and "=", and parameter keys are case-insensitive. Inner lists
// are not supported.
func parseSFList(s string) ([]sfItem, string) {
	p := sfParser{s: s}
	p.skipOWS()
	var items []sfItem
	for !p.done() {
		start := p.i
		kind, val, reason := p.bareItem()
		if reason != "" {
			return nil, reason
		}
		params, reason := p.params()
		if reason != "" {
			return nil, reason
		}
		items = append(items, sfItem{kind: kind, val: val, params: params, raw: hdrTrimOWS(s[start:p.i])})
		p.skipOWS()
		if p.done() {
			break
		}
		if p.s[p.i] != ',' {
			return nil, fmt.Sprintf("unexpected %q at byte %d", p.s[p.i], p.i)
		}
		p.i++
		p.skipOWS()
		if p.done() {
			return nil, "trailing comma"
		}
	}
	return items, ""
}

// sfParser is a cursor over a structured field value.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// params parses the ";key[=value]" parameters after a bare item.
func (p *sfParser) params() ([]sfParam, string) {
	var params []sfParam
	for {
		back := p.i
		p.skipOWS()
		if p.done() || p.s[p.i] != ';' {
			p.i = back
			return params, ""
		}
		p.i++
		p.skipOWS()
		start := p.i
		for !p.done() && sfIsKeyChar(p.s[p.i], p.i == start) {
			p.i++
		}
		if p.i == start {
			return nil, fmt.Sprintf("bad parameter key at byte %d", start)
		}
		prm := sfParam{key: strings.ToLower(p.s[start:p.i]), kind: sfBoolean, val: "?1"}
		back = p.i
		p.skipOWS()
		if !p.done() && p.s[p.i] == '=' {
			p.i++
			p.skipOWS()
			var reason string
			if prm.kind, prm.val, reason = p.bareItem(); reason != "" {
				return nil, reason
			}
		} else {
			p.i = back
		}
		params = append(params, prm)
	}
}

// bareItem parses an integer, decimal, string, token, byte sequence or
// boolean. Numbers are kept as written; their range is checked by the user.
func (p *sfParser) bareItem() (sfKind, string, string) {
	if p.done() {
		return 0, "", "missing item"
	}
	start := p.i
	switch c := p.s[p.i]; {
	case c == '-' || sfIsDigit(c):
		p.i++
		for !p.done() && sfIsDigit(p.s[p.i]) {
			p.i++
		}
		kind := sfInteger
		if !p.done() && p.s[p.i] == '.' {
			kind = sfDecimal
			p.i++
			fracStart := p.i
			for !p.done() && sfIsDigit(p.s[p.i]) {
				p.i++
			}
			if p.i == fracStart {
				return 0, "", fmt.Sprintf("bad decimal at byte %d", start)
			}
		}
		if p.s[start:p.i] == "-" || (p.s[start] == '-' && p.s[start+1] == '.') {
			return 0, "", fmt.Sprintf("bad number at byte %d", start)
		}
		return kind, p.s[start:p.i], ""
	case c == '"':
		var b strings.Builder
		for p.i++; !p.done(); p.i++ {
			switch c := p.s[p.i]; {
			case c == '"':
				p.i++
				return sfString, b.String(), ""
			case c == '\\':
				p.i++
				if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
					return 0, "", fmt.Sprintf("bad escape in string at byte %d", p.i-1)
				}
				b.WriteByte(p.s[p.i])
			case c < 0x20 || c > 0x7e:
				return 0, "", fmt.Sprintf("bad character in string at byte %d", p.i)
			default:
				b.WriteByte(c)
			}
		}
		return 0, "", "unterminated string"
	case c == '*' || sfIsAlpha(c):
		for p.i++; !p.done() && sfIsTokenChar(p.s[p.i]); p.i++ {
		}
		return sfToken, p.s[start:p.i], ""
	case c == ':':
		for p.i++; !p.done() && p.s[p.i] != ':'; p.i++ {
			if c := p.s[p.i]; !sfIsAlpha(c) && !sfIsDigit(c) && c != '+' && c != '/' && c != '=' {
				return 0, "", fmt.Sprintf("bad byte sequence at byte %d", start)
			}
		}
		if p.done() {
			return 0, "", "unterminated byte sequence"
		}
		p.i++
		return sfBytes, p.s[start:p.i], ""
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return sfBoolean, p.s[start:p.i], ""
		}
		return 0, "", fmt.Sprintf("bad boolean at byte %d", start)
	default:
		return 0, "", fmt.Sprintf("unexpected %q at byte %d", c, start)
	}
}

func sfIsDigit(c byte) bool { return '0' <= c && c <= '9' }

func sfIsAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// sfIsKeyChar reports whether c may appear in a parameter key (RFC 8941
// §3.1.2, any letter case accepted); first is the key's first character.
func sfIsKeyChar(c byte, first bool) bool {
	if sfIsAlpha(c) || c == '*' {
		return true
	}
	return !first && (sfIsDigit(c) || c == '_' || c == '-' || c == '.')
}

// sfIsTokenChar reports whether c may continue a token: tchar, ":" or "/".
func sfIsTokenChar(c byte) bool {
	return sfIsAlpha(c) || sfIsDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

// hdrTrimOWS trims optional whitespace (spaces and tabs, RFC 9110 §5.6.3).
func hdrTrimOWS(s string) string { return strings.Trim(s, " \t") }

// hdrIsDigits reports whether s is one or more ASCII digits.
func hdrIsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !sfIsDigit(s[i]) {
			return false
		}
	}
	return true
}

// hdrParseUint parses ASCII digits into a non-negative int64, refusing
// signs, spaces and overflow.
func hdrParseUint(s string) (int64, bool) {
	if !hdrIsDigits(s) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// hdrParseDecimal parses "digits[.digits]" into its whole part and its
// fraction in thousandths, rounded up (so 0..1000).
func hdrParseDecimal(s string) (whole, milli int64, ok bool) {
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if whole, ok = hdrParseUint(intPart); !ok {
		return 0, 0, false
	}
	if !hasFrac {
		return whole, 0, true
	}
	if !hdrIsDigits(frac) {
		return 0, 0, false
	}
	for i := 0; i < 3; i++ {
		milli *= 10
		if i < len(frac) {
			milli += int64(frac[i] - '0')
		}
	}
	if len(frac) > 3 && strings.Trim(frac[3:], "0") != "" {
		milli++
	}
	return whole, milli, true
}

// hdrQuote quotes a header value for an error message, truncated to
// hdrQuoteLimit bytes (on a rune boundary when it can) with "..." appended.
func hdrQuote(s string) string {
	if len(s) <= hdrQuoteLimit {
		return strconv.Quote(s)
	}
	cut := hdrQuoteLimit
	for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
