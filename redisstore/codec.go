package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
)

// Fields of a host hash, in the order the save script receives them (ARGV[1..12]). Durations are
// decimal nanoseconds, times decimal unix nanoseconds ("" for the zero time), booleans "0" or "1".
const (
	fieldVersion        = "v"
	fieldAdaptiveDelay  = "adaptive_delay"
	fieldKnownLimit     = "known_limit"
	fieldNextDeparture  = "next_departure"
	fieldHoldUntil      = "hold_until"
	fieldHoldTrigger    = "hold_trigger"
	fieldCrawlDelay     = "crawl_delay"
	fieldCrawlClamped   = "crawl_clamped"
	fieldBreaker        = "breaker"
	fieldBreakerChanged = "breaker_changed"
	fieldFailures       = "failures"
	fieldUpdatedAt      = "updated_at"
)

// Fields of a host hash written after the others (ARGV[16..19] of saveScript), absent from records
// written before them: absent, they are zero.
const (
	fieldRateInterval = "rate_interval"
	fieldRateUntil    = "rate_until"
	fieldParkUntil    = "park_until"
	// The capacity model's other fields (ARGV[20..21]): its refused bound and its version.
	fieldRefusedInterval = "refused_interval"
	fieldModelVersion    = "model_ver"
	// The model's verdict on the host's refusals (ARGV[22]: audit.NoiseVerdict in decimal), which the
	// save script merges by keeping the greater.
	fieldNoise = "noise"
)

// Fields of a host hash that only the scripts write, on the server's clock: the fleet's last departure
// and its pending departure (admitScript, departedScript), the hold and the rate-limit interval's end
// (saveScript), and the host's fence, the greatest lease token presented to admitScript. They are not
// part of ext.StoredHost.
const (
	fieldLastDeparture = "last_departure"
	fieldHoldServer    = "hold_srv"
	fieldPending       = "pending"
	fieldPendingBy     = "pending_by"
	fieldRateServer    = "rate_srv"
	fieldFence         = "fence"
	// The fleet's departures, numbered (admitScript), and the latest reported refused (refusedScript).
	fieldSeq        = "seq"
	fieldRefusedSeq = "refused_seq"
	// The pool of the fleet's refusals (poolBackoffScript, refusedScript): the departure numbers of the
	// last two backoff marks, the count before the last and its refusals, and the refusals after it.
	fieldPoolMark          = "pool_mark"
	fieldPoolMarkBefore    = "pool_mark0"
	fieldPoolBefore        = "pool_bn"
	fieldPoolBeforeRefused = "pool_br"
	fieldPoolAfterRefused  = "pool_ar"
)

// hostFields lists every field of a host hash, in ARGV order.
var hostFields = [...]string{
	fieldVersion, fieldAdaptiveDelay, fieldKnownLimit, fieldNextDeparture, fieldHoldUntil, fieldHoldTrigger,
	fieldCrawlDelay, fieldCrawlClamped, fieldBreaker, fieldBreakerChanged, fieldFailures, fieldUpdatedAt,
}

// The instants a unix nanosecond count in an int64 can name; times outside are clamped to them.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encodeTime returns t as decimal unix nanoseconds, "" for the zero time. A time outside the range of
// an int64 count (before 1678 or after 2262) is clamped to the range, which keeps the merge rule's
// "later wins" order.
func encodeTime(t time.Time) string {
	switch {
	case t.IsZero():
		return ""
	case t.Before(minTime):
		return strconv.FormatInt(math.MinInt64, 10)
	case t.After(maxTime):
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// encodeBool is a boolean as the hash and the scripts keep it: "1" or "0".
func encodeBool(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// hostArgs returns st's fields as the save script's ARGV, in hostFields order, then "1" when
// st.Replace (write without the merge), else "0".
func hostArgs(st ext.StoredHost) []any {
	clamped, replace := encodeBool(st.CrawlClamped), encodeBool(st.Replace)
	return []any{
		strconv.Itoa(st.Version),
		strconv.FormatInt(int64(st.AdaptiveDelay), 10),
		strconv.FormatInt(int64(st.KnownLimit), 10),
		encodeTime(st.NextDeparture),
		encodeTime(st.HoldUntil),
		string(st.HoldTrigger),
		strconv.FormatInt(int64(st.CrawlDelay), 10),
		clamped,
		strconv.Itoa(int(st.Breaker)),
		encodeTime(st.BreakerChanged),
		strconv.Itoa(st.Failures),
		encodeTime(st.UpdatedAt),
		replace,
	}
}

// encodeHostHash returns st as the fields of its host hash: what SaveHosts writes when nothing is
// stored yet.
func encodeHostHash(st ext.StoredHost) map[string]string {
	args := hostArgs(st)
	m := make(map[string]string, len(hostFields))
	for i, f := range hostFields {
		m[f] = args[i].(string)
	}
	if !st.RateUntil.IsZero() {
		m[fieldRateInterval], m[fieldRateUntil] = strconv.FormatInt(int64(st.RateInterval), 10), encodeTime(st.RateUntil)
	}
	if !st.ParkUntil.IsZero() {
		m[fieldParkUntil] = encodeTime(st.ParkUntil)
	}
	m[fieldRefusedInterval] = strconv.FormatInt(int64(st.RefusedInterval), 10)
	m[fieldModelVersion] = strconv.FormatInt(st.ModelVersion, 10)
	m[fieldNoise] = strconv.Itoa(int(st.Noise))
	return m
}

// decodeHostHash decodes the fields of host's hash. ok is false when the hash holds no saved state:
// it is empty, or holds only what the admission scripts recorded before any SaveHosts (the last
// departure, a pending one, the departures' numbers, a lease's fence). A
// state of another version than ext.StateVersion is returned with only Host and Version set. A
// missing field, a number that does not parse or does not fit, or a boolean other than "0" or "1"
// returns an error wrapping ext.ErrCorruptState. Values that parse but are out of range (negative
// delays, an unknown breaker state) are returned as they are: the pacer repairs them. Unknown fields
// are ignored.
func decodeHostHash(host string, m map[string]string) (st ext.StoredHost, ok bool, err error) {
	_, saved := m[fieldVersion]
	if !saved {
		ld, admitted := m[fieldLastDeparture]
		scriptOnly := 0 // fields only the admission scripts write
		for _, f := range [...]string{fieldLastDeparture, fieldPending, fieldPendingBy, fieldSeq, fieldRefusedSeq, fieldFence,
			fieldPoolMark, fieldPoolMarkBefore, fieldPoolBefore, fieldPoolBeforeRefused, fieldPoolAfterRefused} {
			if _, ok := m[f]; ok {
				scriptOnly++
			}
		}
		// A lease's fence may come with or before the first admission; the pool's mark of the fleet's
		// first backoff comes before the model it backed off is written.
		if scriptOnly == len(m) {
			if _, err := decodeTime(ld); admitted && err != nil {
				return ext.StoredHost{}, false, corrupt(host, "field %s %q: %v", fieldLastDeparture, ld, err)
			}
			return ext.StoredHost{}, false, nil
		}
	}
	d := decoder{host: host, m: m}
	if v := d.int(fieldVersion); saved && d.err == nil && v != ext.StateVersion {
		// Another layout: nothing but its version can be trusted.
		return ext.StoredHost{Host: host, Version: v}, true, nil
	}
	d.err = nil // a missing version is reported below
	for _, f := range hostFields {
		if _, present := m[f]; !present {
			return ext.StoredHost{}, false, corrupt(host, "field %s missing", f)
		}
	}
	st = ext.StoredHost{
		Host:           host,
		Version:        d.int(fieldVersion),
		AdaptiveDelay:  d.duration(fieldAdaptiveDelay),
		KnownLimit:     d.duration(fieldKnownLimit),
		NextDeparture:  d.time(fieldNextDeparture),
		HoldUntil:      d.time(fieldHoldUntil),
		HoldTrigger:    audit.Trigger(m[fieldHoldTrigger]),
		CrawlDelay:     d.duration(fieldCrawlDelay),
		CrawlClamped:   d.bool(fieldCrawlClamped),
		Breaker:        audit.BreakerState(d.int(fieldBreaker)),
		BreakerChanged: d.time(fieldBreakerChanged),
		Failures:       d.int(fieldFailures),
		UpdatedAt:      d.time(fieldUpdatedAt),
	}
	if _, present := m[fieldRateInterval]; present {
		st.RateInterval = d.duration(fieldRateInterval)
	}
	if _, present := m[fieldRefusedInterval]; present {
		st.RefusedInterval = d.duration(fieldRefusedInterval)
	}
	if _, present := m[fieldModelVersion]; present {
		st.ModelVersion = d.int64(fieldModelVersion)
	}
	if _, present := m[fieldNoise]; present {
		st.Noise = d.noise(fieldNoise)
	}
	for f, dst := range map[string]*time.Time{fieldRateUntil: &st.RateUntil, fieldParkUntil: &st.ParkUntil} {
		if _, present := m[f]; present {
			*dst = d.time(f)
		}
	}
	for _, f := range [...]string{fieldLastDeparture, fieldHoldServer, fieldPending, fieldRateServer} { // read by the admission script
		if _, present := m[f]; present {
			d.time(f)
		}
	}
	if d.err != nil {
		return ext.StoredHost{}, false, d.err
	}
	return st, true, nil
}

// decoder decodes the fields of one host hash, keeping the first error.
type decoder struct {
	host string
	m    map[string]string
	err  error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = corrupt(d.host, "field %s %q: %v", field, d.m[field], err)
	}
}

func (d *decoder) int64(field string) int64 {
	n, err := parseInt(d.m[field], 64)
	if err != nil {
		d.fail(field, err)
	}
	return n
}

func (d *decoder) int(field string) int {
	n, err := parseInt(d.m[field], strconv.IntSize)
	if err != nil {
		d.fail(field, err)
	}
	return int(n)
}

func (d *decoder) duration(field string) time.Duration { return time.Duration(d.int64(field)) }

// noise decodes a verdict: a number from 0 to 255 (one this version does not know is the pacer's to
// repair).
func (d *decoder) noise(field string) audit.NoiseVerdict {
	n, err := parseInt(d.m[field], 16)
	if err == nil && (n < 0 || n > math.MaxUint8) {
		err = strconv.ErrRange
	}
	if err != nil {
		d.fail(field, err)
	}
	return audit.NoiseVerdict(n)
}

func (d *decoder) time(field string) time.Time {
	t, err := decodeTime(d.m[field])
	if err != nil {
		d.fail(field, err)
	}
	return t
}

func (d *decoder) bool(field string) bool {
	switch d.m[field] {
	case "0":
		return false
	case "1":
		return true
	}
	d.fail(field, errNotBool)
	return false
}

var errNotBool = errors.New("not 0 or 1")

// decodeTime decodes encodeTime's form, as UTC.
func decodeTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	n, err := parseInt(s, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, n).UTC(), nil
}

var errNotInt = errors.New("not a decimal integer")

// parseInt parses a decimal integer that fits bits, as the scripts do: an optional "-", then digits.
func parseInt(s string, bits int) (int64, error) {
	if strings.HasPrefix(s, "+") {
		return 0, errNotInt
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return 0, strconv.ErrRange
	}
	if err != nil {
		return 0, errNotInt
	}
	return n, nil
}

// corrupt returns an error wrapping ext.ErrCorruptState about host's record.
func corrupt(host, format string, args ...any) error {
	return fmt.Errorf("redisstore: host %q: %s: %w", host, fmt.Sprintf(format, args...), ext.ErrCorruptState)
}

// deferredVersion is the version of deferredJSON's layout (deferredVersionLua in the scripts).
const deferredVersion = 1

// deferredJSON is how a request is stored: a member of the deferred sorted set, scored by its ID (the
// ID itself is the score, not part of the JSON), or an entry of a host's spill list (no ID: Seq 0).
type deferredJSON struct {
	V          int               `json:"v"`
	Host       string            `json:"host"`
	Method     string            `json:"method"`
	URL        string            `json:"url"`
	Depth      int               `json:"depth"`
	Header     http.Header       `json:"header,omitempty"`
	Body       []byte            `json:"body,omitempty"`
	BodyLost   bool              `json:"body_lost,omitempty"`
	Ctx        map[string]string `json:"ctx,omitempty"`
	DeferredAt time.Time         `json:"deferred_at"`
	Reason     string            `json:"reason,omitempty"`
	// Seq makes two otherwise identical requests distinct members of the set.
	Seq int64 `json:"seq"`
}

func encodeDeferred(r ext.DeferredRequest, id int64) ([]byte, error) {
	return json.Marshal(deferredJSON{
		V: deferredVersion, Host: r.Host, Method: r.Method, URL: r.URL, Depth: r.Depth, Header: r.Header,
		Body: r.Body, BodyLost: r.BodyLost, Ctx: r.Ctx, DeferredAt: r.DeferredAt, Reason: r.Reason, Seq: id,
	})
}

// decodeDeferred decodes a member of the deferred set whose score is id, or an entry of a spill list
// (id 0).
func decodeDeferred(member string, id int64) (ext.DeferredRequest, error) {
	var j deferredJSON
	if err := json.Unmarshal([]byte(member), &j); err != nil {
		return ext.DeferredRequest{}, fmt.Errorf("deferred request %d: %v", id, err)
	}
	if j.V != deferredVersion {
		return ext.DeferredRequest{}, fmt.Errorf("deferred request %d: layout version %d, want %d", id, j.V, deferredVersion)
	}
	return ext.DeferredRequest{
		ID: id, Host: j.Host, Method: j.Method, URL: j.URL, Depth: j.Depth, Header: j.Header, Body: j.Body,
		BodyLost: j.BodyLost, Ctx: j.Ctx, DeferredAt: j.DeferredAt, Reason: j.Reason,
	}, nil
}
