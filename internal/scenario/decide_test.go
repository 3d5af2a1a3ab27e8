package scenario

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// t0 has a fractional second, so HTTP-date rounding shows.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 400_000_000, time.UTC)

func mustState(t *testing.T, cfg HostConfig) *state {
	t.Helper()
	cfg, err := cfg.normalized()
	if err != nil {
		t.Fatal(err)
	}
	return newState(cfg)
}

func TestBucketTakeAt(t *testing.T) {
	b := newBucket(2, 2) // 2/s, burst 2
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {0, true}, {0, false}, // burst spent
		{499 * time.Millisecond, false},
		{500 * time.Millisecond, true},                                                // one token refilled
		{400 * time.Millisecond, false},                                               // time going back refills nothing
		{10 * time.Second, true}, {10 * time.Second, true}, {10 * time.Second, false}, // capped at burst
	}
	for i, s := range steps {
		if got := b.takeAt(t0.Add(s.at)); got != s.want {
			t.Errorf("step %d at +%v: took %v, want %v", i, s.at, got, s.want)
		}
	}
}

func TestCapacityRefusesOverIt(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 3, Capacity: &Capacity{Rate: 4, Burst: 1, RetryAfter: 1500 * time.Millisecond}})
	if r := s.decideAt(t0, "/"); r.status != http.StatusOK {
		t.Fatalf("first request: %d, want 200", r.status)
	}
	r := s.decideAt(t0.Add(100*time.Millisecond), "/p/1")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "2" {
		t.Fatalf("over capacity: %d Retry-After %q, want 429 and \"2\" (rounded up)", r.status, r.header.Get("Retry-After"))
	}
	if r := s.decideAt(t0.Add(250*time.Millisecond), "/p/1"); r.status != http.StatusOK {
		t.Fatalf("after refill: %d, want 200", r.status)
	}
	want := []Window{{Issued: t0.Add(100 * time.Millisecond), Until: t0.Add(2100 * time.Millisecond), Path: "/p/1", Status: 429}}
	if len(s.windows) != 1 || s.windows[0] != want[0] {
		t.Fatalf("windows %+v, want %+v", s.windows, want)
	}
}

func TestCapacityWithoutRetryAfter(t *testing.T) {
	s := mustState(t, HostConfig{Capacity: &Capacity{Rate: 1, Burst: 1}})
	s.decideAt(t0, "/")
	r := s.decideAt(t0, "/")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "" || len(s.windows) != 0 {
		t.Fatalf("got %d Retry-After %q windows %d, want 429 without Retry-After or window", r.status, r.header.Get("Retry-After"), len(s.windows))
	}
}

func TestSkewedClockRetryAfterDate(t *testing.T) {
	s := mustState(t, HostConfig{
		ClockSkew: time.Hour, RetryAfterDate: true,
		Refusals: []Refusal{{Status: 429, First: 2, RetryAfter: time.Second}},
	})
	r := s.decideAt(t0, "/")
	if r.status != 429 {
		t.Fatalf("status %d, want 429", r.status)
	}
	date, err := http.ParseTime(r.header.Get("Date"))
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour).Truncate(time.Second); !date.Equal(want) {
		t.Errorf("Date %v, want the skewed clock %v", date, want)
	}
	ra, err := http.ParseTime(r.header.Get("Retry-After"))
	if err != nil {
		t.Fatalf("Retry-After %q is not an HTTP-date: %v", r.header.Get("Retry-After"), err)
	}
	if want := time.Date(2025, 3, 1, 13, 0, 2, 0, time.UTC); !ra.Equal(want) { // 13:00:01.4 rounded up
		t.Errorf("Retry-After %v, want %v", ra, want)
	}
	// The window ends at the date on the local clock; a client measuring from Date waits ra-date = 2 s ≥ 1.6 s.
	if w := s.windows[0]; !w.Until.Equal(t0.Add(1600*time.Millisecond)) || ra.Sub(date) < w.Until.Sub(t0) {
		t.Errorf("window until %v, want %v", w.Until, t0.Add(1600*time.Millisecond))
	}
	if r := s.decideAt(t0.Add(time.Second), "/"); r.status != 429 {
		t.Errorf("second request %d, want 429 (First: 2)", r.status)
	}
	if r := s.decideAt(t0.Add(2*time.Second), "/"); r.status != 200 {
		t.Errorf("third request %d, want 200", r.status)
	}
}

func TestOutageEnds(t *testing.T) {
	s := mustState(t, HostConfig{Refusals: []Refusal{Outage(3*time.Second, 10*time.Second, 0)}})
	for _, c := range []struct {
		at   time.Duration
		want int
	}{
		{0, 200}, // the first request starts the clock
		{2900 * time.Millisecond, 200},
		{3 * time.Second, 503},
		{12900 * time.Millisecond, 503},
		{13 * time.Second, 200},
		{time.Minute, 200},
	} {
		r := s.decideAt(t0.Add(c.at), "/")
		if r.status != c.want {
			t.Errorf("+%v: %d, want %d", c.at, r.status, c.want)
		}
		if r.header.Get("Retry-After") != "" {
			t.Errorf("+%v: Retry-After %q, want none", c.at, r.header.Get("Retry-After"))
		}
	}
}

func TestRefusalFlaps(t *testing.T) {
	r := Refusal{After: time.Second, For: 2 * time.Second, Repeat: 5 * time.Second}
	for _, c := range []struct {
		elapsed time.Duration
		want    bool
	}{
		{0, false}, {time.Second, true}, {2999 * time.Millisecond, true}, {3 * time.Second, false},
		{6 * time.Second, true}, {8 * time.Second, false}, {11 * time.Second, true},
	} {
		if got := r.matches(100, c.elapsed); got != c.want {
			t.Errorf("+%v: refused %v, want %v", c.elapsed, got, c.want)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	s := mustState(t, HostConfig{RateLimit: &RateLimit{Limit: 3, Window: 10 * time.Second, Enforce: true}})
	for i, c := range []struct {
		at                      time.Duration
		status                  int
		remaining, reset, retry string
	}{
		{0, 200, "2", "10", ""},
		{time.Second, 200, "1", "9", ""},
		{2500 * time.Millisecond, 200, "0", "8", ""},
		{3 * time.Second, 429, "0", "7", "7"},
		{10 * time.Second, 200, "2", "10", ""}, // a new window
	} {
		r := s.decideAt(t0.Add(c.at), "/")
		h := r.header
		if r.status != c.status || h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != c.remaining ||
			h.Get("X-RateLimit-Reset") != c.reset || h.Get("Retry-After") != c.retry {
			t.Errorf("step %d: %d %v, want %d remaining %s reset %s Retry-After %q", i, r.status, h, c.status, c.remaining, c.reset, c.retry)
		}
	}
}

func TestRateLimitStyles(t *testing.T) {
	s := mustState(t, HostConfig{RateLimit: &RateLimit{Limit: 5, Window: 60 * time.Second, Style: IETF}})
	h := s.decideAt(t0, "/").header
	if h.Get("RateLimit") != `"default";r=4;t=60` || h.Get("RateLimit-Policy") != `"default";q=5;w=60` {
		t.Errorf("IETF headers %v", h)
	}
	s = mustState(t, HostConfig{RateLimit: &RateLimit{Limit: 5, Window: 60 * time.Second, Style: IETFDraft}})
	h = s.decideAt(t0, "/").header
	if h.Get("RateLimit-Limit") != "5" || h.Get("RateLimit-Remaining") != "4" || h.Get("RateLimit-Reset") != "60" {
		t.Errorf("IETF draft headers %v", h)
	}
	s = mustState(t, HostConfig{ClockSkew: time.Hour, RateLimit: &RateLimit{Limit: 5, Window: 60 * time.Second, ResetEpoch: true}})
	h = s.decideAt(t0, "/").header
	if want := "1740834061"; h.Get("X-RateLimit-Reset") != want { // 13:01:00.4 on the skewed clock, rounded up
		t.Errorf("epoch reset %q, want %s", h.Get("X-RateLimit-Reset"), want)
	}
}

func TestRobotsAndUnknownPaths(t *testing.T) {
	s := mustState(t, HostConfig{Pages: 2, Robots: "User-agent: *\nCrawl-delay: 2\n",
		Refusals: []Refusal{{Status: 503, First: 100}}})
	if r := s.decideAt(t0, RobotsPath); r.status != 200 || string(r.body) != "User-agent: *\nCrawl-delay: 2\n" {
		t.Errorf("robots.txt: %d %q", r.status, r.body)
	}
	for _, p := range []string{"/p/0", "/p/2", "/p/01", "/x"} {
		if r := s.decideAt(t0, p); r.status != 404 {
			t.Errorf("%s: %d, want 404", p, r.status)
		}
	}
	if s.requests != 0 || !s.start.IsZero() {
		t.Errorf("robots.txt and 404s counted as page requests: %d", s.requests)
	}
	if r := mustState(t, HostConfig{}).decideAt(t0, RobotsPath); r.status != 404 {
		t.Errorf("unset robots.txt: %d, want 404", r.status)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []HostConfig{
		{Latency: -1},
		{Capacity: &Capacity{Rate: 0, Burst: 1}},
		{Capacity: &Capacity{Rate: 1, Burst: 0}},
		{Capacity: &Capacity{Rate: 1, Burst: 1, Status: 200}},
		{Workers: -1},
		{RateLimit: &RateLimit{Limit: 0, Window: time.Second}},
		{Refusals: []Refusal{{Status: 200}}},
		{Refusals: []Refusal{{For: 2 * time.Second, Repeat: time.Second}}},
	} {
		if _, err := cfg.normalized(); !errors.Is(err, errConfig) {
			t.Errorf("%+v: err %v, want errConfig", cfg, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		cfg  HostConfig
		want string
	}{
		{HostConfig{}, "1 pages"},
		{HostConfig{Pages: 30, Latency: 20 * time.Millisecond, ClockSkew: time.Hour, RetryAfterDate: true,
			Capacity: &Capacity{Rate: 2, Burst: 2, RetryAfter: 1500 * time.Millisecond}},
			"30 pages, 20ms latency, capacity 2/s burst 2 (429, Retry-After 2s as HTTP-date), clock +1h0m0s"},
		{HostConfig{RateLimit: &RateLimit{Limit: 10, Window: 10 * time.Second, Style: IETF},
			Refusals: []Refusal{{Status: 429, First: 2, RetryAfter: time.Second}, Outage(3*time.Second, 10*time.Second, 0)}},
			"1 pages, quota 10 per 10s (RateLimit, advice only), 429 for first 2 requests (Retry-After 1s), 503 for 10s from +3s (no Retry-After)"},
		{HostConfig{Pages: 5, Workers: 2, Latency: 100 * time.Millisecond, Capacity: &Capacity{Rate: 4, Burst: 1, Status: 503}},
			"5 pages, 2 workers × 100ms service time behind a FIFO queue, capacity 4/s burst 1 (503, no Retry-After)"},
		{HostConfig{Robots: "User-agent: *\nCrawl-delay: 2\n", ClockSkew: -time.Minute},
			`1 pages, robots.txt "User-agent: *\nCrawl-delay: 2", clock -1m0s`},
	} {
		if got := c.cfg.Describe(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestCapacityStep(t *testing.T) {
	// 4/s, burst 1, then 1/s from +2 s.
	s := mustState(t, HostConfig{Pages: 100, Capacity: &Capacity{Rate: 4, Burst: 1, StepAfter: 2 * time.Second, StepRate: 1}})
	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 200}, {100 * time.Millisecond, 429}, {250 * time.Millisecond, 200}, // 4/s before the step
		{1750 * time.Millisecond, 200}, // the bucket holds at most one token
		{2 * time.Second, 200},         // earned at the old rate by the step
		{2250 * time.Millisecond, 429}, // 1/s after it
		{2999 * time.Millisecond, 429},
		{3 * time.Second, 200},
	}
	for i, st := range steps {
		if r := s.decideAt(t0.Add(st.at), "/"); r.status != st.want {
			t.Errorf("step %d at +%v: %d, want %d", i, st.at, r.status, st.want)
		}
	}
	if _, err := (HostConfig{Capacity: &Capacity{Rate: 1, Burst: 1, StepAfter: time.Second}}).normalized(); !errors.Is(err, errConfig) {
		t.Errorf("a step without a rate: %v, want a config error", err)
	}
}
