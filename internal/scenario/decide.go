package scenario

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// reply is what a host answers to one request, decided at its arrival.
type reply struct {
	status  int
	header  http.Header
	body    []byte
	latency time.Duration // before the headers are written, after queueWait
	// queueWait is how long the page waits for a free worker (HostConfig.Workers) before its latency.
	queueWait time.Duration
	// hang, when positive, answers nothing: the request is held that long, then its connection is
	// dropped (a timeout; status is 0).
	hang time.Duration
}

// state is a host's decision state. It is not safe for concurrent use; Host guards it.
type state struct {
	cfg      HostConfig     // normalized
	start    time.Time      // arrival of the first page request; zero before
	requests int            // page requests so far, refused ones included
	bucket   bucket         // if cfg.Capacity != nil
	window   int64          // index of the current rate-limit window
	used     int            // requests served in it
	windows  []Window       // Retry-After windows announced
	free     []time.Time    // if cfg.Workers > 0: when each worker is next free
	freq     freqCounter    // if cfg.Sliding != nil
	attempts map[string]int // if cfg.Flaky != nil: requests per page path
	firsts   int            // pages requested at least once
}

func newState(cfg HostConfig) *state {
	s := &state{cfg: cfg}
	if c := cfg.Capacity; c != nil {
		s.bucket = newBucket(c.Rate, c.Burst)
	}
	s.free = make([]time.Time, cfg.Workers)
	if w := cfg.Sliding; w != nil {
		s.freq.periodMsec = max(w.Period.Milliseconds(), 1)
	}
	if cfg.Flaky != nil {
		s.attempts = map[string]int{}
	}
	return s
}

// serverTime is the host's (skewed) clock reading at now.
func (s *state) serverTime(now time.Time) time.Time {
	return now.Add(s.cfg.ClockSkew)
}

// decideAt decides the reply to a request for path arriving at now, and logs any Retry-After
// window it announces.
func (s *state) decideAt(now time.Time, path string) reply {
	h := http.Header{}
	h.Set("Date", httpDate(s.serverTime(now)))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if path == RobotsPath {
		if s.cfg.Robots == "" {
			return reply{status: http.StatusNotFound, header: h, body: []byte("no robots.txt\n")}
		}
		return reply{status: http.StatusOK, header: h, body: []byte(s.cfg.Robots)}
	}
	page, ok := pageIndex(path, s.cfg.Pages)
	if !ok {
		return reply{status: http.StatusNotFound, header: h, body: []byte("not found\n")}
	}
	if s.start.IsZero() {
		s.start = now
	}
	s.requests++
	elapsed := max(now.Sub(s.start), 0)

	for _, r := range s.cfg.Refusals {
		if r.matches(s.requests, elapsed) {
			return s.refuse(now, path, r.Status, r.RetryAfter, h)
		}
	}

	if f := s.cfg.Flaky; f != nil {
		s.attempts[path]++
		if s.attempts[path] == 1 {
			s.firsts++
		}
		if kind, refused := f.refusal(s.firsts - 1); refused && s.attempts[path] == 1 {
			if kind == FlakyTimeout {
				return reply{header: h, hang: f.Hold}
			}
			retry := time.Duration(0)
			if kind == FlakyTooMany {
				retry = f.RetryAfter
			}
			return s.refuse(now, path, kind.status(), retry, h)
		}
	}

	rl := s.cfg.RateLimit
	var windowEnd time.Time
	if rl != nil {
		k := int64(elapsed / rl.Window)
		if k > s.window {
			s.window, s.used = k, 0
		}
		windowEnd = s.start.Add(time.Duration(s.window+1) * rl.Window)
		if rl.Enforce && s.used >= rl.Limit {
			s.rateLimitHeaders(h, now, windowEnd)
			return s.refuse(now, path, http.StatusTooManyRequests, max(windowEnd.Sub(now), time.Second), h)
		}
	}
	if w := s.cfg.Sliding; w != nil && s.freq.addAt(now) > w.Limit {
		return s.refuse(now, path, w.Status, w.RetryAfter, h)
	}
	if c := s.cfg.Capacity; c != nil && c.StepAfter > 0 && elapsed >= c.StepAfter && s.bucket.rate != c.StepRate {
		s.bucket.setRateAt(s.start.Add(c.StepAfter), c.StepRate)
	}
	if c := s.cfg.Capacity; c != nil && !s.bucket.takeAt(now) {
		if rl != nil {
			s.rateLimitHeaders(h, now, windowEnd)
		}
		return s.refuse(now, path, c.Status, c.RetryAfter, h)
	}
	if rl != nil {
		s.used++
		s.rateLimitHeaders(h, now, windowEnd)
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	return reply{
		status:    http.StatusOK,
		header:    h,
		body:      pageBody(s.cfg.Name, page, s.cfg.Pages, s.cfg.Links),
		latency:   s.cfg.Latency,
		queueWait: s.queueAt(now),
	}
}

// queueAt books the first free worker for a page arriving at now and returns how long the page waits
// for it (0 without workers). Pages book in the order they are decided, which is their order of
// arrival: the queue is FIFO, and a worker serves from the later of now and when it comes free.
func (s *state) queueAt(now time.Time) time.Duration {
	if len(s.free) == 0 {
		return 0
	}
	w := 0
	for i, t := range s.free {
		if t.Before(s.free[w]) {
			w = i
		}
	}
	start := now
	if s.free[w].After(now) {
		start = s.free[w]
	}
	s.free[w] = start.Add(s.cfg.Latency)
	return start.Sub(now)
}

// matches reports whether the n-th page request, arriving elapsed after the first, is refused.
func (r Refusal) matches(n int, elapsed time.Duration) bool {
	if n <= r.First {
		return true
	}
	if r.For <= 0 || elapsed < r.After {
		return false
	}
	off := elapsed - r.After
	if r.Repeat > 0 {
		off %= r.Repeat
	}
	return off < r.For
}

// refuse builds a refusal, announcing retryAfter (none if zero) and logging its window.
func (s *state) refuse(now time.Time, path string, status int, retryAfter time.Duration, h http.Header) reply {
	if retryAfter > 0 {
		value, until := s.retryAfter(now, retryAfter)
		h.Set("Retry-After", value)
		s.windows = append(s.windows, Window{Issued: now, Until: until, Path: path, Status: status})
	}
	return reply{status: status, header: h, body: []byte(http.StatusText(status) + "\n")}
}

// retryAfter renders a Retry-After of d at now, rounded up to whole seconds, and the local instant
// it ends. As an HTTP-date it reads the skewed clock, and the end is that date minus the skew.
func (s *state) retryAfter(now time.Time, d time.Duration) (value string, until time.Time) {
	if !s.cfg.RetryAfterDate {
		secs := ceilSeconds(d)
		return strconv.FormatInt(secs, 10), now.Add(time.Duration(secs) * time.Second)
	}
	at := ceilSecond(s.serverTime(now).Add(d))
	return httpDate(at), at.Add(-s.cfg.ClockSkew)
}

// rateLimitHeaders sets the quota headers for a window ending at end.
func (s *state) rateLimitHeaders(h http.Header, now, end time.Time) {
	rl := s.cfg.RateLimit
	remaining := max(rl.Limit-s.used, 0)
	reset := max(ceilSeconds(end.Sub(now)), 1)
	window := ceilSeconds(rl.Window)
	switch rl.Style {
	case IETF:
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, remaining, reset))
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, rl.Limit, window))
	case IETFDraft:
		h.Set("RateLimit-Limit", strconv.Itoa(rl.Limit))
		h.Set("RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
	default:
		h.Set("X-RateLimit-Limit", strconv.Itoa(rl.Limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		if rl.ResetEpoch {
			h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSecond(s.serverTime(end)).Unix(), 10))
		} else {
			h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		}
	}
}

// httpDate formats t as an IMF-fixdate (second resolution, truncated).
func httpDate(t time.Time) string {
	return t.UTC().Format(http.TimeFormat)
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if tt := t.Truncate(time.Second); !tt.Equal(t) {
		return tt.Add(time.Second)
	}
	return t.Round(0)
}
