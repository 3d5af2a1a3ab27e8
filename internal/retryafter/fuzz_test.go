package retryafter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/duration"
	"github.com/collypace/ext/internal/httpfield"
)

// FuzzParse checks the invariants of Parse on any value
// and Date; a newline in value separates several Retry-After fields.
func FuzzParse(f *testing.F) {
	for _, s := range [][2]string{
		{"120", ""},
		{"0", ""},
		{" \t120\t ", ""},
		{"Tue, 04 Mar 2025 10:02:00 GMT", ""},
		{"Tuesday, 04-Mar-25 10:02:00 GMT", ""},
		{"Tue Mar  4 10:02:00 2025", ""},
		{"Tue, 04 Mar 2025 11:02:00 GMT", "Tue, 04 Mar 2025 11:00:00 GMT"},
		{"Tue, 04 Mar 2025 10:02:00 GMT", "garbage"},
		{"99999999999999999999", ""},
		{"9223372037", ""},
		{"-5", ""},
		{"1.5", ""},
		{"1e9", ""},
		{"١٢٠", ""},
		{"", ""},
		{"60\n120", ""},
		{"soon, 60", ""},
		{"120, Tue, 04 Mar 2025 10:05:00 GMT, Wed, 05 Mar 2025 10:05:00 GMT", ""},
		{"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT"},
		{"Mon, 01 Jan 0001 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"},
	} {
		f.Add(s[0], s[1])
	}
	const limit = 6 * time.Hour
	f.Fuzz(func(t *testing.T, value, date string) {
		values := strings.Split(value, "\n")
		wait, present, err := Parse(values, date, raT0, limit)
		if !present {
			t.Fatal("present = false with a field")
		}
		if wait < 0 {
			t.Fatalf("wait = %v < 0", wait)
		}
		switch {
		case err == nil:
			if wait > limit {
				t.Fatalf("wait = %v above the maximum without an error", wait)
			}
		case errors.Is(err, ErrTooLong):
			if wait <= limit {
				t.Fatalf("wait = %v within the maximum, err = %v", wait, err)
			}
		case errors.Is(err, ErrInvalid):
			if wait != 0 {
				t.Fatalf("wait = %v with %v", wait, err)
			}
		default:
			t.Fatalf("err = %v, not a sentinel", err)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "ext: ") || len(err.Error()) > 400) {
			t.Fatalf("err = %q: want an ext: prefix and a bounded length", err)
		}

		// Raising the maximum never shortens an accepted wait nor adds an error.
		if err == nil {
			if w2, _, err2 := Parse(values, date, raT0, duration.Max); w2 < wait || err2 != nil {
				t.Fatalf("with no maximum: %v, %v; want at least %v, nil", w2, err2, wait)
			}
		}
		// Anchored on a valid Date, the result does not depend on the local clock.
		if _, ok := httpfield.ParseDate(httpfield.TrimOWS(date)); ok {
			w2, _, err2 := Parse(values, date, raT0.Add(-37*time.Hour), limit)
			if w2 != wait || (err2 == nil) != (err == nil) {
				t.Fatalf("another now: %v, %v; want %v, %v", w2, err2, wait, err)
			}
		}
	})
}
