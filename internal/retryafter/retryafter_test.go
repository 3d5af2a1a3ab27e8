package retryafter

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/duration"
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
		{name: "RFC 850 date not in GMT", values: []string{"Tuesday, 04-Mar-25 10:02:00 PST"}, wantErr: ErrInvalid},
		{name: "wrong weekday is ignored", values: []string{"Mon, 04 Mar 2025 10:02:00 GMT"}, want: 2 * time.Minute},
		{name: "date in the past", values: []string{imf(raT0.Add(-time.Minute))}, want: 0},
		{name: "date equal to now", values: []string{imf(raT0)}, want: 0},

		{name: "server clock an hour ahead", values: []string{imf(raT0.Add(time.Hour + 2*time.Minute))}, date: imf(raT0.Add(time.Hour)), want: 2 * time.Minute},
		{name: "server clock an hour behind", values: []string{imf(raT0.Add(-time.Hour + 2*time.Minute))}, date: imf(raT0.Add(-time.Hour)), want: 2 * time.Minute},
		{name: "Date in RFC 850 format corrects skew", values: []string{imf(raT0.Add(time.Hour + 2*time.Minute))}, date: raT0.Add(time.Hour).Format("Monday, 02-Jan-06 15:04:05 GMT"), want: 2 * time.Minute},
		{name: "garbage Date falls back to the local clock", values: []string{imf(raT0.Add(2 * time.Minute))}, date: "yesterday", want: 2 * time.Minute},
		{name: "Date does not affect delay seconds", values: []string{"120"}, date: imf(raT0.Add(time.Hour)), want: 2 * time.Minute},

		{name: "delay seconds above the maximum", values: []string{"7200"}, want: 2 * time.Hour, wantErr: ErrTooLong},
		{name: "date far beyond the maximum", values: []string{imf(raT0.Add(48 * time.Hour))}, want: 48 * time.Hour, wantErr: ErrTooLong},
		{name: "largest representable seconds", values: []string{"9223372036"}, want: 9223372036 * time.Second, wantErr: ErrTooLong},
		{name: "seconds overflowing a duration saturate", values: []string{"9223372037"}, want: duration.Max, wantErr: ErrTooLong},
		{name: "20 digits saturate", values: []string{"99999999999999999999"}, want: duration.Max, wantErr: ErrTooLong},
		{name: "date beyond 292 years saturates", values: []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, max: duration.Max, want: duration.Max},
		{name: "negative maximum counts as zero", values: []string{"0"}, max: -time.Second, want: 0},
		{name: "negative maximum rejects any wait", values: []string{"1"}, max: -time.Second, want: time.Second, wantErr: ErrTooLong},

		{name: "empty", values: []string{""}, wantErr: ErrInvalid},
		{name: "spaces only", values: []string{"   "}, wantErr: ErrInvalid},
		{name: "negative", values: []string{"-5"}, wantErr: ErrInvalid},
		{name: "plus sign", values: []string{"+5"}, wantErr: ErrInvalid},
		{name: "fractional", values: []string{"1.5"}, wantErr: ErrInvalid},
		{name: "exponent", values: []string{"1e9"}, wantErr: ErrInvalid},
		{name: "hex", values: []string{"0x10"}, wantErr: ErrInvalid},
		{name: "unit suffix", values: []string{"120s"}, wantErr: ErrInvalid},
		{name: "Arabic-Indic digits", values: []string{"١٢٠"}, wantErr: ErrInvalid},
		{name: "fullwidth digits", values: []string{"１２０"}, wantErr: ErrInvalid},
		{name: "inner space", values: []string{"1 20"}, wantErr: ErrInvalid},

		{name: "two fields: largest wins", values: []string{"60", "120"}, want: 2 * time.Minute},
		{name: "two fields: date larger than seconds", values: []string{"60", imf(raT0.Add(5 * time.Minute))}, want: 5 * time.Minute},
		{name: "garbage field then valid field", values: []string{"soon", "60"}, want: time.Minute},
		{name: "list with garbage and valid", values: []string{"soon, 60"}, want: time.Minute},
		{name: "list of seconds", values: []string{"60, 120"}, want: 2 * time.Minute},
		{name: "list of IMF-fixdates", values: []string{imf(raT0.Add(time.Minute)) + ", " + imf(raT0.Add(3*time.Minute))}, want: 3 * time.Minute},
		{name: "list of seconds and a date", values: []string{"120, " + imf(raT0.Add(5*time.Minute))}, want: 5 * time.Minute},
		{name: "valid wait beats one above the maximum", values: []string{"99999", "5"}, want: 5 * time.Second},
		{name: "above the maximum beats garbage", values: []string{"soon", "99999"}, want: 99999 * time.Second, wantErr: ErrTooLong},
		{name: "largest above the maximum reported", values: []string{"7200", "99999"}, want: 99999 * time.Second, wantErr: ErrTooLong},
		{name: "all garbage", values: []string{"soon", "later"}, wantErr: ErrInvalid},
		{name: "empty list elements", values: []string{",,"}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.max
			if limit == 0 {
				limit = time.Hour
			}
			wait, present, err := Parse(tt.values, tt.date, raT0, limit)
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
	wait, present, err := Parse(nil, "", raT0, time.Hour)
	if wait != 0 || present || err != nil {
		t.Errorf("Parse(nil) = %v, %v, %v; want 0, false, nil", wait, present, err)
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
			_, _, err := Parse(tt.values, "", raT0, time.Hour)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestParseRetryAfterErrorTruncatesValue(t *testing.T) {
	long := strings.Repeat("x", 63) + "é" + strings.Repeat("y", 1000)
	_, _, err := Parse([]string{long}, "", raT0, time.Hour)
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
		if wait, _, err := Parse(v, date, now, time.Hour); wait != 2*time.Minute || err != nil {
			t.Errorf("at %v: wait = %v, %v; want 2m0s, nil", now, wait, err)
		}
	}
}
