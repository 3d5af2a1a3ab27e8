// Package scenario runs loopback HTTP servers that behave like the hosts a crawler meets: slow ones,
// ones with a hidden capacity, a skewed clock, a robots.txt Crawl-delay, rate-limit headers or an
// outage. Each host is one server on 127.0.0.1 (one port) and logs the arrival time and status of
// every request it receives, so pacing is measured at the server, not at the client.
//
// The example crawler, the benchmark program and the Go tests share it. The decisions a host takes
// (refuse, throttle, serve) are pure functions of the arrival time, so they are tested with
// synthetic instants; only latency uses the wall clock.
package scenario

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// HostConfig describes one host. The behaviours combine: a request for a page is first checked
// against Refusals (in order), then Flaky, then the RateLimit quota, then the Sliding window, then the
// Capacity bucket, and is served with Latency only if all of them let it through. Refusals answer at once, as a
// rate limiter in front of the application would. A page let through waits for one of Workers, if
// set, before its Latency. /robots.txt is always answered at once and is exempt from all of them.
//
// The zero value is a single fast page ("/").
type HostConfig struct {
	// Name labels the host in progress output and reports ("fast", "slow", …).
	Name string
	// Pages is the number of pages: "/", "/p/1" … "/p/{Pages-1}" (default 1). Every other path is 404.
	Pages int
	// Links is the number of child links per page (default 3); see PageLinks.
	Links int
	// Latency is the time before the response headers of a page served 200. It is cut short when
	// the host closes or the client goes away. With Workers it is each worker's service time.
	Latency time.Duration
	// Workers, when positive, makes the host a server that slows down instead of refusing: that many
	// workers, each serving one page at a time for Latency, behind a FIFO queue. A page let through
	// waits for the first free worker in the order of arrival (logged as Arrival.QueueWait), then is
	// served. Its capacity is Workers / Latency pages per second. A page abandoned by its client keeps
	// its worker busy for its turn, as a server that does not notice the client leaving. Zero serves
	// every page at once, each with Latency.
	Workers int
	// Capacity is the hidden capacity: a token bucket. Nil means unlimited.
	Capacity *Capacity
	// RateLimit sends rate-limit headers for a fixed-window quota. Nil sends none.
	RateLimit *RateLimit
	// Sliding is a sliding-window rate limiter (HAProxy's http_req_rate). Nil means none.
	Sliding *SlidingWindow
	// Flaky refuses a fraction of the pages on their first attempt, whatever the rate. Nil means none.
	Flaky *Flaky
	// Refusals are scripted refusals (the first K requests, a window, an outage). The first match wins.
	Refusals []Refusal
	// Robots is the body of /robots.txt, such as "User-agent: *\nCrawl-delay: 2\n". Empty answers 404.
	Robots string
	// ClockSkew offsets the server's clock: the Date header and every Retry-After HTTP-date read
	// now+ClockSkew (for example +1 h).
	ClockSkew time.Duration
	// RetryAfterDate sends every Retry-After as an HTTP-date on the server's (skewed) clock instead
	// of delay-seconds.
	RetryAfterDate bool
}

// Capacity is a token bucket: Rate requests per second sustained, Burst at once. A request over
// it is answered Status (429 Too Many Requests by default). A refused request takes no token.
//
// With Burst 1 it is nginx's `limit_req` without `burst`: any request closer than 1/Rate to the
// previous accepted one is refused. nginx's defaults answer it 503 without Retry-After
// (`limit_req_status 503`): set Status 503 and no RetryAfter.
type Capacity struct {
	Rate  float64 // tokens per second, > 0
	Burst int     // bucket size, ≥ 1; the bucket starts full
	// Status answers a request over the capacity: a 4xx or 5xx, 429 when zero.
	Status int
	// RetryAfter is announced on each 429, rounded up to whole seconds. Zero sends no Retry-After.
	RetryAfter time.Duration
	// StepAfter, when positive, changes the bucket's rate to StepRate that long after the host's
	// first page request (a capacity that halves or doubles mid-crawl). The burst stays.
	StepAfter time.Duration
	StepRate  float64
}

// RateLimitStyle selects the rate-limit header names.
type RateLimitStyle int

// The header styles a RateLimit can send.
const (
	// XRateLimit sends X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset.
	XRateLimit RateLimitStyle = iota
	// IETFDraft sends RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (older drafts).
	IETFDraft
	// IETF sends `RateLimit: "default";r=REMAINING;t=RESET` and
	// `RateLimit-Policy: "default";q=LIMIT;w=WINDOW` (structured fields, newer drafts).
	IETF
)

// RateLimit is a fixed-window quota: Limit pages per Window, windows counted from the host's first
// page request. Every page response carries the headers; Remaining counts the requests served.
type RateLimit struct {
	Limit  int
	Window time.Duration // whole seconds; rounded up
	Style  RateLimitStyle
	// ResetEpoch sends X-RateLimit-Reset as Unix epoch seconds (GitHub) instead of delta seconds.
	// It only applies to the XRateLimit style.
	ResetEpoch bool
	// Enforce answers 429 with Retry-After (the seconds until the reset) once the window's quota is
	// spent. Without it the headers are advice only.
	Enforce bool
}

// Refusal answers Status to the page requests it matches: the first First page requests of the
// host, and those arriving in the window [After, After+For) measured from the host's first page
// request. With Repeat > 0 the window recurs every Repeat (flapping).
type Refusal struct {
	Status int // 429 or 503 (default 503)
	First  int
	After  time.Duration
	For    time.Duration
	Repeat time.Duration
	// RetryAfter is announced with each refusal, rounded up to whole seconds. Zero sends none.
	RetryAfter time.Duration
}

// Outage returns a Refusal of 503s for the window [after, after+d) from the host's first page
// request, announcing retryAfter (zero: no Retry-After).
func Outage(after, d, retryAfter time.Duration) Refusal {
	return Refusal{Status: 503, After: after, For: d, RetryAfter: retryAfter}
}

// errConfig is wrapped by every configuration error.
var errConfig = errors.New("scenario: invalid host config")

// normalized returns cfg with defaults filled in, or an error wrapping errConfig.
func (cfg HostConfig) normalized() (HostConfig, error) {
	if cfg.Pages <= 0 {
		cfg.Pages = 1
	}
	if cfg.Links <= 0 {
		cfg.Links = 3
	}
	if cfg.Latency < 0 {
		return cfg, fmt.Errorf("%w: negative latency %v", errConfig, cfg.Latency)
	}
	if c := cfg.Capacity; c != nil && (c.Rate <= 0 || c.Burst < 1) {
		return cfg, fmt.Errorf("%w: capacity needs rate > 0 and burst ≥ 1, got %v/s, %d", errConfig, c.Rate, c.Burst)
	}
	if c := cfg.Capacity; c != nil && c.Status != 0 && (c.Status < 400 || c.Status > 599) {
		return cfg, fmt.Errorf("%w: capacity status %d", errConfig, c.Status)
	}
	if cfg.Workers < 0 {
		return cfg, fmt.Errorf("%w: negative workers %d", errConfig, cfg.Workers)
	}
	if c := cfg.Capacity; c != nil && (c.StepAfter < 0 || (c.StepAfter > 0 && c.StepRate <= 0)) {
		return cfg, fmt.Errorf("%w: a capacity step needs a positive time and rate, got %v/s after %v", errConfig, c.StepRate, c.StepAfter)
	}
	if rl := cfg.RateLimit; rl != nil && (rl.Limit < 1 || rl.Window <= 0) {
		return cfg, fmt.Errorf("%w: rate limit needs limit ≥ 1 and window > 0, got %d per %v", errConfig, rl.Limit, rl.Window)
	}
	if w := cfg.Sliding; w != nil {
		if w.Limit < 1 || w.Period < 0 || (w.Status != 0 && (w.Status < 400 || w.Status > 599)) || w.RetryAfter < 0 {
			return cfg, fmt.Errorf("%w: sliding window needs limit ≥ 1, a period ≥ 0 and a 4xx or 5xx status, got %d per %v, %d", errConfig, w.Limit, w.Period, w.Status)
		}
		c := *w
		if c.Period == 0 {
			c.Period = time.Second
		}
		if c.Period < time.Millisecond {
			return cfg, fmt.Errorf("%w: sliding window period %v under a millisecond", errConfig, c.Period)
		}
		if c.Status == 0 {
			c.Status = http.StatusTooManyRequests
		}
		cfg.Sliding = &c
	}
	if f := cfg.Flaky; f != nil {
		if !(f.Fraction >= 0 && f.Fraction <= 1) || f.Hold < 0 || f.RetryAfter < 0 {
			return cfg, fmt.Errorf("%w: flaky needs a fraction in [0, 1] and no negative duration, got %v", errConfig, f.Fraction)
		}
		c := *f
		for _, k := range c.Kinds {
			if k < FlakyTooMany || k > FlakyTimeout {
				return cfg, fmt.Errorf("%w: flaky kind %d", errConfig, int(k))
			}
		}
		c.Kinds = slices.Clone(c.Kinds)
		if len(c.Kinds) == 0 {
			c.Kinds = []FlakyKind{FlakyTooMany}
		}
		if c.Hold == 0 {
			c.Hold = defaultFlakyHold
		}
		cfg.Flaky = &c
	}
	refusals := make([]Refusal, len(cfg.Refusals))
	for i, r := range cfg.Refusals {
		if r.Status == 0 {
			r.Status = 503
		}
		if r.Status < 400 || r.Status > 599 {
			return cfg, fmt.Errorf("%w: refusal status %d", errConfig, r.Status)
		}
		if r.First < 0 || r.After < 0 || r.For < 0 || r.Repeat < 0 || (r.Repeat > 0 && r.Repeat < r.For) {
			return cfg, fmt.Errorf("%w: refusal %d: negative count or window, or repeat shorter than the window", errConfig, i)
		}
		refusals[i] = r
	}
	cfg.Refusals = refusals
	if cfg.Capacity != nil {
		c := *cfg.Capacity
		if c.Status == 0 {
			c.Status = 429
		}
		cfg.Capacity = &c
	}
	if cfg.RateLimit != nil {
		rl := *cfg.RateLimit
		rl.Window = time.Duration(ceilSeconds(rl.Window)) * time.Second
		cfg.RateLimit = &rl
	}
	return cfg, nil
}

// Describe summarizes the host's behaviours in a line, such as
// "20 pages, 2s latency" or "30 pages, 20ms latency, capacity 2/s burst 2 (429, Retry-After 2s as HTTP-date), clock +1h0m0s".
// An invalid config describes its error.
func (cfg HostConfig) Describe() string {
	cfg, err := cfg.normalized()
	if err != nil {
		return err.Error()
	}
	parts := []string{fmt.Sprintf("%d pages", cfg.Pages)}
	switch {
	case cfg.Workers > 0:
		parts = append(parts, fmt.Sprintf("%d workers × %v service time behind a FIFO queue", cfg.Workers, cfg.Latency))
	case cfg.Latency > 0:
		parts = append(parts, fmt.Sprintf("%v latency", cfg.Latency))
	}
	dateForm := ""
	if cfg.RetryAfterDate {
		dateForm = " as HTTP-date"
	}
	retry := func(d time.Duration) string {
		if d <= 0 {
			return "no Retry-After"
		}
		return fmt.Sprintf("Retry-After %v%s", time.Duration(ceilSeconds(d))*time.Second, dateForm)
	}
	if c := cfg.Capacity; c != nil {
		parts = append(parts, fmt.Sprintf("capacity %g/s burst %d (%d, %s)", c.Rate, c.Burst, c.Status, retry(c.RetryAfter)))
		if c.StepAfter > 0 {
			parts = append(parts, fmt.Sprintf("capacity %g/s from +%v", c.StepRate, c.StepAfter))
		}
	}
	if rl := cfg.RateLimit; rl != nil {
		style := [...]string{XRateLimit: "X-RateLimit", IETFDraft: "RateLimit-*", IETF: "RateLimit"}[min(max(int(rl.Style), 0), 2)]
		enforced := "advice only"
		if rl.Enforce {
			enforced = "enforced"
		}
		parts = append(parts, fmt.Sprintf("quota %d per %v (%s, %s)", rl.Limit, rl.Window, style, enforced))
	}
	if w := cfg.Sliding; w != nil {
		parts = append(parts, fmt.Sprintf("sliding window %d per %v counting refusals (%d, %s)", w.Limit, w.Period, w.Status, retry(w.RetryAfter)))
	}
	if f := cfg.Flaky; f != nil {
		kinds := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			kinds[i] = k.String()
			if k == FlakyTooMany && f.RetryAfter > 0 {
				kinds[i] += " " + retry(f.RetryAfter)
			}
		}
		parts = append(parts, fmt.Sprintf("%.0f%% of first attempts refused at any rate (%s)", f.Fraction*100, strings.Join(kinds, ", ")))
	}
	for _, r := range cfg.Refusals {
		var when []string
		if r.First > 0 {
			when = append(when, fmt.Sprintf("first %d requests", r.First))
		}
		if r.For > 0 {
			w := fmt.Sprintf("%v from +%v", r.For, r.After)
			if r.Repeat > 0 {
				w += fmt.Sprintf(" every %v", r.Repeat)
			}
			when = append(when, w)
		}
		if len(when) > 0 {
			parts = append(parts, fmt.Sprintf("%d for %s (%s)", r.Status, strings.Join(when, " and "), retry(r.RetryAfter)))
		}
	}
	if cfg.Robots != "" {
		parts = append(parts, fmt.Sprintf("robots.txt %q", strings.TrimSpace(cfg.Robots)))
	}
	if cfg.ClockSkew != 0 {
		sign := "+"
		if cfg.ClockSkew < 0 {
			sign = ""
		}
		parts = append(parts, fmt.Sprintf("clock %s%v", sign, cfg.ClockSkew))
	}
	return strings.Join(parts, ", ")
}
