package httpfield

import (
	"strings"
	"testing"
	"time"
)

func TestParseUint(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"0042", 42, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"9223372036854775808", 0, false}, // one past the largest int64
		{"", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{" 1", 0, false},
		{"١", 0, false}, // an Arabic-Indic digit is not ASCII
	} {
		if got, ok := ParseUint(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("ParseUint(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseDecimal(t *testing.T) {
	for _, tt := range []struct {
		in           string
		whole, milli int64
		ok           bool
	}{
		{"1", 1, 0, true},
		{"1.5", 1, 500, true},
		{"0.0001", 0, 1, true},    // rounded up to the millisecond
		{"2.9991", 2, 1000, true}, // rounded up to the next second's worth of thousandths
		{"3.1000", 3, 100, true},  // trailing zeros are not a remainder
		{"1.", 0, 0, false},
		{".5", 0, 0, false},
		{"1e3", 0, 0, false},
	} {
		whole, milli, ok := ParseDecimal(tt.in)
		if whole != tt.whole || milli != tt.milli || ok != tt.ok {
			t.Errorf("ParseDecimal(%q) = %d, %d, %v; want %d, %d, %v", tt.in, whole, milli, ok, tt.whole, tt.milli, tt.ok)
		}
	}
}

func TestQuoteCutsOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("x", 63) + "é" + "tail"
	if got, want := Quote(long, 64), `"`+strings.Repeat("x", 63)+`"...`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
	if got := Quote("short", 64); got != `"short"` {
		t.Errorf("Quote(short) = %s", got)
	}
}

func TestParseDate(t *testing.T) {
	want := time.Date(2025, time.March, 4, 10, 2, 0, 0, time.UTC)
	for _, s := range []string{"Tue, 04 Mar 2025 10:02:00 GMT", "Tuesday, 04-Mar-25 10:02:00 GMT", "Tue Mar  4 10:02:00 2025"} {
		if got, ok := ParseDate(s); !ok || !got.Equal(want) {
			t.Errorf("ParseDate(%q) = %v, %v; want %v", s, got, ok, want)
		}
	}
	if _, ok := ParseDate("Tuesday, 04-Mar-25 10:02:00 PST"); ok {
		t.Error("an RFC 850 date in PST parsed: only GMT is an HTTP-date")
	}
}

func TestServerClock(t *testing.T) {
	now := time.Date(2025, time.March, 4, 10, 0, 0, 0, time.UTC)
	if got := ServerClock(" Tue, 04 Mar 2025 11:00:00 GMT\t", now); !got.Equal(now.Add(time.Hour)) {
		t.Errorf("with a Date an hour ahead: %v, want %v", got, now.Add(time.Hour))
	}
	for _, date := range []string{"", "yesterday"} {
		if got := ServerClock(date, now); !got.Equal(now) {
			t.Errorf("ServerClock(%q) = %v, want now", date, got)
		}
	}
}
