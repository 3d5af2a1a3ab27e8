package ratelimit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(raT0.Add(d).Unix(), 10) }
	epochMs := func(d time.Duration) string { return strconv.FormatInt(raT0.Add(d).UnixMilli(), 10) }
	// 5 remaining, 10 s to reset: the 5 before the reset, the next at it,
	// 10 s / 6 rounded up to the nanosecond.
	const fiveIn10s = 1666666667 * time.Nanosecond
	type want struct {
		interval  time.Duration
		until     time.Duration // from raT0
		reset     time.Duration // from raT0; 0: until
		exhausted bool
		source    string
	}
	tests := []struct {
		name     string
		h        http.Header
		want     *want    // nil: found is false
		wantErrs []string // one substring per expected error, in order
	}{
		{name: "no fields", h: header("Content-Type", "text/html")},

		// X-RateLimit-*.
		{name: "x delta seconds",
			h:    header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "60"),
			want: &want{interval: 1176470589, until: time.Minute, source: "x-ratelimit"}}, // 60 s / 51, rounded up,
		{name: "x field names in any case",
			h:    header("x-ratelimit-remaining", "50", "x-ratelimit-reset", "60"),
			want: &want{interval: 1176470589, until: time.Minute, source: "x-ratelimit"}}, // 60 s / 51, rounded up,
		{name: "x epoch seconds",
			h:    header("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", epoch(10*time.Minute)),
			want: &want{interval: 11764705883, until: 10 * time.Minute, source: "x-ratelimit"}}, // 600 s / 51, rounded up,
		{name: "x epoch milliseconds",
			h:    header("X-RateLimit-Remaining", "50", "X-RateLimit-Reset", epochMs(10*time.Minute)),
			want: &want{interval: 11764705883, until: 10 * time.Minute, source: "x-ratelimit"}}, // 600 s / 51, rounded up,
		{name: "x fractional epoch seconds",
			h:    header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(time.Minute)+".25"),
			want: &want{interval: 30125 * time.Millisecond, until: time.Minute + 250*time.Millisecond, source: "x-ratelimit"}},
		{name: "x epoch in the past: reset already happened",
			h: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(-time.Minute))},
		{name: "x epoch now: reset already happened",
			h: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(0))},
		{name: "x fractional delta seconds",
			h:    header("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1.5"),
			want: &want{interval: 375 * time.Millisecond, until: 1500 * time.Millisecond, source: "x-ratelimit"}},
		{name: "x fraction rounds up to the millisecond",
			h:    header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "0.0001"),
			want: &want{interval: 500 * time.Microsecond, until: time.Millisecond, source: "x-ratelimit"}},
		{name: "x interval rounds up",
			h:    header("X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "1"),
			want: &want{interval: 333333334, until: time.Second, source: "x-ratelimit"}}, // 1 s / 3
		{name: "x exhausted",
			h:    header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"),
			want: &want{until: 30 * time.Second, exhausted: true, source: "x-ratelimit"}}, // no window: no interval after the reset
		{name: "x exhausted with zero window: just reset",
			h: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "0")},
		{name: "x zero window with quota left",
			h: header("X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "0")},
		{name: "x remaining without reset is incomplete",
			h: header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "10")},
		{name: "x remaining above limit",
			h:        header("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "11", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining "11": above X-RateLimit-Limit 10`}},
		{name: "x limit zero is dropped, the rest used",
			h:        header("X-RateLimit-Limit", "0", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10"),
			want:     &want{interval: fiveIn10s, until: 10 * time.Second, source: "x-ratelimit"},
			wantErrs: []string{`X-RateLimit-Limit "0": below 1`}},
		{name: "x negative remaining",
			h:        header("X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining "-1"`}},
		{name: "x negative reset",
			h:        header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "-60"),
			wantErrs: []string{`X-RateLimit-Reset "-60"`}},
		{name: "x garbage in every field",
			h:        header("X-RateLimit-Limit", "lots", "X-RateLimit-Remaining", "some", "X-RateLimit-Reset", "soon"),
			wantErrs: []string{`X-RateLimit-Limit "lots"`, `X-RateLimit-Remaining "some"`, `X-RateLimit-Reset "soon"`}},
		{name: "x remaining overflowing int64",
			h:        header("X-RateLimit-Remaining", "99999999999999999999", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining`}},
		{name: "x remaining at the int64 maximum: 1 ns, no overflow",
			h:    header("X-RateLimit-Remaining", "9223372036854775807", "X-RateLimit-Reset", "60"),
			want: &want{interval: time.Nanosecond, until: time.Minute, source: "x-ratelimit"}},
		{name: "x delta reset above the maximum",
			h:        header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "3601"),
			wantErrs: []string{`X-RateLimit-Reset "3601": above the maximum 1h0m0s`}},
		{name: "x epoch reset above the maximum",
			h:        header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(2*time.Hour)),
			wantErrs: []string{`X-RateLimit-Reset`}},
		{name: "x consistent duplicates",
			h:    header("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10, 10"),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "x-ratelimit"}},
		{name: "x conflicting duplicates",
			h:        header("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "6", "X-RateLimit-Reset", "10"),
			wantErrs: []string{`X-RateLimit-Remaining "5, 6": conflicting values`}},
		{name: "x conflicting list",
			h:        header("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10, 20"),
			wantErrs: []string{`X-RateLimit-Reset "10, 20": conflicting values`}},

		// RateLimit-* (older IETF drafts).
		{name: "draft fields",
			h:    header("RateLimit-Limit", "10", "RateLimit-Remaining", "5", "RateLimit-Reset", "10"),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit"}},
		{name: "draft limit with quota policies",
			h:    header("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "5", "RateLimit-Reset", "10"),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit"}},
		{name: "draft reset is always delta seconds",
			h:        header("RateLimit-Remaining", "5", "RateLimit-Reset", epoch(time.Minute)),
			wantErrs: []string{`RateLimit-Reset`}},
		{name: "draft exhausted",
			h:    header("RateLimit-Limit", "10", "RateLimit-Remaining", "0", "RateLimit-Reset", "7"),
			want: &want{until: 7 * time.Second, exhausted: true, source: "ratelimit"}},

		// Structured RateLimit and RateLimit-Policy.
		{name: "structured",
			h:    header("RateLimit", `"default";r=5;t=10`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured params in any order",
			h:    header("RateLimit", `"default";t=10;r=5;pk=:cHJvamVjdDEyMw==:`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured spaces around ; and =, refused by RFC 9651, are read as meant",
			h:    header("RateLimit", `"default" ; t = 10 ;r=5`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured spaces inside a string are kept",
			h:    header("RateLimit", `"a ; b = c" ;r=5; t=10`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured token name",
			h:    header("RateLimit", `default;r=5;t=10`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured window from the policy",
			h:    header("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=100;w=60`),
			want: &want{interval: 10 * time.Second, until: time.Minute, source: "ratelimit-sf"}}, // 60 s / 6
		{name: "structured t beats the policy window",
			h:    header("RateLimit", `"default";r=5;t=10`, "RateLimit-Policy", `"default";q=100;w=60`),
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured policy of another name is not used",
			h: header("RateLimit", `"default";r=5`, "RateLimit-Policy", `"other";q=100;w=60`)},
		{name: "structured r above the policy quota",
			h:        header("RateLimit", `"default";r=500;t=10`, "RateLimit-Policy", `"default";q=100;w=60`),
			wantErrs: []string{`RateLimit "\"default\";r=500;t=10": r above the policy quota q=100`}},
		{name: "structured several items: most restrictive",
			h:    header("RateLimit", `"burst";r=5;t=1, "daily";r=100;t=3600`),
			want: &want{interval: 35643564357, until: time.Hour, source: "ratelimit-sf"}}, // 3600 s / 101 beats 1 s / 6
		{name: "structured several lines",
			h:    header("RateLimit", `"burst";r=0;t=1`, "RateLimit", `"daily";r=100;t=3600`),
			want: &want{until: time.Second, exhausted: true, source: "ratelimit-sf"}},
		{name: "structured exhausted: the next window's quota follows the reset",
			h:    header("RateLimit", `"default";r=0;t=4`, "RateLimit-Policy", `"default";q=10;w=20`),
			want: &want{interval: 2 * time.Second, until: 24 * time.Second, reset: 4 * time.Second, exhausted: true, source: "ratelimit-sf"}},
		{name: "structured bad item ignored, good item used",
			h:        header("RateLimit", `"a";r=1.5;t=10, "b";r=-1;t=10, "c";r="5";t=10, "d";r;t=10, "e";r=5;t=10`),
			want:     &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"},
			wantErrs: []string{`RateLimit "\"a\";r=1.5;t=10": r is not a non-negative integer (and 3 more items ignored)`}},
		{name: "structured garbage t",
			h:        header("RateLimit", `"default";r=5;t=soon`),
			wantErrs: []string{`t is not a non-negative integer`}},
		{name: "structured t above the maximum",
			h:        header("RateLimit", `"default";r=5;t=3601`),
			wantErrs: []string{`RateLimit "\"default\";r=5;t=3601": reset 3601s above the maximum`}},
		{name: "structured policy window above the maximum",
			h:        header("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=10;w=7200`),
			wantErrs: []string{`RateLimit "\"default\";r=5": reset 7200s above the maximum`}},
		{name: "structured syntax error",
			h:        header("RateLimit", `"default";r=5;t=10 garbage`),
			wantErrs: []string{`RateLimit "\"default\";r=5;t=10 garbage": invalid list format`}},
		{name: "structured integer longer than 15 digits saturates",
			h:    header("RateLimit", `"default";r=1000000000000000000000;t=10`, "RateLimit-Policy", `"default";q=100000000000000000000000;w=10`),
			want: &want{interval: time.Nanosecond, until: 10 * time.Second, source: "ratelimit-sf"}}, // 10 s over 999999999999999 requests, rounded up
		{name: "structured lenient reading still fails on garbage",
			h:        header("RateLimit", `"default" ; r=5 ; t=10 garbage`),
			wantErrs: []string{`invalid list format`}},
		{name: "structured bad policy ignored",
			h:        header("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=0;w=60`),
			wantErrs: []string{`RateLimit-Policy "\"default\";q=0;w=60": q is not a positive integer`}},
		{name: "structured exhausted with zero window: just reset",
			h: header("RateLimit", `"default";r=0;t=0`)},

		// Several families.
		{name: "largest interval across families",
			h: header(
				"X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "60", // 60 s / 51: 1.18 s
				"RateLimit-Remaining", "5", "RateLimit-Reset", "10", // 10 s / 6: 1.67 s
				"RateLimit", `"default";r=20;t=10`), // 10 s / 21: 0.48 s
			want: &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit"}},
		{name: "exhausted beats a larger interval",
			h: header(
				"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1",
				"RateLimit", `"default";r=1;t=600`),
			want: &want{until: time.Second, exhausted: true, source: "x-ratelimit"}},
		{name: "equal intervals: later reset wins",
			h: header(
				"X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "20", // 20 s / 10
				"RateLimit", `"default";r=4;t=10`), // 10 s / 5
			want: &want{interval: 2 * time.Second, until: 20 * time.Second, source: "x-ratelimit"}},
		{name: "invalid family ignored, valid one used",
			h: header(
				"X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "6", "X-RateLimit-Reset", "10",
				"RateLimit", `"default";r=5;t=10`),
			want:     &want{interval: fiveIn10s, until: 10 * time.Second, source: "ratelimit-sf"},
			wantErrs: []string{`X-RateLimit-Remaining`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, found, errs := Parse(tt.h, raT0, time.Hour)
			if tt.want == nil {
				if found || sig != (Signal{}) {
					t.Errorf("got %+v, %v; want no signal", sig, found)
				}
			} else {
				reset := tt.want.reset
				if reset == 0 {
					reset = tt.want.until
				}
				w := Signal{Interval: tt.want.interval, Until: raT0.Add(tt.want.until), Reset: raT0.Add(reset), Exhausted: tt.want.exhausted, Source: tt.want.source}
				if !found || sig.Interval != w.Interval || !sig.Until.Equal(w.Until) || !sig.Reset.Equal(w.Reset) || sig.Exhausted != w.Exhausted || sig.Source != w.Source {
					t.Errorf("got %+v, %v; want %+v, true", sig, found, w)
				}
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("errs = %q, want %d errors", errs, len(tt.wantErrs))
			}
			for i, err := range errs {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("errs[%d] = %v, not ErrInvalid", i, err)
				}
				if !strings.Contains(err.Error(), tt.wantErrs[i]) {
					t.Errorf("errs[%d] = %q, want it to contain %q", i, err, tt.wantErrs[i])
				}
			}
		})
	}
}

func TestParseRateLimitNegativeMaximumRejectsAnyReset(t *testing.T) {
	_, found, errs := Parse(header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1"), raT0, -time.Second)
	if found || len(errs) != 1 {
		t.Errorf("found = %v, errs = %q; want false and one error", found, errs)
	}
}

func TestParseRateLimitNilHeader(t *testing.T) {
	if _, found, errs := Parse(nil, raT0, time.Hour); found || errs != nil {
		t.Errorf("found = %v, errs = %v; want false, nil", found, errs)
	}
}

func TestParseRateLimitErrorTruncatesValue(t *testing.T) {
	_, _, errs := Parse(header("X-RateLimit-Remaining", strings.Repeat("9x", 500)), raT0, time.Hour)
	if len(errs) != 1 {
		t.Fatalf("errs = %v, want one", errs)
	}
	want := `ext: invalid rate-limit header: X-RateLimit-Remaining "` + strings.Repeat("9x", 32) + `"...: not a non-negative integer`
	if errs[0].Error() != want {
		t.Errorf("err = %q, want %q", errs[0], want)
	}
}

// issue 10 item 9: an epoch X-RateLimit-Reset is an instant on the server's clock: it is measured from
// the response's Date, as a Retry-After date is, so a skewed server still gets the window it meant.
func TestEpochRateLimitResetCorrectsServerSkew(t *testing.T) {
	for _, tt := range []struct {
		name string
		skew time.Duration // server clock minus local clock
		date string        // the Date field; "-" for the server's clock
	}{
		{name: "server 10 minutes ahead", skew: 10 * time.Minute, date: "-"},
		{name: "server an hour behind", skew: -time.Hour, date: "-"},
		{name: "no Date: the local clock", date: ""},
		{name: "garbage Date: the local clock", date: "yesterday"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			server := raT0.Add(tt.skew)
			date := tt.date
			if date == "-" {
				date = server.Format(http.TimeFormat)
			}
			h := header("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", strconv.FormatInt(server.Add(10*time.Second).Unix(), 10))
			if date != "" {
				h.Set("Date", date)
			}
			sig, found, errs := Parse(h, raT0, time.Hour)
			if !found || len(errs) != 0 || sig.Interval != 1666666667 || !sig.Until.Equal(raT0.Add(10*time.Second)) {
				t.Errorf("got %+v, %v, %v; want a 1.67s interval (10 s / 6) until now+10s", sig, found, errs)
			}
		})
	}
}

// A policy window above the longest reset obeyed does not pace the window after an exhausted one.
func TestExhaustedRateLimitIgnoresHugeNextWindow(t *testing.T) {
	sig, found, errs := Parse(header("RateLimit", `"d";r=0;t=10`, "RateLimit-Policy", `"d";q=1;w=999999999999999`), raT0, time.Hour)
	if !found || len(errs) != 0 || !sig.Exhausted || sig.Interval != 0 || !sig.Reset.Equal(raT0.Add(10*time.Second)) {
		t.Errorf("got %+v, %v, %v; want a hold to now+10s and no interval after it", sig, found, errs)
	}
}

// raT0 is a Tuesday; every test instant is derived from it.
var raT0 = time.Date(2025, time.March, 4, 10, 0, 0, 0, time.UTC)

// header builds a header from key, value pairs; a key may repeat.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
