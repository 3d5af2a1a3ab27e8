package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
)

// hostColumns are the columns of hosts in the order hostArgs writes and decodeHostRow reads them.
const hostColumns = `host, version, adaptive_delay, known_limit, next_departure, hold_until, hold_trigger,
	crawl_delay, crawl_clamped, breaker, breaker_changed, failures, updated_at,
	park_until, rate_interval, rate_until, refused_interval, model_version, noise`

// numHostColumns is the number of hostColumns.
const numHostColumns = 19

// Column indexes in hostColumns.
const (
	colHost = iota
	colVersion
	colAdaptiveDelay
	colKnownLimit
	colNextDeparture
	colHoldUntil
	colHoldTrigger
	colCrawlDelay
	colCrawlClamped
	colBreaker
	colBreakerChanged
	colFailures
	colUpdatedAt
	colParkUntil
	colRateInterval
	colRateUntil
	colRefusedInterval
	colModelVersion
	colNoise
)

var hostColumnNames = [numHostColumns]string{
	"host", "version", "adaptive_delay", "known_limit", "next_departure", "hold_until", "hold_trigger",
	"crawl_delay", "crawl_clamped", "breaker", "breaker_changed", "failures", "updated_at",
	"park_until", "rate_interval", "rate_until", "refused_interval", "model_version", "noise",
}

const loadHostSQL = "SELECT " + hostColumns + " FROM hosts WHERE host = ?"

// saveHostSQL upserts one host with SaveHosts' merge rule: the later next_departure and hold_until win
// (with the stored hold's trigger when it wins), and the later rate_until (with its interval). A stored value that is not an integer (a file written
// by something else) counts as 0, so the write heals it.
const saveHostSQL = "INSERT INTO hosts (" + hostColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (host) DO UPDATE SET
		version         = excluded.version,
		adaptive_delay  = excluded.adaptive_delay,
		known_limit     = excluded.known_limit,
		next_departure  = max(excluded.next_departure, iif(typeof(next_departure) = 'integer', next_departure, 0)),
		hold_until      = max(excluded.hold_until, iif(typeof(hold_until) = 'integer', hold_until, 0)),
		hold_trigger    = iif(typeof(hold_until) = 'integer' AND typeof(hold_trigger) = 'text'
		                      AND hold_until > excluded.hold_until, hold_trigger, excluded.hold_trigger),
		crawl_delay     = excluded.crawl_delay,
		crawl_clamped   = excluded.crawl_clamped,
		breaker         = excluded.breaker,
		breaker_changed = excluded.breaker_changed,
		failures        = excluded.failures,
		updated_at      = excluded.updated_at,
		park_until      = excluded.park_until,
		rate_interval   = iif(typeof(rate_until) = 'integer' AND typeof(rate_interval) = 'integer'
		                      AND rate_until > excluded.rate_until, rate_interval, excluded.rate_interval),
		rate_until      = max(excluded.rate_until, iif(typeof(rate_until) = 'integer', rate_until, 0)),
		refused_interval = excluded.refused_interval,
		model_version   = excluded.model_version,
		noise           = excluded.noise`

// replaceHostSQL writes one host as given, without the merge: for a state with Replace set.
const replaceHostSQL = "INSERT OR REPLACE INTO hosts (" + hostColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// SaveHosts implements ext.Store: the batch is one transaction, so it is written entirely or not at
// all. NextDeparture and HoldUntil keep the later of the stored and the given value, unless the state
// has Replace set.
func (s *Store) SaveHosts(ctx context.Context, states []ext.StoredHost) error {
	if len(states) == 0 {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return wrap(ctx, "save hosts", err)
	}
	defer tx.Rollback()
	merge, replace := tx.StmtContext(ctx, s.saveHost), tx.StmtContext(ctx, s.replaceHost)
	var args [numHostColumns]any
	for _, st := range states {
		hostArgs(&args, st)
		stmt := merge
		if st.Replace {
			stmt = replace
		}
		if _, err := stmt.ExecContext(ctx, args[:]...); err != nil {
			return wrap(ctx, fmt.Sprintf("save host %q", st.Host), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return wrap(ctx, "save hosts", err)
	}
	return nil
}

// hostArgs sets args to the column values of st, in hostColumns' order.
func hostArgs(args *[numHostColumns]any, st ext.StoredHost) {
	*args = [numHostColumns]any{
		colHost:            st.Host,
		colVersion:         int64(st.Version),
		colAdaptiveDelay:   int64(st.AdaptiveDelay),
		colKnownLimit:      int64(st.KnownLimit),
		colNextDeparture:   encodeTime(st.NextDeparture),
		colHoldUntil:       encodeTime(st.HoldUntil),
		colHoldTrigger:     string(st.HoldTrigger),
		colCrawlDelay:      int64(st.CrawlDelay),
		colCrawlClamped:    encodeBool(st.CrawlClamped),
		colBreaker:         int64(st.Breaker),
		colBreakerChanged:  encodeTime(st.BreakerChanged),
		colFailures:        int64(st.Failures),
		colUpdatedAt:       encodeTime(st.UpdatedAt),
		colParkUntil:       encodeTime(st.ParkUntil),
		colRateInterval:    int64(st.RateInterval),
		colRateUntil:       encodeTime(st.RateUntil),
		colRefusedInterval: int64(st.RefusedInterval),
		colModelVersion:    st.ModelVersion,
		colNoise:           int64(st.Noise),
	}
}

// LoadHost implements ext.Store. A row that cannot be decoded returns an error wrapping
// ext.ErrCorruptState; a row of another ext.StateVersion returns only its Host and Version (see the
// package documentation).
func (s *Store) LoadHost(ctx context.Context, host string) (ext.StoredHost, bool, error) {
	var vals [numHostColumns]any
	var dest [numHostColumns]any
	for i := range vals {
		dest[i] = &vals[i]
	}
	err := s.loadHost.QueryRowContext(ctx, host).Scan(dest[:]...)
	if errors.Is(err, sql.ErrNoRows) {
		return ext.StoredHost{}, false, nil
	}
	if err != nil {
		return ext.StoredHost{}, false, wrap(ctx, fmt.Sprintf("load host %q", host), err)
	}
	st, err := decodeHostRow(vals[:])
	if err != nil {
		return ext.StoredHost{}, false, fmt.Errorf("sqlitestore: load host %q: %w", host, err)
	}
	return st, true, nil
}

// decodeHostRow decodes the values of a hosts row (driver values: nil, int64, float64, string,
// []byte, or anything else a hostile file makes the driver return) in hostColumns' order. It checks
// types, not sense, and never panics; its errors wrap ext.ErrCorruptState.
func decodeHostRow(vals []any) (ext.StoredHost, error) {
	if len(vals) != numHostColumns {
		return ext.StoredHost{}, corrupt("%d columns, want %d", len(vals), numHostColumns)
	}
	d := rowDecoder{vals: vals}
	var st ext.StoredHost
	st.Host = d.text(colHost)
	st.Version = d.int(colVersion)
	if d.err != nil {
		return ext.StoredHost{}, d.err
	}
	if st.Version != ext.StateVersion {
		// Another layout: its other columns may mean something else. The pacer discards the state.
		return ext.StoredHost{Host: st.Host, Version: st.Version}, nil
	}
	st.AdaptiveDelay = d.duration(colAdaptiveDelay)
	st.KnownLimit = d.duration(colKnownLimit)
	st.NextDeparture = d.time(colNextDeparture)
	st.HoldUntil = d.time(colHoldUntil)
	st.HoldTrigger = audit.Trigger(d.text(colHoldTrigger))
	st.CrawlDelay = d.duration(colCrawlDelay)
	st.CrawlClamped = d.bool(colCrawlClamped)
	st.Breaker = audit.BreakerState(d.int(colBreaker))
	st.BreakerChanged = d.time(colBreakerChanged)
	st.Failures = d.int(colFailures)
	st.UpdatedAt = d.time(colUpdatedAt)
	st.ParkUntil = d.time(colParkUntil)
	st.RateInterval = d.duration(colRateInterval)
	st.RateUntil = d.time(colRateUntil)
	st.RefusedInterval = d.duration(colRefusedInterval)
	st.ModelVersion = d.int64(colModelVersion)
	st.Noise = d.noise(colNoise)
	if d.err != nil {
		return ext.StoredHost{}, d.err
	}
	return st, nil
}

// rowDecoder decodes the columns of a hosts row, keeping the first error.
type rowDecoder struct {
	vals []any
	err  error
}

func (d *rowDecoder) fail(col int, format string, args ...any) {
	if d.err == nil {
		d.err = corrupt("column %s: %s", hostColumnNames[col], fmt.Sprintf(format, args...))
	}
}

func (d *rowDecoder) int64(col int) int64 {
	v, ok := d.vals[col].(int64)
	if !ok {
		d.fail(col, "%s, want an integer", describe(d.vals[col]))
	}
	return v
}

func (d *rowDecoder) int(col int) int {
	v := d.int64(col)
	if int64(int(v)) != v {
		d.fail(col, "%d does not fit an int", v)
		return 0
	}
	return int(v)
}

func (d *rowDecoder) duration(col int) time.Duration { return time.Duration(d.int64(col)) }

// noise decodes a verdict: an integer from 0 to 255 (one this version does not know is the pacer's
// to repair).
func (d *rowDecoder) noise(col int) audit.NoiseVerdict {
	v := d.int64(col)
	if v < 0 || v > math.MaxUint8 {
		d.fail(col, "%d, want a verdict from 0 to 255", v)
		return 0
	}
	return audit.NoiseVerdict(v)
}

func (d *rowDecoder) time(col int) time.Time { return decodeTime(d.int64(col)) }

func (d *rowDecoder) bool(col int) bool {
	v := d.int64(col)
	if v != 0 && v != 1 {
		d.fail(col, "%d, want 0 or 1", v)
	}
	return v == 1
}

func (d *rowDecoder) text(col int) string {
	v, ok := d.vals[col].(string)
	if !ok {
		d.fail(col, "%s, want text", describe(d.vals[col]))
	}
	return v
}

// describe names the SQL type of a driver value, for error messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return fmt.Sprintf("INTEGER %d", v)
	case float64:
		return fmt.Sprintf("REAL %v", v)
	case string:
		return "TEXT"
	case []byte:
		return "BLOB"
	}
	return fmt.Sprintf("%T", v)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ext.ErrCorruptState)
}

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// encodeTime returns t in Unix nanoseconds: 0 for the zero time, saturated outside the int64 range.
func encodeTime(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// decodeTime is encodeTime's inverse, in UTC.
func decodeTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func encodeBool(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
