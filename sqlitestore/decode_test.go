package sqlitestore

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
)

func TestMigrationsMatchSchemaVersion(t *testing.T) {
	if len(migrations) != SchemaVersion {
		t.Errorf("%d migrations, SchemaVersion %d: add the migration with the version", len(migrations), SchemaVersion)
	}
}

func TestTimeEncoding(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 123, time.FixedZone("x", 3600))
	for _, c := range []struct {
		in   time.Time
		ns   int64
		back time.Time
	}{
		{time.Time{}, 0, time.Time{}},
		{t0, t0.UnixNano(), t0},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), math.MinInt64, time.Unix(0, math.MinInt64)},
		{time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64, time.Unix(0, math.MaxInt64)},
		{time.Unix(0, 0), 0, time.Time{}}, // the epoch itself reads back as the zero time
	} {
		ns := encodeTime(c.in)
		if ns != c.ns {
			t.Errorf("encodeTime(%v) = %d, want %d", c.in, ns, c.ns)
		}
		if back := decodeTime(ns); !back.Equal(c.back) || (!back.IsZero() && back.Location() != time.UTC) {
			t.Errorf("decodeTime(%d) = %v, want %v in UTC", ns, back, c.back)
		}
	}
}

// fuzzRow builds the driver values of a hosts row: kinds[i] chooses column i's SQL type ('n' NULL,
// 'i' INTEGER, 'f' REAL, 's' TEXT, 'b' BLOB; missing or other: the column's own type), ints[i] its
// INTEGER value, f every REAL, host the host column's TEXT and text every other TEXT, blob every BLOB.
func fuzzRow(kinds, host, text string, ints [numHostColumns]int64, f float64, blob []byte) []any {
	vals := make([]any, numHostColumns)
	for i := range vals {
		kind := byte(0)
		if i < len(kinds) {
			kind = kinds[i]
		}
		switch kind {
		case 'n', 'i', 'f', 's', 'b':
		default:
			kind = 'i'
			if i == colHost || i == colHoldTrigger {
				kind = 's'
			}
		}
		switch kind {
		case 'n':
			vals[i] = nil
		case 'i':
			vals[i] = ints[i]
		case 'f':
			vals[i] = f
		case 's':
			vals[i] = text
			if i == colHost {
				vals[i] = host
			}
		case 'b':
			vals[i] = blob
		}
	}
	return vals
}

// FuzzDecodeHostRow feeds decodeHostRow rows of arbitrary SQL values. It must never panic; a row it
// accepts must be well typed, and one of the current version must encode back to the same values.
func FuzzDecodeHostRow(f *testing.F) {
	f.Add("", "a.test", "retry_after", int64(0), int64(1), int64(2500e6), int64(1200e6), int64(1.8e18), int64(1.8e18),
		int64(0), int64(2e9), int64(1), int64(1), int64(1.8e18), int64(7), int64(1.8e18), 0.0, []byte(nil))
	f.Fuzz(func(t *testing.T, kinds, host, text string, i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12 int64, fl float64, blob []byte) {
		ints := [numHostColumns]int64{i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12}
		vals := fuzzRow(kinds, host, text, ints, fl, blob)
		st, err := decodeHostRow(vals)
		if err != nil {
			if !errors.Is(err, ext.ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			if st != (ext.StoredHost{}) {
				t.Fatalf("an error with a state: %+v", st)
			}
			return
		}
		if _, ok := vals[colHost].(string); !ok || st.Host != vals[colHost] {
			t.Fatalf("host %q accepted from %#v", st.Host, vals[colHost])
		}
		if v, ok := vals[colVersion].(int64); !ok || int64(st.Version) != v {
			t.Fatalf("version %d accepted from %#v", st.Version, vals[colVersion])
		}
		if st.Version != ext.StateVersion {
			if st != (ext.StoredHost{Host: st.Host, Version: st.Version}) {
				t.Fatalf("a version-%d row decoded beyond host and version: %+v", st.Version, st)
			}
			return
		}
		var back [numHostColumns]any
		hostArgs(&back, st)
		for i := range back {
			if back[i] != vals[i] {
				t.Fatalf("column %s: decoded from %#v, encodes back as %#v", hostColumnNames[i], vals[i], back[i])
			}
		}
	})
}

func TestDecodeHostRowLength(t *testing.T) {
	for _, n := range []int{0, 1, numHostColumns - 1, numHostColumns + 1} {
		if _, err := decodeHostRow(make([]any, n)); !errors.Is(err, ext.ErrCorruptState) {
			t.Errorf("%d columns: %v, want ErrCorruptState", n, err)
		}
	}
	if _, ok := decodeDeferredRow(make([]any, 3)); ok {
		t.Error("a short deferred row decoded")
	}
}

func TestDecodeOddValues(t *testing.T) {
	// The driver may return a time.Time for a column declared DATE in a file written by something else.
	vals := fuzzRow("", "a.test", string(audit.TriggerRetryAfter), [numHostColumns]int64{colVersion: ext.StateVersion}, 0, nil)
	vals[colUpdatedAt] = time.Now()
	if _, err := decodeHostRow(vals); !errors.Is(err, ext.ErrCorruptState) {
		t.Errorf("a time.Time value: %v, want ErrCorruptState", err)
	}
	for _, m := range []string{"", "G ET", "GET\n", "GÉT", "GET/1"} {
		if validMethod(m) {
			t.Errorf("method %q accepted", m)
		}
	}
	for _, u := range []string{"", "/x", "http://", "a.test/x", "http://a b/", "%zz"} {
		if validURL(u) {
			t.Errorf("URL %q accepted", u)
		}
	}
}
