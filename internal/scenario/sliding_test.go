package scenario

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// HAProxy's counter: cur + prev × remaining/period, refused requests counted, rounded down.
func TestSlidingWindowInterpolates(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 100, Sliding: &SlidingWindow{Limit: 2, RetryAfter: time.Second}})
	ms := time.Millisecond
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 200}, {100 * ms, 200}, // 1, 2: a burst of Limit inside a period passes
		{200 * ms, 429},  // 3 > 2, and counted
		{1000 * ms, 429}, // period 2: 1 + 3 × 1000/1000 = 4
		{1500 * ms, 429}, // 2 + 3 × 500/1000 = 3 (1.5 rounded down)
		{1900 * ms, 429}, // 3 + 3 × 100/1000 = 3: refused requests keep it refused
		{2000 * ms, 429}, // period 3: 1 + 3 = 4
		{3400 * ms, 200}, // period 4: 1 + 1 × 600/1000 = 1 (period 3 had one request)
		{5100 * ms, 200}, // two periods later: prev is 0
		{5200 * ms, 200}, // 2
		{5300 * ms, 429}, // 3
	}
	for i, st := range steps {
		r := s.decideAt(t0.Add(st.at), "/")
		if r.status != st.want {
			t.Errorf("step %d at +%v: %d, want %d", i, st.at, r.status, st.want)
		}
		if r.status == http.StatusTooManyRequests && r.header.Get("Retry-After") != "1" {
			t.Errorf("step %d: Retry-After %q, want 1", i, r.header.Get("Retry-After"))
		}
	}
}

func TestFreqCounterRead(t *testing.T) {
	f := freqCounter{periodMsec: 1000}
	for range 4 {
		f.addAt(t0)
	}
	// Next period, a quarter in: 1 + 4 × 750/1000 = 4.
	if got := f.addAt(t0.Add(1250 * time.Millisecond)); got != 4 {
		t.Errorf("rate read %d, want 4", got)
	}
	// Three quarters in: 2 + 4 × 250/1000 = 3.
	if got := f.addAt(t0.Add(1750 * time.Millisecond)); got != 3 {
		t.Errorf("rate read %d, want 3", got)
	}
}

func TestSlidingWindowConfig(t *testing.T) {
	cfg, err := HostConfig{Sliding: &SlidingWindow{Limit: 4}}.normalized()
	if err != nil || cfg.Sliding.Period != time.Second || cfg.Sliding.Status != 429 {
		t.Fatalf("defaults: %+v, %v; want a 1 s period and 429", cfg.Sliding, err)
	}
	for _, w := range []SlidingWindow{{Limit: 0}, {Limit: 1, Period: -time.Second}, {Limit: 1, Status: 200}, {Limit: 1, Period: time.Microsecond}} {
		if _, err := (HostConfig{Sliding: &w}).normalized(); !errors.Is(err, errConfig) {
			t.Errorf("%+v: %v, want a config error", w, err)
		}
	}
	if got, want := (HostConfig{Pages: 2, Sliding: &SlidingWindow{Limit: 4, RetryAfter: time.Second}}).Describe(),
		"2 pages, sliding window 4 per 1s counting refusals (429, Retry-After 1s)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
