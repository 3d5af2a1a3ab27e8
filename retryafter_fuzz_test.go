package ext

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParseRetryAfter checks the invariants of parseRetryAfter on any value
// and Date; a newline in value separates several Retry-After fields.
func FuzzParseRetryAfter(f *testing.F) {
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
		wait, present, err := parseRetryAfter(values, date, raT0, limit)
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
		case errors.Is(err, errRetryAfterTooLong):
			if wait <= limit {
				t.Fatalf("wait = %v within the maximum, err = %v", wait, err)
			}
		case errors.Is(err, errInvalidRetryAfter):
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
			if w2, _, err2 := parseRetryAfter(values, date, raT0, maxDuration); w2 < wait || err2 != nil {
				t.Fatalf("with no maximum: %v, %v; want at least %v, nil", w2, err2, wait)
			}
		}
		// Anchored on a valid Date, the result does not depend on the local clock.
		if _, ok := parseHTTPDate(hdrTrimOWS(date)); ok {
			w2, _, err2 := parseRetryAfter(values, date, raT0.Add(-37*time.Hour), limit)
			if w2 != wait || (err2 == nil) != (err == nil) {
				t.Fatalf("another now: %v, %v; want %v, %v", w2, err2, wait, err)
			}
		}
	})
}

// FuzzParseRateLimit checks the invariants of parseRateLimit on any field
// values; an empty input means the field is absent and a newline separates
// several fields of a name.
func FuzzParseRateLimit(f *testing.F) {
	epoch := "1741082700" // raT0 + 5 min
	for _, s := range [][8]string{
		{"100", "50", "60", "", "", "", "", ""},
		{"5000", "0", epoch, "", "", "", "", ""},
		{"", "50", epoch + "000", "", "", "", "", ""},
		{"", "3", "1.5", "", "", "", "", ""},
		{"10", "11", "60", "", "", "", "", ""},
		{"", "5\n6", "10", "", "", "", "", ""},
		{"", "", "", "10, 10;w=1", "5", "10", "", ""},
		{"", "", "", "", "", "", `"default";r=5;t=10`, ""},
		{"", "", "", "", "", "", `"default";r=5`, `"default";q=100;w=60`},
		{"", "", "", "", "", "", `"burst";r=0;t=1, "daily";r=100;t=3600`, ""},
		{"", "", "", "", "", "", `"a" ; t = 10 ;r=5;pk=:cHJvamVjdA==:`, ""},
		{"", "", "", "", "", "", `"a";r=1.5;t=-1, b;r="5"`, `"a";q=0`},
		{"", "0", "0", "", "0", "0", `x;r=0;t=0`, ""},
		{"", "99999999999999999999", "99999999999999999999.9999", "", "", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	}
	const limit = 24 * time.Hour
	f.Fuzz(func(t *testing.T, xLim, xRem, xRst, dLim, dRem, dRst, sf, pol string) {
		h := http.Header{}
		for _, kv := range [][2]string{
			{"X-RateLimit-Limit", xLim}, {"X-RateLimit-Remaining", xRem}, {"X-RateLimit-Reset", xRst},
			{"RateLimit-Limit", dLim}, {"RateLimit-Remaining", dRem}, {"RateLimit-Reset", dRst},
			{"RateLimit", sf}, {"RateLimit-Policy", pol},
		} {
			if kv[1] != "" {
				for _, v := range strings.Split(kv[1], "\n") {
					h.Add(kv[0], v)
				}
			}
		}
		sig, found, errs := parseRateLimit(h, raT0, limit)
		for _, err := range errs {
			if !errors.Is(err, errInvalidRateLimit) || len(err.Error()) > 500 {
				t.Fatalf("err = %q: want errInvalidRateLimit and a bounded length", err)
			}
		}
		if !found {
			if sig != (rateLimitSignal{}) {
				t.Fatalf("sig = %+v without found", sig)
			}
			return
		}
		reset := sig.Reset.Sub(raT0)
		switch {
		case reset <= 0 || reset > limit:
			t.Fatalf("Reset = %v, want within (now, now+%v]", sig.Reset, limit)
		case !sig.Exhausted && (sig.Interval <= 0 || sig.Interval > reset):
			t.Fatalf("Interval = %v, want within (0, the reset in %v]", sig.Interval, reset)
		case !sig.Exhausted && !sig.Until.Equal(sig.Reset):
			t.Fatalf("Until = %v, want the reset %v", sig.Until, sig.Reset)
		case sig.Exhausted && (sig.Interval < 0 || (sig.Interval > 0) != sig.Until.After(sig.Reset)):
			t.Fatalf("exhausted: Interval = %v until %v after the reset %v: want an interval only for a next window", sig.Interval, sig.Until, sig.Reset)
		case sig.Source != rateLimitSourceX && sig.Source != rateLimitSourceDraft && sig.Source != rateLimitSourceSF:
			t.Fatalf("Source = %q", sig.Source)
		}
	})
}
