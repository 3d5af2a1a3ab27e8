package ext

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// raT0 is a Tuesday; every test instant is derived from it.
var raT0 = time.Date(2025, time.March, 4, 10, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	imf := func(t time.Time) string { return t.Format(http.TimeFormat) }
	tests := []struct {
		name    string
		values  []string
		date    string
		max     time.Duration // 0 means one hour
		want    time.Duration
		wantErr error
	}{
		{name: "delay seconds", values: []string{"120"}, want: 2 * time.Minute},
		{name: "zero", values: []string{"0"}, want: 0},
		{name: "leading zeros", values: []string{"007"}, want: 7 * time.Second},
		{name: "surrounding spaces and tabs", values: []string{" \t120\t "}, want: 2 * time.Minute},
		{name: "exactly the maximum", values: []string{"3600"}, want: time.Hour},

		{name: "IMF-fixdate", values: []string{"Tue, 04 Mar 2025 10:02:00 GMT"}, want: 2 * time.Minute},
		{name: "RFC 850 date", values: []string{"Tuesday, 04-Mar-25 10:02:00 GMT"}, want: 2 * time.Minute},
		{name: "asctime date", values: []string{"Tue Mar  4 10:02:00 2025"}, want: 2 * time.Minute},
		{name: "RFC 850 date not in GMT", values: []string{"Tuesday, 04-Mar-25 10:02:00 PST"}, wantErr: ErrInvalidRetryAfter},
		{name: "wrong weekday is ignored", values: []string{"Mon, 04 Mar 2025 10:02:00 GMT"}, want: 2 * time.Minute},
		{name: "date in the past", values: []string{imf(raT0.Add(-time.Minute))}, want: 0},
		{name: "date equal to now", values: []string{imf(raT0)}, want: 0},

		{name: "server clock an hour ahead", values: []string{imf(raT0.Add(time.Hour + 2*time.Minute))}, date: imf(raT0.Add(time.Hour)), want: 2 * time.Minute},
		{name: "server clock an hour behind", values: []string{imf(raT0.Add(-time.Hour + 2*time.Minute))}, date: imf(raT0.Add(-time.Hour)), want: 2 * time.Minute},
		{name: "Date in RFC 850 format corrects skew", values: []string{imf(raT0.Add(time.Hour + 2*time.Minute))}, date: raT0.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT"), want: 2 * time.Minute},
		{name: "garbage Date falls back to the local clock", values: []string{imf(raT0.Add(2 * time.Minute))}, date: "yesterday", want: 2 * time.Minute},
		{name: "Date does not affect delay seconds", values: []string{"120"}, date: imf(raT0.Add(time.Hour)), want: 2 * time.Minute},

		{name: "delay seconds above the maximum", values: []string{"7200"}, want: 2 * time.Hour, wantErr: ErrRetryAfterTooLong},
		{name: "date far beyond the maximum", values: []string{imf(raT0.Add(48 * time.Hour))}, want: 48 * time.Hour, wantErr: ErrRetryAfterTooLong},
		{name: "largest representable seconds", values: []string{"9223372036"}, want: 9223372036 * time.Second, wantErr: ErrRetryAfterTooLong},
		{name: "seconds overflowing a duration saturate", values: []string{"9223372037"}, want: maxDuration, wantErr: ErrRetryAfterTooLong},
		{name: "20 digits saturate", values: []string{"99999999999999999999"}, want: maxDuration, wantErr: ErrRetryAfterTooLong},
		{name: "date beyond 292 years saturates", values: []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, max: maxDuration, want: maxDuration},
		{name: "negative maximum counts as zero", values: []string{"0"}, max: -time.Second, want: 0},
		{name: "negative maximum rejects any wait", values: []string{"1"}, max: -time.Second, want: time.Second, wantErr: ErrRetryAfterTooLong},

		{name: "empty", values: []string{""}, wantErr: ErrInvalidRetryAfter},
		{name: "spaces only", values: []string{"   "}, wantErr: ErrInvalidRetryAfter},
		{name: "negative", values: []string{"-5"}, wantErr: ErrInvalidRetryAfter},
		{name: "plus sign", values: []string{"+5"}, wantErr: ErrInvalidRetryAfter},
		{name: "fractional", values: []string{"1.5"}, wantErr: ErrInvalidRetryAfter},
		{name: "exponent", values: []string{"1e9"}, wantErr: ErrInvalidRetryAfter},
		{name: "hex", values: []string{"0x10"}, wantErr: ErrInvalidRetryAfter},
		{name: "unit suffix", values: []string{"120s"}, wantErr: ErrInvalidRetryAfter},
		{name: "Arabic-Indic digits", values: []string{"١٢٠"}, wantErr: ErrInvalidRetryAfter},
		{name: "fullwidth digits", values: []string{"１２０"}, wantErr: ErrInvalidRetryAfter},
		{name: "inner space", values: []string{"1 20"}, wantErr: ErrInvalidRetryAfter},

		{name: "two fields: largest wins", values: []string{"60", "120"}, want: 2 * time.Minute},
		{name: "two fields: date larger than seconds", values: []string{"60", imf(raT0.Add(5 * time.Minute))}, want: 5 * time.Minute},
		{name: "garbage field then valid field", values: []string{"soon", "60"}, want: time.Minute},
		{name: "list with garbage and valid", values: []string{"soon, 60"}, want: time.Minute},
		{name: "list of seconds", values: []string{"60, 120"}, want: 2 * time.Minute},
		{name: "list of IMF-fixdates", values: []string{imf(raT0.Add(time.Minute)) + ", " + imf(raT0.Add(3*time.Minute))}, want: 3 * time.Minute},
		{name: "list of seconds and a date", values: []string{"120, " + imf(raT0.Add(5*time.Minute))}, want: 5 * time.Minute},
		{name: "valid wait beats one above the maximum", values: []string{"99999", "5"}, want: 5 * time.Second},
		{name: "above the maximum beats garbage", values: []string{"soon", "99999"}, want: 99999 * time.Second, wantErr: ErrRetryAfterTooLong},
		{name: "largest above the maximum reported", values: []string{"7200", "99999"}, want: 99999 * time.Second, wantErr: ErrRetryAfterTooLong},
		{name: "all garbage", values: []string{"soon", "later"}, wantErr: ErrInvalidRetryAfter},
		{name: "empty list elements", values: []string{",,"}, wantErr: ErrInvalidRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.max
			if limit == 0 {
				limit = time.Hour
			}
			wait, present, err := parseRetryAfter(tt.values, tt.date, raT0, limit)
			if wait != tt.want {
				t.Errorf("wait = %v, want %v", wait, tt.want)
			}
			if !present {
				t.Error("present = false, want true")
			}
			if tt.wantErr == nil && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestParseRetryAfterAbsent(t *testing.T) {
	wait, present, err := parseRetryAfter(nil, "", raT0, time.Hour)
	if wait != 0 || present || err != nil {
		t.Errorf("parseRetryAfter(nil) = %v, %v, %v; want 0, false, nil", wait, present, err)
	}
}

func TestParseRetryAfterErrorMessage(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"first bad field quoted", []string{"soon", "later"}, `ext: invalid Retry-After: "soon"`},
		{"bad date quoted whole", []string{"Tue, 04 Mar 2025 23:59:60 GMT"}, `ext: invalid Retry-After: "Tue, 04 Mar 2025 23:59:60 GMT"`},
		{"empty field", []string{" "}, `ext: invalid Retry-After: empty value`},
		{"above the maximum", []string{"7200"}, `ext: Retry-After above the maximum: "7200" is 2h0m0s, maximum 1h0m0s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseRetryAfter(tt.values, "", raT0, time.Hour)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestParseRetryAfterErrorTruncatesValue(t *testing.T) {
	long := strings.Repeat("x", 63) + "é" + strings.Repeat("y", 1000)
	_, _, err := parseRetryAfter([]string{long}, "", raT0, time.Hour)
	if err == nil {
		t.Fatal("err = nil, want an error")
	}
	want := `ext: invalid Retry-After: "` + strings.Repeat("x", 63) + `"...`
	if err.Error() != want {
		t.Errorf("err = %q, want %q (cut before the split rune)", err, want)
	}
}

func TestParseRetryAfterDoesNotReadTheClock(t *testing.T) {
	// The same response received at two instants waits the same from each
	// when the server's Date anchors the HTTP-date.
	v := []string{"Tue, 04 Mar 2025 10:02:00 GMT"}
	date := "Tue, 04 Mar 2025 10:00:00 GMT"
	for _, now := range []time.Time{raT0, raT0.Add(24 * time.Hour), time.Time{}} {
		if wait, _, err := parseRetryAfter(v, date, now, time.Hour); wait != 2*time.Minute || err != nil {
			t.Errorf("at %v: wait = %v, %v; want 2m0s, nil", now, wait, err)
		}
	}
}

func rlHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseRateLimit(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(raT0.Add(d).Unix(), 10) }
	epochMs := func(d time.Duration) string { return strconv.FormatInt(raT0.Add(d).UnixMilli(), 10) }
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
		{name: "no fields", h: rlHeader("Content-Type", "text/html")},

		// X-RateLimit-*.
		{name: "x delta seconds",
			h:    rlHeader("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "60"),
			want: &want{interval: 1200 * time.Millisecond, until: time.Minute, source: "x-ratelimit"}},
		{name: "x field names in any case",
			h:    rlHeader("x-ratelimit-remaining", "50", "x-ratelimit-reset", "60"),
			want: &want{interval: 1200 * time.Millisecond, until: time.Minute, source: "x-ratelimit"}},
		{name: "x epoch seconds",
			h:    rlHeader("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", epoch(10*time.Minute)),
			want: &want{interval: 12 * time.Second, until: 10 * time.Minute, source: "x-ratelimit"}},
		{name: "x epoch milliseconds",
			h:    rlHeader("X-RateLimit-Remaining", "50", "X-RateLimit-Reset", epochMs(10*time.Minute)),
			want: &want{interval: 12 * time.Second, until: 10 * time.Minute, source: "x-ratelimit"}},
		{name: "x fractional epoch seconds",
			h:    rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(time.Minute)+".25"),
			want: &want{interval: time.Minute + 250*time.Millisecond, until: time.Minute + 250*time.Millisecond, source: "x-ratelimit"}},
		{name: "x epoch in the past: reset already happened",
			h: rlHeader("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(-time.Minute))},
		{name: "x epoch now: reset already happened",
			h: rlHeader("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(0))},
		{name: "x fractional delta seconds",
			h:    rlHeader("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1.5"),
			want: &want{interval: 500 * time.Millisecond, until: 1500 * time.Millisecond, source: "x-ratelimit"}},
		{name: "x fraction rounds up to the millisecond",
			h:    rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "0.0001"),
			want: &want{interval: time.Millisecond, until: time.Millisecond, source: "x-ratelimit"}},
		{name: "x interval rounds up",
			h:    rlHeader("X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "1"),
			want: &want{interval: 333333334, until: time.Second, source: "x-ratelimit"}},
		{name: "x exhausted",
			h:    rlHeader("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"),
			want: &want{until: 30 * time.Second, exhausted: true, source: "x-ratelimit"}}, // no window: no interval after the reset
		{name: "x exhausted with zero window: just reset",
			h: rlHeader("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "0")},
		{name: "x zero window with quota left",
			h: rlHeader("X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "0")},
		{name: "x remaining without reset is incomplete",
			h: rlHeader("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "10")},
		{name: "x remaining above limit",
			h:        rlHeader("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "11", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining "11": above X-RateLimit-Limit 10`}},
		{name: "x limit zero is dropped, the rest used",
			h:        rlHeader("X-RateLimit-Limit", "0", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10"),
			want:     &want{interval: 2 * time.Second, until: 10 * time.Second, source: "x-ratelimit"},
			wantErrs: []string{`X-RateLimit-Limit "0": below 1`}},
		{name: "x negative remaining",
			h:        rlHeader("X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining "-1"`}},
		{name: "x negative reset",
			h:        rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "-60"),
			wantErrs: []string{`X-RateLimit-Reset "-60"`}},
		{name: "x garbage in every field",
			h:        rlHeader("X-RateLimit-Limit", "lots", "X-RateLimit-Remaining", "some", "X-RateLimit-Reset", "soon"),
			wantErrs: []string{`X-RateLimit-Limit "lots"`, `X-RateLimit-Remaining "some"`, `X-RateLimit-Reset "soon"`}},
		{name: "x remaining overflowing int64",
			h:        rlHeader("X-RateLimit-Remaining", "99999999999999999999", "X-RateLimit-Reset", "60"),
			wantErrs: []string{`X-RateLimit-Remaining`}},
		{name: "x delta reset above the maximum",
			h:        rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "3601"),
			wantErrs: []string{`X-RateLimit-Reset "3601": above the maximum 1h0m0s`}},
		{name: "x epoch reset above the maximum",
			h:        rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", epoch(2*time.Hour)),
			wantErrs: []string{`X-RateLimit-Reset`}},
		{name: "x consistent duplicates",
			h:    rlHeader("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10, 10"),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "x-ratelimit"}},
		{name: "x conflicting duplicates",
			h:        rlHeader("X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "6", "X-RateLimit-Reset", "10"),
			wantErrs: []string{`X-RateLimit-Remaining "5, 6": conflicting values`}},
		{name: "x conflicting list",
			h:        rlHeader("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "10, 20"),
			wantErrs: []string{`X-RateLimit-Reset "10, 20": conflicting values`}},

		// RateLimit-* (older IETF drafts).
		{name: "draft fields",
			h:    rlHeader("RateLimit-Limit", "10", "RateLimit-Remaining", "5", "RateLimit-Reset", "10"),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit"}},
		{name: "draft limit with quota policies",
			h:    rlHeader("RateLimit-Limit", "10, 10;w=1, 50;w=60", "RateLimit-Remaining", "5", "RateLimit-Reset", "10"),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit"}},
		{name: "draft reset is always delta seconds",
			h:        rlHeader("RateLimit-Remaining", "5", "RateLimit-Reset", epoch(time.Minute)),
			wantErrs: []string{`RateLimit-Reset`}},
		{name: "draft exhausted",
			h:    rlHeader("RateLimit-Limit", "10", "RateLimit-Remaining", "0", "RateLimit-Reset", "7"),
			want: &want{until: 7 * time.Second, exhausted: true, source: "ratelimit"}},

		// Structured RateLimit and RateLimit-Policy.
		{name: "structured",
			h:    rlHeader("RateLimit", `"default";r=5;t=10`),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured params in any order with spaces",
			h:    rlHeader("RateLimit", `"default" ; t = 10 ;r=5;pk=:cHJvamVjdDEyMw==:`),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured token name",
			h:    rlHeader("RateLimit", `default;r=5;t=10`),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured window from the policy",
			h:    rlHeader("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=100;w=60`),
			want: &want{interval: 12 * time.Second, until: time.Minute, source: "ratelimit-sf"}},
		{name: "structured t beats the policy window",
			h:    rlHeader("RateLimit", `"default";r=5;t=10`, "RateLimit-Policy", `"default";q=100;w=60`),
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"}},
		{name: "structured policy of another name is not used",
			h: rlHeader("RateLimit", `"default";r=5`, "RateLimit-Policy", `"other";q=100;w=60`)},
		{name: "structured r above the policy quota",
			h:        rlHeader("RateLimit", `"default";r=500;t=10`, "RateLimit-Policy", `"default";q=100;w=60`),
			wantErrs: []string{`RateLimit "\"default\";r=500;t=10": r above the policy quota q=100`}},
		{name: "structured several items: most restrictive",
			h:    rlHeader("RateLimit", `"burst";r=5;t=1, "daily";r=100;t=3600`),
			want: &want{interval: 36 * time.Second, until: time.Hour, source: "ratelimit-sf"}},
		{name: "structured several lines",
			h:    rlHeader("RateLimit", `"burst";r=0;t=1`, "RateLimit", `"daily";r=100;t=3600`),
			want: &want{until: time.Second, exhausted: true, source: "ratelimit-sf"}},
		{name: "structured exhausted: the next window's quota follows the reset",
			h:    rlHeader("RateLimit", `"default";r=0;t=4`, "RateLimit-Policy", `"default";q=10;w=20`),
			want: &want{interval: 2 * time.Second, until: 24 * time.Second, reset: 4 * time.Second, exhausted: true, source: "ratelimit-sf"}},
		{name: "structured bad item ignored, good item used",
			h:        rlHeader("RateLimit", `"a";r=1.5;t=10, "b";r=-1;t=10, "c";r="5";t=10, "d";r;t=10, "e";r=5;t=10`),
			want:     &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"},
			wantErrs: []string{`RateLimit "\"a\";r=1.5;t=10": r is not a non-negative integer (and 3 more items ignored)`}},
		{name: "structured garbage t",
			h:        rlHeader("RateLimit", `"default";r=5;t=soon`),
			wantErrs: []string{`t is not a non-negative integer`}},
		{name: "structured t above the maximum",
			h:        rlHeader("RateLimit", `"default";r=5;t=3601`),
			wantErrs: []string{`RateLimit "\"default\";r=5;t=3601": reset 3601s above the maximum`}},
		{name: "structured policy window above the maximum",
			h:        rlHeader("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=10;w=7200`),
			wantErrs: []string{`RateLimit "\"default\";r=5": reset 7200s above the maximum`}},
		{name: "structured syntax error",
			h:        rlHeader("RateLimit", `"default";r=5;t=10 garbage`),
			wantErrs: []string{`RateLimit "\"default\";r=5;t=10 garbage": unexpected 'g'`}},
		{name: "structured integer longer than 15 digits",
			h:        rlHeader("RateLimit", `"default";r=1000000000000000;t=10`),
			wantErrs: []string{`r is not a non-negative integer`}},
		{name: "structured bad policy ignored",
			h:        rlHeader("RateLimit", `"default";r=5`, "RateLimit-Policy", `"default";q=0;w=60`),
			wantErrs: []string{`RateLimit-Policy "\"default\";q=0;w=60": q is not a positive integer`}},
		{name: "structured exhausted with zero window: just reset",
			h: rlHeader("RateLimit", `"default";r=0;t=0`)},

		// Several families.
		{name: "largest interval across families",
			h: rlHeader(
				"X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "60", // 1.2s
				"RateLimit-Remaining", "5", "RateLimit-Reset", "10", // 2s
				"RateLimit", `"default";r=20;t=10`), // 0.5s
			want: &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit"}},
		{name: "exhausted beats a larger interval",
			h: rlHeader(
				"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1",
				"RateLimit", `"default";r=1;t=600`),
			want: &want{until: time.Second, exhausted: true, source: "x-ratelimit"}},
		{name: "equal intervals: later reset wins",
			h: rlHeader(
				"X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "20",
				"RateLimit", `"default";r=5;t=10`),
			want: &want{interval: 2 * time.Second, until: 20 * time.Second, source: "x-ratelimit"}},
		{name: "invalid family ignored, valid one used",
			h: rlHeader(
				"X-RateLimit-Remaining", "5", "X-RateLimit-Remaining", "6", "X-RateLimit-Reset", "10",
				"RateLimit", `"default";r=5;t=10`),
			want:     &want{interval: 2 * time.Second, until: 10 * time.Second, source: "ratelimit-sf"},
			wantErrs: []string{`X-RateLimit-Remaining`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig, found, errs := parseRateLimit(tt.h, raT0, time.Hour)
			if tt.want == nil {
				if found || sig != (rateLimitSignal{}) {
					t.Errorf("got %+v, %v; want no signal", sig, found)
				}
			} else {
				reset := tt.want.reset
				if reset == 0 {
					reset = tt.want.until
				}
				w := rateLimitSignal{Interval: tt.want.interval, Until: raT0.Add(tt.want.until), Reset: raT0.Add(reset), Exhausted: tt.want.exhausted, Source: tt.want.source}
				if !found || sig.Interval != w.Interval || !sig.Until.Equal(w.Until) || !sig.Reset.Equal(w.Reset) || sig.Exhausted != w.Exhausted || sig.Source != w.Source {
					t.Errorf("got %+v, %v; want %+v, true", sig, found, w)
				}
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("errs = %q, want %d errors", errs, len(tt.wantErrs))
			}
			for i, err := range errs {
				if !errors.Is(err, ErrInvalidRateLimit) {
					t.Errorf("errs[%d] = %v, not ErrInvalidRateLimit", i, err)
				}
				if !strings.Contains(err.Error(), tt.wantErrs[i]) {
					t.Errorf("errs[%d] = %q, want it to contain %q", i, err, tt.wantErrs[i])
				}
			}
		})
	}
}

func TestParseRateLimitNegativeMaximumRejectsAnyReset(t *testing.T) {
	_, found, errs := parseRateLimit(rlHeader("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "1"), raT0, -time.Second)
	if found || len(errs) != 1 {
		t.Errorf("found = %v, errs = %q; want false and one error", found, errs)
	}
}

func TestParseRateLimitNilHeader(t *testing.T) {
	if _, found, errs := parseRateLimit(nil, raT0, time.Hour); found || errs != nil {
		t.Errorf("found = %v, errs = %v; want false, nil", found, errs)
	}
}

func TestParseRateLimitErrorTruncatesValue(t *testing.T) {
	_, _, errs := parseRateLimit(rlHeader("X-RateLimit-Remaining", strings.Repeat("9x", 500)), raT0, time.Hour)
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
			h := rlHeader("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", strconv.FormatInt(server.Add(10*time.Second).Unix(), 10))
			if date != "" {
				h.Set("Date", date)
			}
			sig, found, errs := parseRateLimit(h, raT0, time.Hour)
			if !found || len(errs) != 0 || sig.Interval != 2*time.Second || !sig.Until.Equal(raT0.Add(10*time.Second)) {
				t.Errorf("got %+v, %v, %v; want a 2s interval until now+10s", sig, found, errs)
			}
		})
	}
}

// A policy window above the longest reset obeyed does not pace the window after an exhausted one.
func TestExhaustedRateLimitIgnoresHugeNextWindow(t *testing.T) {
	sig, found, errs := parseRateLimit(rlHeader("RateLimit", `"d";r=0;t=10`, "RateLimit-Policy", `"d";q=1;w=999999999999999`), raT0, time.Hour)
	if !found || len(errs) != 0 || !sig.Exhausted || sig.Interval != 0 || !sig.Reset.Equal(raT0.Add(10*time.Second)) {
		t.Errorf("got %+v, %v, %v; want a hold to now+10s and no interval after it", sig, found, errs)
	}
}
