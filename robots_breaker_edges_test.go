package ext

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/breaker"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// Where robots.txt, the breaker and Retry-After meet: a Crawl-delay obeyed rather than punished, one
// over the cap parked until robots.txt asks for less, a Retry-After over the cap parked until the time
// announced, an unreachable robots.txt holding pages rather than disallowing them for good.

// mutableRobots serves robots.txt from body (or, when status answers non-zero for the n-th fetch,
// that status) and "ok" pages, counting the robots.txt fetches.
type mutableRobots struct {
	body    atomic.Value // string
	fetches atomic.Int32
	status  func(n int) int // the status of the n-th fetch (1-based); 0: 200 with body; nil: always 200
}

func newMutableRobots(body string) *mutableRobots {
	m := &mutableRobots{}
	m.body.Store(body)
	return m
}

func (m *mutableRobots) handler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/robots.txt" {
		fmt.Fprint(w, "<html>ok</html>")
		return
	}
	n := int(m.fetches.Add(1))
	if m.status != nil {
		switch s := m.status(n); s {
		case 0:
		case -1: // a network error: the connection is dropped
			panic(http.ErrAbortHandler)
		case -2: // no answer until the client gives up
			select {
			case <-r.Context().Done():
			case <-time.After(time.Hour):
			}
			return
		default:
			w.WriteHeader(s)
			return
		}
	}
	fmt.Fprint(w, m.body.Load().(string))
}

// robotsArrivals returns when robots.txt was requested.
func robotsArrivals(h *fakeHost) []time.Time {
	var out []time.Time
	for _, a := range h.log() {
		if a.path == "/robots.txt" {
			out = append(out, a.at)
		}
	}
	return out
}

// TestCrawlDelayAboveThresholdDoesNotTripBreaker: an honoured Crawl-delay above the breaker's threshold
// is obeyed, not punished: a host asking for 50 s between requests is crawled at 50 s for minutes,
// never parked.
func TestCrawlDelayAboveThresholdDoesNotTripBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("slowbot.test", robotsSite(200, "User-agent: *\nCrawl-delay: 50\n", nil))
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)))
		visitAll(t, c, base, 6) // 250 s at an interval above the 45 s threshold
		assertGaps(t, h.gaps("/p/"), 50*time.Second)
		if st, _ := p.Host("slowbot.test"); st.Breaker != audit.BreakerClosed {
			t.Errorf("breaker %v, want closed: a published Crawl-delay is not a refusal", st.Breaker)
		}
		if ev := findEvent(t, &buf, audit.EventBreakerOpened); ev != nil {
			t.Errorf("breaker opened: %v", ev[audit.FieldDetail])
		}
		if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 0 {
			t.Errorf("%d requests deferred, want 0", len(d))
		}
	})
}

// TestSustainedDelayTripsOnlyWhenRefusalsDroveIt: neither a rate-limit interval nor the user's own base
// delay trips the sustained-delay rule; an adaptive delay that refusals drove above the threshold still
// does.
func TestSustainedDelayTripsOnlyWhenRefusalsDroveIt(t *testing.T) {
	pol := WithBreaker(BreakerPolicy{Failures: -1}) // only the sustained-delay rule
	// A host whose quota spreads at 50 s (1 left, reset in 100 s), answering 200 for 5 minutes.
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), pol)
	for i := range 7 {
		at := t0.Add(time.Duration(i) * 50 * time.Second)
		p.ObserveAt(p.ReserveAt("rl", at), Outcome{Status: 200, Header: header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "100")}, at)
	}
	if st, _ := p.HostAt("rl", t0.Add(300*time.Second)); st.Breaker != audit.BreakerClosed || st.RateLimitInterval != 50*time.Second {
		t.Errorf("rate-limited host: breaker %v, rate interval %v; want closed at 50s", st.Breaker, st.RateLimitInterval)
	}
	// A base delay of 60 s (a site's terms), 200s for 5 minutes.
	p = NewPacer(WithBaseDelay(time.Minute), WithJitter(0), pol)
	for i := range 6 {
		at := t0.Add(time.Duration(i) * time.Minute)
		p.ObserveAt(p.ReserveAt("tos", at), Outcome{Status: 200}, at)
	}
	if st, _ := p.HostAt("tos", t0.Add(5*time.Minute)); st.Breaker != audit.BreakerClosed {
		t.Errorf("60 s base delay: breaker %v, want closed", st.Breaker)
	}
	// Refusals every 30 s back the adaptive delay off past 45 s (×1.5 each, ceiling 2 min) after 10 of
	// them: 2 min later, parked.
	var buf auditBuf
	p = NewPacer(WithBaseDelay(time.Second), WithMaxDelay(2*time.Minute), WithJitter(0), pol, WithLogger(zerolog.New(&buf)))
	for i := range 16 {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		p.ObserveAt(p.ReserveAt("refuses", at), Outcome{Status: 429}, at)
	}
	if st, _ := p.HostAt("refuses", t0.Add(8*time.Minute)); st.Breaker != audit.BreakerOpen {
		t.Errorf("refusing host: breaker %v, want open", st.Breaker)
	}
	if ev := findEvent(t, &buf, audit.EventBreakerOpened); ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), string(audit.TripSustainedDelay)) {
		t.Errorf("breaker_opened = %v, want it for %s", ev, audit.TripSustainedDelay)
	}
}

// TestCrawlDelayAboveCapParksUntilRobotsReadAgainOnTTL: a Crawl-delay above the cap parks the host
// until its robots.txt asks for less, and robots.txt is read again on its TTL whatever the breaker
// says: after 50 h still over the cap, 3 reads (0, 24 and 48 h) and no page; once it asks for 2 s, the
// next read brings the host back and its pages drain.
func TestCrawlDelayAboveCapParksUntilRobotsReadAgainOnTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\nCrawl-delay: 600\n")
		h, base := n.host("slowbot.test", robots.handler)
		c, p := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 3)
		for i := range 50 {
			time.Sleep(time.Hour)
			if err := c.Visit(fmt.Sprintf("%s/hour/%d", base, i)); err != nil {
				t.Fatal(err)
			}
			c.Wait()
		}
		if got := len(pageArrivals(h)); got != 0 {
			t.Errorf("%d pages sent to a host whose Crawl-delay is over the cap, want 0", got)
		}
		if got := robots.fetches.Load(); got != 3 {
			t.Errorf("robots.txt read %d times in 50 h, want 3 (at 0, 24 and 48 h)", got)
		}
		robots.body.Store("User-agent: *\nCrawl-delay: 2\n")
		time.Sleep(24 * time.Hour)
		if err := c.Visit(base + "/back"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		if got := robots.fetches.Load(); got != 4 {
			t.Errorf("robots.txt read %d times, want 4", got)
		}
		st, _ := p.Host("slowbot.test")
		if st.Breaker != audit.BreakerClosed || st.CrawlDelay != 2*time.Second {
			t.Errorf("breaker %v, Crawl-delay %v; want closed, 2s", st.Breaker, st.CrawlDelay)
		}
		if got, err := p.Drain(t.Context(), c); got != 53 || err != nil {
			t.Errorf("Drain = %d, %v; want the 53 deferred pages", got, err)
		}
		c.Wait()
		pages := pageArrivals(h)
		if len(pages) != 54 {
			t.Fatalf("%d pages fetched, want 54", len(pages))
		}
		var gaps []time.Duration
		for i := 1; i < len(pages); i++ {
			gaps = append(gaps, pages[i].at.Sub(pages[i-1].at))
		}
		assertGaps(t, gaps, 2*time.Second)
	})
}

// TestQueueUnparksHostWhenRobotsReadAgainOnTTL, through the host-aware queue: a host parked over the
// Crawl-delay cap comes back when its robots.txt, read again on its TTL, asks for less.
func TestQueueUnparksHostWhenRobotsReadAgainOnTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\nCrawl-delay: 600\n")
		h, base := n.host("slowbot.test", robots.handler)
		c, _, q := queueCollector(n, 2, WithBaseDelay(time.Second))
		for i := range 3 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", base, i))
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = q.Run(c)
		}()
		time.Sleep(time.Hour)
		if got := len(pageArrivals(h)); got != 0 {
			t.Errorf("%d pages sent over the cap", got)
		}
		robots.body.Store("User-agent: *\nCrawl-delay: 2\n")
		time.Sleep(24 * time.Hour)
		select {
		case <-done:
		default:
			q.Stop()
			<-done
			t.Fatalf("queue still running after the robots.txt TTL; %d robots.txt reads, %d pages", robots.fetches.Load(), len(pageArrivals(h)))
		}
		if got := len(pageArrivals(h)); got != 3 {
			t.Errorf("%d pages fetched, want 3", got)
		}
		if got := robots.fetches.Load(); got != 2 {
			t.Errorf("robots.txt read %d times, want 2", got)
		}
	})
}

// TestEvictionKeepsCrawlDelay: a host evicted after 31 idle minutes, without a store, keeps its
// Crawl-delay: the robots cache still knows it (and robots.txt is not due again).
func TestEvictionKeepsCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var fetches atomic.Int32
		h, base := n.host("cd.test", robotsSite(200, "User-agent: *\nCrawl-delay: 10\n", &fetches))
		c, p := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 2)
		time.Sleep(31 * time.Minute)
		if got := p.evictIdleAt(time.Now()); got != 1 {
			t.Fatalf("evicted %d hosts, want 1", got)
		}
		for i := range 3 {
			if err := c.Visit(fmt.Sprintf("%s/again/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Wait()
		assertGaps(t, h.gaps("/again/"), 10*time.Second)
		if st, _ := p.Host("cd.test"); st.CrawlDelay != 10*time.Second {
			t.Errorf("Crawl-delay %v after eviction, want 10s", st.CrawlDelay)
		}
		if got := fetches.Load(); got != 1 {
			t.Errorf("robots.txt read %d times, want 1 (still fresh)", got)
		}
	})
}

// TestQueueEvictionKeepsClampedCrawlDelay: the clamp is restored too (compliance_flag stays false with
// IgnoreCaps), and through the queue, which reads the schedule before any request of the new host state
// departs.
func TestQueueEvictionKeepsClampedCrawlDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("cd.test", robotsSite(200, "User-agent: *\nCrawl-delay: 100\n", nil))
		var buf auditBuf
		c, p, q := queueCollector(n, 2, WithBaseDelay(time.Second), WithMaxCrawlDelay(10*time.Second),
			WithBreaker(BreakerPolicy{IgnoreCaps: true}), WithLogger(zerolog.New(&buf)))
		for i := range 2 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", base, i))
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(31 * time.Minute)
		if got := p.evictIdleAt(time.Now()); got != 1 {
			t.Fatalf("evicted %d hosts, want 1", got)
		}
		for i := range 3 {
			_ = q.AddURL(fmt.Sprintf("%s/again/%d", base, i))
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		assertGaps(t, h.gaps("/again/"), 10*time.Second)
		if ev := lastEvent(t, &buf, audit.EventDelayApplied); ev == nil || ev[audit.FieldComplianceFlag] != false {
			t.Errorf("last delay_applied = %v, want compliance_flag false: the Crawl-delay is still clamped", ev)
		}
	})
}

// retryAfterEarliest returns when, after a refusal with Retry-After value at t0, a request to the host
// can depart: the hold, and for a parked host not before its breaker lets a probe through.
func retryAfterEarliest(t *testing.T, value string, opts ...Option) (time.Time, *Pacer) {
	t.Helper()
	p := NewPacer(append([]Option{WithBaseDelay(time.Second), WithJitter(0)}, opts...)...)
	p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: header("Retry-After", value)}, t0)
	st, _ := p.HostAt("h", t0)
	h, _ := p.hosts.Load("h")
	h.mu.Lock()
	earliest := st.RetryAfterUntil
	if h.brk.State() == audit.BreakerOpen {
		earliest = later(earliest, h.brk.ReopensAt(p.cfg.breaker.Cooldown))
	}
	h.mu.Unlock()
	return earliest, p
}

// TestLongerRetryAfterNeverWaitsLess: a longer Retry-After never gets a shorter wait. Above the cap (10
// min) the host is parked until the time announced (+10 %), not merely for the breaker's 5-minute
// cool-down, and held until then too; arithmetic saturates.
func TestLongerRetryAfterNeverWaitsLess(t *testing.T) {
	prev := t0
	for _, v := range []string{"1", "60", "540", "599", "600", "601", "660", "3600", "86400", "1000000", "99999999999999999999"} {
		earliest, p := retryAfterEarliest(t, v)
		if earliest.Before(prev) {
			t.Errorf("Retry-After %s: earliest departure t0+%v, before that of a shorter value (t0+%v)", v, earliest.Sub(t0), prev.Sub(t0))
		}
		prev = earliest
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil { // overflowing: saturated, never in the past
			if !earliest.Equal(maxInstant) {
				t.Errorf("Retry-After %s: earliest departure %v, want the saturated %v", v, earliest, maxInstant)
			}
			continue
		}
		if want := t0.Add(time.Duration(secs) * 1100 * time.Millisecond); !earliest.Equal(want) {
			t.Errorf("Retry-After %s: earliest departure t0+%v, want t0+%v", v, earliest.Sub(t0), want.Sub(t0))
		}
		h, _ := p.hosts.Load("h")
		afterCooldown := t0.Add(defaultBreakerCooldown + time.Second)
		if parked := h.parked(afterCooldown, p.cfg.breaker); parked != (secs > 600 && afterCooldown.Before(earliest)) {
			t.Errorf("Retry-After %s: parked %v after the cool-down", v, parked)
		}
		if secs > 600 {
			if adm, _, _ := h.admitAt(earliest.Add(-time.Millisecond), p.cfg.breaker); adm != breaker.Defer {
				t.Errorf("Retry-After %s: a departure just before t0+%v is %v, want deferred", v, earliest.Sub(t0), adm)
			}
			if adm, _, _ := h.admitAt(earliest, p.cfg.breaker); adm != breaker.AdmittedProbe {
				t.Errorf("Retry-After %s: at t0+%v the departure is %v, want the probe", v, earliest.Sub(t0), adm)
			}
		}
	}
	// IgnoreCaps crawls on, held as long as the cap allows: still never less than a value within it.
	capped, _ := retryAfterEarliest(t, "660", WithBreaker(BreakerPolicy{IgnoreCaps: true}))
	within, _ := retryAfterEarliest(t, "540", WithBreaker(BreakerPolicy{IgnoreCaps: true}))
	if want := t0.Add(660 * time.Second); !capped.Equal(want) || capped.Before(within) {
		t.Errorf("IgnoreCaps: 660 s held until t0+%v, 540 s until t0+%v; want t0+11m0s, not before", capped.Sub(t0), within.Sub(t0))
	}
}

// TestRetryAfterAboveCapParksUntilAnnounced, through Colly: after a 429 with Retry-After 660 (above the
// 10 min cap), the next page is deferred, Drain leaves it during the whole announced window (past the
// breaker's cool-down), and it is sent exactly when the window (+10 %) ends. Retry-After 540 holds the
// next page 594 s.
func TestRetryAfterAboveCapParksUntilAnnounced(t *testing.T) {
	for _, tc := range []struct {
		value  string
		wait   time.Duration
		parked bool
	}{
		{"540", 594 * time.Second, false},
		{"660", 726 * time.Second, true},
		{"86400", 95040 * time.Second, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				var refused atomic.Bool
				h, base := n.host("ra.test", func(w http.ResponseWriter, r *http.Request) {
					switch {
					case r.URL.Path == "/robots.txt":
						http.NotFound(w, r)
					case !refused.Swap(true):
						w.Header().Set("Retry-After", tc.value)
						w.WriteHeader(http.StatusTooManyRequests)
					default:
						fmt.Fprint(w, "ok")
					}
				})
				var buf auditBuf
				c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0), WithLogger(zerolog.New(&buf)))
				visitAll(t, c, base, 1)
				refusedAt := pageArrivals(h)[0].at
				if err := c.Visit(base + "/next"); err != nil {
					t.Fatal(err)
				}
				if !tc.parked {
					c.Wait()
				} else {
					c.Wait()
					time.Sleep(tc.wait - time.Second - time.Since(refusedAt))
					if got, _ := p.Drain(t.Context(), c); got != 0 {
						t.Errorf("Drain 1 s before the announced time handed back %d, want 0", got)
					}
					time.Sleep(time.Second)
					if got, _ := p.Drain(t.Context(), c); got != 1 {
						t.Errorf("Drain at the announced time handed back %d, want 1", got)
					}
					c.Wait()
					ev := findEvent(t, &buf, audit.EventRetryAfterTooLong)
					if ev == nil || ev[audit.FieldComplianceFlag] != true || !strings.Contains(ev[audit.FieldDetail].(string), "parked") {
						t.Errorf("retry_after_too_long = %v, want it to say the host is parked, compliance_flag true", ev)
					}
				}
				if got := len(pageArrivals(h)); got != 2 {
					t.Fatalf("%d pages, want 2", got)
				}
				// The first request after the refusal: the page, or robots.txt when its TTL ran out
				// meanwhile (read first, the page following at the interval).
				var next arrival
				for _, a := range h.log() {
					if a.at.After(refusedAt) {
						next = a
						break
					}
				}
				if got := next.at.Sub(refusedAt); got != tc.wait {
					t.Errorf("next request (%s) %v after the refusal, want %v", next.path, got, tc.wait)
				}
			})
		})
	}
}

// TestUnreachableRobotsHoldsPages: robots.txt unreachable (503, 429, a dropped connection, no answer)
// means disallow for now: the host's pages wait, holding no in-flight slot, while robots.txt is asked
// again after 1 s, 2 s, 4 s… (paced like any departure); each try is audited with its attempt and next
// try; once it is read, every page goes, none lost.
func TestUnreachableRobotsHoldsPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{
		{"503", http.StatusServiceUnavailable},
		{"429", http.StatusTooManyRequests},
		{"network error", -1},
		{"no answer", -2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				robots := newMutableRobots("User-agent: *\nCrawl-delay: 2\n")
				robots.status = func(n int) int {
					if n <= 3 {
						return tc.status
					}
					return 0
				}
				h, base := n.host("down.test", robots.handler)
				var buf auditBuf
				c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)))
				start := time.Now()
				// While the pages wait, only the robots.txt read may hold an in-flight slot.
				var maxInFlight atomic.Int32
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						select {
						case <-stop:
							return
						case <-time.After(100 * time.Millisecond):
						}
						if st, ok := p.Host("down.test"); ok && robots.fetches.Load() < 4 { // robots.txt not read yet
							maxInFlight.Store(max(maxInFlight.Load(), int32(st.InFlight)))
						}
					}
				}()
				visitAll(t, c, base, 3)
				close(stop)
				<-sampled
				if got := maxInFlight.Load(); got > 1 {
					t.Errorf("%d in-flight slots held while the pages waited for robots.txt, want at most 1 (the read)", got)
				}
				tries := robotsArrivals(h)
				if len(tries) != 4 {
					t.Fatalf("robots.txt asked %d times, want 4 (3 failures, then read)", len(tries))
				}
				for i, min := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
					if got := tries[i+1].Sub(tries[i]); got < min {
						t.Errorf("try %d came %v after try %d, want at least %v", i+2, got, i+1, min)
					}
				}
				pages := pageArrivals(h)
				if len(pages) != 3 {
					t.Fatalf("%d pages fetched, want 3", len(pages))
				}
				if pages[0].at.Before(tries[3]) {
					t.Errorf("a page left at +%v, before robots.txt was read at +%v", pages[0].at.Sub(start), tries[3].Sub(start))
				}
				var details []string
				for _, e := range events(t, &buf) {
					if e[audit.FieldEvent] == string(audit.EventRobotsUnavailable) {
						details = append(details, e[audit.FieldDetail].(string))
					}
				}
				if len(details) != 3 {
					t.Fatalf("%d robots_unavailable events, want one per failed try: %q", len(details), details)
				}
				for i, d := range details {
					if !strings.Contains(d, fmt.Sprintf("attempt %d", i+1)) || !strings.Contains(d, "next try at") {
						t.Errorf("robots_unavailable %d: %q, want its attempt number and next try", i+1, d)
					}
				}
				if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 0 {
					t.Errorf("%d deferred, want 0", len(d))
				}
			})
		})
	}
}

// TestUnreachableRobotsParksAfterLimit: after robotsUnreachableLimit of failures the host's breaker
// opens (robots_unreachable): its pages are deferred, nothing lost, the alert fires; after the
// cool-down the breaker's probe is the next robots.txt read, and once it succeeds the deferred pages
// go.
func TestUnreachableRobotsParksAfterLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var up atomic.Bool
		robots := newMutableRobots("User-agent: *\n")
		robots.status = func(int) int {
			if up.Load() {
				return 0
			}
			return http.StatusServiceUnavailable
		}
		h, base := n.host("down.test", robots.handler)
		var buf auditBuf
		var al alerts
		// Failures < 0: only the robots.txt limit decides here.
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)), WithAlert(al.add),
			WithBreaker(BreakerPolicy{Failures: -1, Cooldown: time.Minute}))
		start := time.Now()
		visitAll(t, c, base, 3)
		if took := time.Since(start); took < robotsUnreachableLimit {
			t.Errorf("pages deferred after %v, want them held %v", took, robotsUnreachableLimit)
		}
		if got := len(pageArrivals(h)); got != 0 {
			t.Errorf("%d pages sent without robots.txt, want 0", got)
		}
		if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 3 {
			t.Errorf("%d deferred, want 3", len(d))
		}
		if a := fmt.Sprint(al.events()); a != "["+string(audit.EventBreakerOpened)+"]" {
			t.Errorf("alerts %s, want one breaker_opened", a)
		}
		if ev := findEvent(t, &buf, audit.EventBreakerOpened); ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), string(audit.TripRobotsUnreachable)) {
			t.Errorf("breaker_opened = %v, want it for %s", ev, audit.TripRobotsUnreachable)
		}
		tries := len(robotsArrivals(h))
		if tries < 10 || tries > 20 {
			t.Errorf("robots.txt asked %d times in %v, want a backoff (1 s doubling to 5 min): 10 to 20", tries, robotsUnreachableLimit)
		}
		up.Store(true)
		time.Sleep(time.Minute)
		if got, err := p.Drain(t.Context(), c); got != 3 || err != nil {
			t.Errorf("Drain = %d, %v; want 3", got, err)
		}
		c.Wait()
		log := h.log()
		if got := log[tries].path; got != "/robots.txt" {
			t.Errorf("first request after the cool-down: %s, want the robots.txt probe", got)
		}
		if got := len(pageArrivals(h)); got != 3 {
			t.Errorf("%d pages fetched after robots.txt came back, want 3", got)
		}
		if st, _ := p.Host("down.test"); st.Breaker != audit.BreakerClosed {
			t.Errorf("breaker %v, want closed", st.Breaker)
		}
	})
}

// TestQueueDoesNotSpinOnUnreachableRobots: the host-aware queue does not spin on a host whose
// robots.txt is unreachable: the host is not ready until its next try, one worker is enough for the
// other host meanwhile, and the held host's pages go once robots.txt is read.
func TestQueueDoesNotSpinOnUnreachableRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\n")
		robots.status = func(n int) int {
			if n <= 4 {
				return http.StatusServiceUnavailable
			}
			return 0
		}
		down, downBase := n.host("down.test", robots.handler)
		ok, okBase := n.host("ok.test", slowPage(0))
		c, _, q := queueCollector(n, 1, WithBaseDelay(time.Second))
		for i := range 3 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", downBase, i))
		}
		for i := range 5 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", okBase, i))
		}
		start := time.Now()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := robots.fetches.Load(); got != 5 {
			t.Errorf("robots.txt of the unreachable host asked %d times, want 5 (4 failures, then read)", got)
		}
		okPages := pageArrivals(ok)
		if len(okPages) != 5 || okPages[4].at.Sub(start) > 6*time.Second {
			t.Errorf("ok.test: %d pages, the last at +%v; want 5 within its own schedule", len(okPages), okPages[len(okPages)-1].at.Sub(start))
		}
		tries := robotsArrivals(down)
		if pages := pageArrivals(down); len(pages) != 3 || pages[0].at.Before(tries[len(tries)-1]) {
			t.Errorf("down.test: %d pages, want 3 after robots.txt was read", len(pages))
		}
	})
}

// TestUnreachableRobotsEarlierCopyStillApplies: a robots.txt read before and unreachable now still
// applies (RFC 9309 §2.4): pages are not held, its Crawl-delay stays in force, and the failure is
// audited.
func TestUnreachableRobotsEarlierCopyStillApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\nCrawl-delay: 2\n")
		var down atomic.Bool
		robots.status = func(int) int {
			if down.Load() {
				return http.StatusServiceUnavailable
			}
			return 0
		}
		h, base := n.host("cd.test", robots.handler)
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)))
		visitAll(t, c, base, 2)
		down.Store(true)
		time.Sleep(defaultRobotsTTL)
		for i := range 3 {
			if err := c.Visit(fmt.Sprintf("%s/later/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Wait()
		if got := len(pageArrivals(h)); got != 5 {
			t.Errorf("%d pages, want 5", got)
		}
		if st, _ := p.Host("cd.test"); st.CrawlDelay != 2*time.Second {
			t.Errorf("Crawl-delay %v, want the earlier copy's 2s", st.CrawlDelay)
		}
		ev := findEvent(t, &buf, audit.EventRobotsUnavailable)
		if ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), "still applies") {
			t.Errorf("robots_unavailable = %v, want it to say the earlier copy still applies", ev)
		}
	})
}

// TestCollyRobotsCheckWaitsForUnreachableRobots: Colly's own robots check (IgnoreRobotsTxt = false)
// waits for an unreachable robots.txt too, instead of reading a 5xx as disallow-all for the collector's
// whole life.
func TestCollyRobotsCheckWaitsForUnreachableRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\nDisallow: /private\n")
		robots.status = func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}
		h, base := n.host("colly.test", robots.handler)
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		c.IgnoreRobotsTxt = false
		visitAll(t, c, base, 2)
		if err := c.Visit(base + "/private/x"); err != colly.ErrRobotsTxtBlocked {
			t.Errorf("Visit of a disallowed path = %v, want ErrRobotsTxtBlocked", err)
		}
		if got := len(pageArrivals(h)); got != 2 {
			t.Errorf("%d pages, want 2", got)
		}
		if got := robots.fetches.Load(); got != 3 {
			t.Errorf("robots.txt asked %d times, want 3", got)
		}
	})
}

// TestRobotsReadAgainWaitsItsTurnWhileHeld: robots.txt read again while its host is held (here a
// Retry-After of 30 s, as a Crawl-delay or the backoff would) waits for its turn: the wait is not taken
// for an unreachable robots.txt.
func TestRobotsReadAgainWaitsItsTurnWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var fetches atomic.Int32
		var refuse atomic.Bool
		h, base := n.host("held.test", func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/robots.txt":
				fetches.Add(1)
				fmt.Fprint(w, "User-agent: *\n")
			case refuse.Swap(false):
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(http.StatusTooManyRequests)
			default:
				fmt.Fprint(w, "ok")
			}
		})
		var buf auditBuf
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0), WithLogger(zerolog.New(&buf)))
		visitAll(t, c, base, 1)
		time.Sleep(defaultRobotsTTL - 5*time.Second)
		refuse.Store(true)
		if err := c.Visit(base + "/refused"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		refusedAt := time.Now()
		time.Sleep(10 * time.Second) // robots.txt is due again, the host held for 23 s more
		if err := c.Visit(base + "/after"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		if ev := findEvent(t, &buf, audit.EventRobotsUnavailable); ev != nil {
			t.Errorf("robots_unavailable although robots.txt only waited for its turn: %v", ev[audit.FieldDetail])
		}
		if got := fetches.Load(); got != 2 {
			t.Errorf("robots.txt read %d times, want 2", got)
		}
		tries := robotsArrivals(h)
		if got := tries[len(tries)-1].Sub(refusedAt); got != 33*time.Second {
			t.Errorf("robots.txt read again %v after the refusal, want 33s (the end of the hold)", got)
		}
	})
}
