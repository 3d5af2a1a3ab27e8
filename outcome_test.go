package ext

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// A Retry-After in seconds holds the host for the wait plus the 10% buffer, from the response's arrival.
func TestRetryAfterSecondsHoldsHost(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	res := p.ReserveAt("h", t0)
	p.ObserveAt(res, Outcome{Status: 429, Header: header("Retry-After", "10")}, t0)
	if got := p.ReserveAt("h", t0).At; !got.Equal(t0.Add(11 * time.Second)) {
		t.Errorf("next departure at %v, want t0+11s", got.Sub(t0))
	}
}

// Retry-After: 0 means now: no hold beyond the interval.
func TestRetryAfterZeroMeansNow(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), withRandom(func() float64 { return 0 }))
	res := p.ReserveAt("h", t0)
	p.ObserveAt(res, Outcome{Status: 503, Header: header("Retry-After", "0")}, t0)
	st, _ := p.HostAt("h", t0)
	if !st.RetryAfterUntil.IsZero() {
		t.Errorf("hold until %v, want none", st.RetryAfterUntil)
	}
}

// An HTTP-date is measured against the response's own Date header: a server whose clock is an hour
// ahead asking for 10 s gets 10 s (+10%), not an hour.
func TestRetryAfterDateCorrectsServerSkew(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	server := t0.Add(time.Hour)
	h := header("Date", server.Format(http.TimeFormat), "Retry-After", server.Add(10*time.Second).Format(http.TimeFormat))
	p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: h}, t0)
	st, _ := p.HostAt("h", t0)
	if want := t0.Add(11 * time.Second); !st.RetryAfterUntil.Equal(want) {
		t.Errorf("hold until t0+%v, want t0+11s", st.RetryAfterUntil.Sub(t0))
	}
}

// Garbage and absurd Retry-After values never crash: an audit event, and the algorithmic backoff.
// One above the maximum holds the host (parked) until the time it announced, saturating.
func TestRetryAfterInvalidFallsBackToBackoff(t *testing.T) {
	for _, tc := range []struct {
		value string
		event audit.Event
		hold  time.Time // zero: none
	}{
		{"soon", audit.EventHeaderInvalid, time.Time{}},
		{"-5", audit.EventHeaderInvalid, time.Time{}},
		{"99999999999999999999", audit.EventRetryAfterTooLong, maxInstant},
		{"86400", audit.EventRetryAfterTooLong, t0.Add(86400 * 1100 * time.Millisecond)},
	} {
		var buf auditBuf
		p := NewPacer(WithBaseDelay(time.Second), WithMaxDelay(30*time.Second), WithJitter(0), WithLogger(zerolog.New(&buf)))
		p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: header("Retry-After", tc.value)}, t0)
		st, _ := p.HostAt("h", t0)
		if st.AdaptiveDelay != 1500*time.Millisecond {
			t.Errorf("%q: adaptive delay %v, want the 1.5s backoff", tc.value, st.AdaptiveDelay)
		}
		if !st.RetryAfterUntil.Equal(tc.hold) {
			t.Errorf("%q: held until %v, want %v", tc.value, st.RetryAfterUntil, tc.hold)
		}
		if ev := findEvent(t, &buf, tc.event); ev == nil {
			t.Errorf("%q: no %s event in %s", tc.value, tc.event, buf.String())
		}
	}
}

// A Retry-After above the maximum is honoured in full by parking the host until the time announced;
// with IgnoreCaps it is held only up to the maximum, and its event says it was not fully honoured.
func TestRetryAfterTooLongCompliance(t *testing.T) {
	for _, ignoreCaps := range []bool{false, true} {
		var buf auditBuf
		p := NewPacer(WithLogger(zerolog.New(&buf)), WithBreaker(BreakerPolicy{IgnoreCaps: ignoreCaps}))
		p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 503, Header: header("Retry-After", "86400")}, t0)
		ev := findEvent(t, &buf, audit.EventRetryAfterTooLong)
		if ev == nil || ev[audit.FieldComplianceFlag] != !ignoreCaps {
			t.Errorf("IgnoreCaps %v: event = %v, want compliance_flag %v", ignoreCaps, ev, !ignoreCaps)
		}
	}
}

// Ten concurrent refusals of one burst back the delay off once.
func TestBurstOfRefusalsBacksOffOnce(t *testing.T) {
	p := NewPacer(WithBaseDelay(100*time.Millisecond), WithJitter(0))
	var burst []Reservation
	for range 10 {
		burst = append(burst, p.ReserveAt("h", t0))
	}
	for _, res := range burst {
		p.ObserveAt(res, Outcome{Status: 429}, t0.Add(2*time.Second))
	}
	st, _ := p.HostAt("h", t0)
	if st.AdaptiveDelay != 150*time.Millisecond {
		t.Errorf("adaptive delay %v, want 150ms", st.AdaptiveDelay)
	}
	// A request that departs after the increase can increase it again.
	p.ObserveAt(p.ReserveAt("h", t0.Add(3*time.Second)), Outcome{Status: 429}, t0.Add(4*time.Second))
	if st, _ := p.HostAt("h", t0); st.AdaptiveDelay != 225*time.Millisecond {
		t.Errorf("adaptive delay %v, want 225ms after a refusal of the next burst", st.AdaptiveDelay)
	}
}

// Refusal classes: transport errors and other 5xx back off; other 4xx are neutral.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		o       Outcome
		refused bool
		retry   bool
	}{
		{Outcome{Status: 200}, false, false},
		{Outcome{Status: 301}, false, false},
		{Outcome{Status: 404}, false, false},
		{Outcome{Status: 429}, true, true},
		{Outcome{Status: 503}, true, true},
		{Outcome{Status: 500}, true, true},
		{Outcome{Status: 504}, true, true},
		{Outcome{Status: 403, Header: header("Retry-After", "5")}, true, true},
		{Outcome{Err: fmt.Errorf("dial: %w", errTest)}, true, true},
		{Outcome{Err: fmt.Errorf("hop: %w", errWaitBeyondDeadline)}, false, true},
		{Outcome{Err: fmt.Errorf("get: %w", context.Canceled)}, false, false},
	} {
		v := classify(tc.o)
		if v.Refused != tc.refused || v.Retry != tc.retry {
			t.Errorf("classify(%d, %v) = %+v, want refused=%v retry=%v", tc.o.Status, tc.o.Err, v, tc.refused, tc.retry)
		}
	}
}

var errTest = fmt.Errorf("connection reset by peer")

// Rate-limit headers: an exhausted quota holds the host until the reset; a remaining quota is spread
// over the time to reset.
func TestRateLimitHeaders(t *testing.T) {
	p := NewPacer(WithBaseDelay(100*time.Millisecond), WithJitter(0))
	p.ObserveAt(p.ReserveAt("a", t0), Outcome{Status: 200, Header: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30")}, t0)
	if st, _ := p.HostAt("a", t0); !st.RetryAfterUntil.Equal(t0.Add(30*time.Second)) || st.Trigger != audit.TriggerRateLimit {
		t.Errorf("exhausted: hold until t0+%v (%s), want t0+30s (rate_limit)", st.RetryAfterUntil.Sub(t0), st.Trigger)
	}
	p.ObserveAt(p.ReserveAt("b", t0), Outcome{Status: 200, Header: header("RateLimit-Remaining", "10", "RateLimit-Reset", "20")}, t0)
	if st, _ := p.HostAt("b", t0); st.Interval != 1818181819 || st.Trigger != audit.TriggerRateLimit {
		t.Errorf("spread: interval %v (%s), want 1.818181819s (20 s / 11, rate_limit)", st.Interval, st.Trigger)
	}
	if st, _ := p.HostAt("b", t0.Add(21*time.Second)); st.Interval != 100*time.Millisecond {
		t.Errorf("after the reset: interval %v, want the 100ms base", st.Interval)
	}
}

// Retry-After wins over rate-limit fields of the same response.
func TestRetryAfterWinsOverRateLimit(t *testing.T) {
	p := NewPacer(WithBaseDelay(100*time.Millisecond), WithJitter(0))
	h := header("Retry-After", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "60")
	p.ObserveAt(p.ReserveAt("a", t0), Outcome{Status: 429, Header: h}, t0)
	if st, _ := p.HostAt("a", t0); !st.RetryAfterUntil.Equal(t0.Add(5500 * time.Millisecond)) {
		t.Errorf("hold until t0+%v, want the Retry-After's t0+5.5s", st.RetryAfterUntil.Sub(t0))
	}
}

// A malformed rate-limit field is ignored with an audit event.
func TestRateLimitMalformedAudited(t *testing.T) {
	var buf auditBuf
	p := NewPacer(WithBaseDelay(100*time.Millisecond), WithLogger(zerolog.New(&buf)))
	p.ObserveAt(p.ReserveAt("a", t0), Outcome{Status: 200, Header: header("X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", "10")}, t0)
	if st, _ := p.HostAt("a", t0); st.Interval != 100*time.Millisecond {
		t.Errorf("interval %v, want the base: the field is ignored", st.Interval)
	}
	if findEvent(t, &buf, audit.EventHeaderInvalid) == nil {
		t.Errorf("no header_invalid event in %s", buf.String())
	}
}

// A request already waiting when a Retry-After arrives does not leave before the window ends.
func TestWaitingRequestHonoursNewRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
		res, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		departed := make(chan time.Time)
		go func() {
			_, done2, err := p.Wait(t.Context(), "h") // waits for its slot at start+1s
			if err != nil {
				t.Error(err)
			}
			done2()
			departed <- time.Now()
		}()
		time.Sleep(500 * time.Millisecond)
		p.Observe(res, Outcome{Status: 429, Header: header("Retry-After", "4")})
		done()
		if got := (<-departed).Sub(start); got != 500*time.Millisecond+4400*time.Millisecond {
			t.Errorf("waiting request departed at +%v, want +4.9s (refusal at +0.5s, 4s + 10%%)", got)
		}
	})
}

// A refused request is retried after the host's window, tracked by c.Wait; OnError sees each refusal,
// marked as retrying, and the page arrives in the end.
func TestRefusedRequestIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var hits atomic.Int32
		h, base := n.host("retry.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			if hits.Add(1) <= 2 {
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "ok")
		})
		c, p := pacedCollector(n, WithBaseDelay(time.Second))
		var mu sync.Mutex
		var retrying []bool
		var pages int
		c.OnError(func(r *colly.Response, err error) {
			mu.Lock()
			defer mu.Unlock()
			retrying = append(retrying, p.Retrying(r))
		})
		c.OnResponse(func(r *colly.Response) { mu.Lock(); pages++; mu.Unlock() })
		visitAll(t, c, base, 1)
		if pages != 1 {
			t.Errorf("pages = %d, want 1", pages)
		}
		if fmt.Sprint(retrying) != "[true true]" {
			t.Errorf("OnError saw Retrying = %v, want [true true]", retrying)
		}
		// First retry: the 3.3 s window is longer than the doubled 2 s interval. Second: the first
		// retry, refused although it came a whole window after the refusal before it, says nothing
		// about speed (refusedSpaced): the delay stays at 2 s, and the window decides again.
		gaps := h.gaps("/p/")
		if fmt.Sprint(gaps) != "[3.3s 3.3s]" {
			t.Errorf("retry gaps = %v, want [3.3s 3.3s]", gaps)
		}
	})
}

// When retries run out, the user's OnError sees the final refusal, not marked as retrying.
func TestRetriesExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("refuse.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(2), WithLogger(zerolog.New(&buf)))
		var final []int
		c.OnError(func(r *colly.Response, err error) {
			if !p.Retrying(r) {
				final = append(final, r.StatusCode)
			}
		})
		visitAll(t, c, base, 1)
		if got := len(h.gaps("/p/")) + 1; got != 3 {
			t.Errorf("sent %d times, want 3 (1 + 2 retries)", got)
		}
		if fmt.Sprint(final) != "[503]" {
			t.Errorf("final OnError statuses = %v, want [503]", final)
		}
		if findEvent(t, &buf, audit.EventRetriesExhausted) == nil {
			t.Error("no retries_exhausted event")
		}
	})
}

// A host that answers 429 + Retry-After with its clock an hour ahead is waited for exactly
// the asked time plus the buffer, measured at the server.
func TestSkewedServerRetryAfterDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var refused atomic.Bool
		h, base := n.host("skew.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			server := time.Now().Add(time.Hour)
			w.Header().Set("Date", server.Format(http.TimeFormat))
			if !refused.Swap(true) {
				w.Header().Set("Retry-After", server.Add(20*time.Second).Format(http.TimeFormat))
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "ok")
		})
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 2)
		if gaps := h.gaps("/p/"); len(gaps) == 0 || gaps[0] != 22*time.Second {
			t.Errorf("first request after the refusal came %v later, want 22s (20s + 10%%)", gaps)
		}
	})
}

// Rate-limit headers pace a real crawl: 4 remaining for the 8 s to the reset are spread at
// 1.6 s (8 s / 5: the 4 before the reset, the next at it).
func TestRateLimitHeadersPaceCrawl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("rl.test", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-RateLimit-Limit", "100")
			w.Header().Set("X-RateLimit-Remaining", "4")
			w.Header().Set("X-RateLimit-Reset", strconv.Itoa(8))
			fmt.Fprint(w, "ok")
		})
		c, _ := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots())
		c.Async = false
		visitAll(t, c, base, 4)
		assertGaps(t, h.gaps("/p/"), 1600*time.Millisecond)
	})
}

// issue 10 item 3: an exhausted rate limit costs one window, not two. The hold lasts until the reset;
// after it the interval is the next window's quota when the server published it (RateLimit-Policy),
// else only the base until a response says more. The exhausted window's reset used to stay the
// interval, so the request after the reset left at +10 s and the one after it at +20 s.
func TestExhaustedRateLimitCostsOneWindow(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		next time.Duration // the gap after the first departure past the reset
	}{
		{"x-ratelimit", header("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "10"), 100 * time.Millisecond},
		{"draft", header("RateLimit-Limit", "60", "RateLimit-Remaining", "0", "RateLimit-Reset", "10"), 100 * time.Millisecond},
		{"structured with policy", header("RateLimit", `"default";r=0;t=10`, "RateLimit-Policy", `"default";q=20;w=10`), 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPacer(WithBaseDelay(100*time.Millisecond), WithJitter(0))
			p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 200, Header: tt.h}, t0)
			first := p.ReserveAt("h", t0)
			second := p.ReserveAt("h", t0)
			if want := t0.Add(10 * time.Second); !first.At.Equal(want) {
				t.Errorf("first departure at t0+%v, want the reset at t0+10s", first.At.Sub(t0))
			}
			if got := second.At.Sub(first.At); got != tt.next {
				t.Errorf("second departure %v after the first, want %v", got, tt.next)
			}
		})
	}
}

// issue 10 item 10: Retry-After: 0 (or a date in the past) on every 429 sets no hold, and the audit
// says so: retry_after_now, never a retry_after_honoured of 0 ms.
func TestRetryAfterZeroLogsNoHold(t *testing.T) {
	var buf auditBuf
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithLogger(zerolog.New(&buf)))
	past := t0.Add(-time.Minute).Format(http.TimeFormat)
	for i, ra := range []string{"0", "0", past} {
		now := t0.Add(time.Duration(i) * time.Minute)
		p.ObserveAt(p.ReserveAt("h", now), Outcome{Status: 429, Header: header("Retry-After", ra)}, now)
		if st, _ := p.HostAt("h", now); !st.RetryAfterUntil.IsZero() {
			t.Errorf("Retry-After %q: hold until %v, want none", ra, st.RetryAfterUntil)
		}
	}
	if got := countEvents(t, &buf, audit.EventRetryAfterHonoured); got != 0 {
		t.Errorf("%d retry_after_honoured events, want none: no hold was set", got)
	}
	if got := countEvents(t, &buf, audit.EventRetryAfterNow); got != 3 {
		t.Errorf("%d retry_after_now events, want 3 in %s", got, buf.String())
	}
}

// A host whose 503s do not depend on the pace (every third request, whatever the spacing) is read as
// noise within a few backoffs: the trail says so (refusals_uncorrelated, compliant, with the interval
// set), and from then on its refusals leave the delay alone.
func TestNoiseModeInTheTrail(t *testing.T) {
	const base = 200 * time.Millisecond
	var buf auditBuf
	p := NewPacer(WithBaseDelay(base), WithJitter(0), WithLogger(zerolog.New(&buf)))
	now := t0
	seen := -1
	for i := range 60 {
		res := p.ReserveAt("h", now)
		now = later(res.At, now).Add(20 * time.Millisecond)
		status := http.StatusOK
		if i%3 == 2 {
			status = http.StatusServiceUnavailable
		}
		p.ObserveAt(res, Outcome{Status: status, Latency: 20 * time.Millisecond}, now)
		if st, _ := p.HostAt("h", now); seen >= 0 && st.AdaptiveDelay > 2*base {
			t.Fatalf("request %d, after the noise was seen at %d: adaptive delay %v, want ≤ %v", i, seen, st.AdaptiveDelay, 2*base)
		}
		if seen < 0 && findEvent(t, &buf, audit.EventRefusalsUncorrelated) != nil {
			seen = i
		}
	}
	ev := findEvent(t, &buf, audit.EventRefusalsUncorrelated)
	if ev == nil {
		t.Fatalf("no %s event in 60 requests, a third refused at every pace", audit.EventRefusalsUncorrelated)
	}
	if ev[audit.FieldTrigger] != string(audit.TriggerRefusal) || ev[audit.FieldComplianceFlag] != true || ev[audit.FieldComputedDelay] == nil {
		t.Errorf("%s = %v; want trigger refusal, compliant, the interval set", audit.EventRefusalsUncorrelated, ev)
	}
	if st, _ := p.HostAt("h", now); st.Noise != audit.NoiseSeen {
		t.Errorf("HostSnapshot.Noise = %d after the noise was seen, want audit.NoiseSeen", st.Noise)
	}
	t.Logf("noise seen at request %d", seen)
}
