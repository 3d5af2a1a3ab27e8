package ext

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/hostkey"
	"github.com/collypace/ext/internal/robots"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// Hostile input through the whole pacer: whatever a server sends in Retry-After, rate-limit fields and
// robots.txt, whatever a store returns, however a host is spelled, the pacer neither crashes nor
// breaks a promise to the host, and it says what it ignored. Each row of each table is a row of the
// README's "bad input → behaviour" table. Exact timings run Colly in synctest over fakeNet.

// fakeAlias makes addr ("host:port", as dialled) reach the fake server h too.
func fakeAlias(n *fakeNet, addr string, h *fakeHost) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hosts[addr] = h
}

// pageArrivals returns the arrivals at h that are not robots.txt fetches.
func pageArrivals(h *fakeHost) []arrival {
	var out []arrival
	for _, a := range h.log() {
		if a.path != "/robots.txt" {
			out = append(out, a)
		}
	}
	return out
}

// countEvents returns how many audit events are named name.
func countEvents(t *testing.T, buf *auditBuf, name audit.Event) int {
	t.Helper()
	n := 0
	for _, e := range events(t, buf) {
		if e[audit.FieldEvent] == string(name) {
			n++
		}
	}
	return n
}

// withRetryAfterBuffer is a Retry-After wait with the default 10% buffer, computed as the pacer does.
func withRetryAfterBuffer(d time.Duration) time.Duration {
	return d + time.Duration(float64(d)*DefaultRetryAfterBuffer)
}

// Retry-After through Colly, the pacer and a real HTTP server: the first response to /p/0 carries the
// row's status and header, every later one is a 200. The gap is measured at the server, from that
// response's request to the next request to the host (the retry, the redirect hop, or /p/1 visited
// afterwards). Base delay 1 s: a refusal alone doubles the interval to 2 s.
func TestHostileRetryAfter(t *testing.T) {
	fixed := func(kv ...string) func(time.Time) http.Header {
		return func(time.Time) http.Header { return header(kv...) }
	}
	in := func(layout string, d time.Duration) func(time.Time) http.Header {
		return func(now time.Time) http.Header { return header("Retry-After", now.Add(d).UTC().Format(layout)) }
	}
	const rfc850 = "Monday, 02-Jan-06 15:04:05 GMT"
	s5 := withRetryAfterBuffer(5 * time.Second)
	for _, tc := range []struct {
		name   string
		status int
		header func(now time.Time) http.Header
		gap    time.Duration // 0: the host is parked, nothing more is sent
		events []audit.Event // must be present; header_invalid and retry_after_too_long must be absent unless listed
	}{
		{"empty", 429, fixed("Retry-After", ""), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"spaces only", 429, fixed("Retry-After", "    "), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"spaces around seconds", 429, fixed("Retry-After", "  5  "), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"negative", 429, fixed("Retry-After", "-5"), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"fractional", 429, fixed("Retry-After", "1.5"), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"exponent 1e9", 429, fixed("Retry-After", "1e9"), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"20 digits", 429, fixed("Retry-After", "99999999999999999999"), 0, []audit.Event{audit.EventRetryAfterTooLong, audit.EventBreakerOpened}},
		{"one day, above the 10 min maximum", 503, fixed("Retry-After", "86400"), 0, []audit.Event{audit.EventRetryAfterTooLong, audit.EventBreakerOpened}},
		{"seconds", 503, fixed("Retry-After", "5"), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"just under the maximum", 429, fixed("Retry-After", "599"), withRetryAfterBuffer(599 * time.Second), []audit.Event{audit.EventRetryAfterHonoured}},
		{"zero", 429, fixed("Retry-After", "0"), 1500 * time.Millisecond, []audit.Event{audit.EventRetryAfterNow}},
		{"IMF-fixdate", 429, in(http.TimeFormat, 5*time.Second), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"RFC 850 date", 429, in(rfc850, 5*time.Second), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"asctime date", 429, in(time.ANSIC, 5*time.Second), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"wrong weekday", 429, func(now time.Time) http.Header {
			d := now.Add(5 * time.Second)
			wrong := (d.Weekday() + 3) % 7
			return header("Retry-After", wrong.String()[:3]+d.Format(http.TimeFormat)[3:])
		}, s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"far past date", 429, fixed("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT"), 1500 * time.Millisecond, []audit.Event{audit.EventRetryAfterNow}},
		{"far future date", 429, fixed("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), 0, []audit.Event{audit.EventRetryAfterTooLong, audit.EventBreakerOpened}},
		{"server clock 1 h ahead", 429, func(now time.Time) http.Header {
			return header("Date", now.Add(time.Hour).Format(http.TimeFormat), "Retry-After", now.Add(time.Hour+5*time.Second).Format(http.TimeFormat))
		}, s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"no Date: local clock", 429, func(now time.Time) http.Header {
			h := header("Retry-After", now.Add(5*time.Second).Format(http.TimeFormat))
			h["Date"] = nil // suppresses the server's automatic Date
			return h
		}, s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"two headers: the largest", 429, fixed("Retry-After", "5", "Retry-After", "8"), withRetryAfterBuffer(8 * time.Second), []audit.Event{audit.EventRetryAfterHonoured}},
		{"list in one header", 429, fixed("Retry-After", "5, 8"), withRetryAfterBuffer(8 * time.Second), []audit.Event{audit.EventRetryAfterHonoured}},
		{"garbage beside a valid one", 429, fixed("Retry-After", "soon", "Retry-After", "5"), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"too long beside a valid one", 429, fixed("Retry-After", "5", "Retry-After", "86400"), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"non-ASCII digits", 429, fixed("Retry-After", "５"), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"non-ASCII text", 429, fixed("Retry-After", "in 5 Sekunden – bitte 🙏"), 1500 * time.Millisecond, []audit.Event{audit.EventHeaderInvalid}},
		{"on a 403", 403, fixed("Retry-After", "5"), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"on a 302: the hop waits", 302, fixed("Retry-After", "5", "Location", "/b"), s5, []audit.Event{audit.EventRetryAfterHonoured}},
		{"invalid on a 301: the hop backs off", 301, fixed("Retry-After", "soon", "Location", "/b"), 2 * time.Second, []audit.Event{audit.EventHeaderInvalid}},
		{"on a 200: ignored", 200, fixed("Retry-After", "5"), time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				var first atomic.Bool
				h, base := n.host("ra.test", func(w http.ResponseWriter, r *http.Request) {
					switch {
					case r.URL.Path == "/robots.txt":
						http.NotFound(w, r)
					case r.URL.Path == "/p/0" && !first.Swap(true):
						for k, v := range tc.header(time.Now()) {
							w.Header()[k] = v
						}
						w.WriteHeader(tc.status)
					default:
						fmt.Fprint(w, "ok")
					}
				})
				var buf auditBuf
				c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)))
				c.Async = false
				for _, u := range []string{base + "/p/0", base + "/p/1"} {
					_ = c.Visit(u) // synchronous: Visit returns the refusal or deferral OnError sees
				}
				c.Wait()
				pages := pageArrivals(h)
				if tc.gap == 0 {
					if len(pages) != 1 {
						t.Errorf("%d page requests, want 1: the host must be parked after it", len(pages))
					}
					if st, _ := p.Host("ra.test"); st.Breaker != audit.BreakerOpen {
						t.Errorf("breaker %v, want open", st.Breaker)
					}
					if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 2 {
						t.Errorf("%d deferred requests, want 2 (the retry and /p/1)", len(d))
					}
					// Parked until the time announced: honoured in full.
					if ev := findEvent(t, &buf, audit.EventRetryAfterTooLong); ev != nil && ev[audit.FieldComplianceFlag] != true {
						t.Errorf("retry_after_too_long has compliance_flag %v, want true", ev[audit.FieldComplianceFlag])
					}
				} else {
					if len(pages) < 2 {
						t.Fatalf("page requests %v, want a second one", pages)
					}
					if got := pages[1].at.Sub(pages[0].at); got != tc.gap {
						t.Errorf("next request %v after the response, want %v", got, tc.gap)
					}
				}
				for _, ev := range tc.events {
					if findEvent(t, &buf, ev) == nil {
						t.Errorf("no %s event", ev)
					}
				}
				for _, ev := range []audit.Event{audit.EventHeaderInvalid, audit.EventRetryAfterTooLong} {
					if findEvent(t, &buf, ev) != nil && !slices.Contains(tc.events, ev) {
						t.Errorf("unexpected %s event", ev)
					}
				}
			})
		})
	}
}

// Rate-limit fields through the pacer's decision path at explicit instants: a request departs at t0
// (base delay 1 s), its response arrives at t0, and the next departure is booked at t0.
func TestHostileRateLimitHeaders(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).Unix(), 10) }
	epochMS := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixMilli(), 10) }
	manyBad := strings.Repeat(`"p";r=x;t=1, `, 999) + `"p";r=x;t=1`
	// 2 remaining, 10 s to reset: the 2 before the reset, the next at it,
	// 10 s / 3 rounded up to the nanosecond.
	const twoIn10s = 3333333334 * time.Nanosecond
	for _, tc := range []struct {
		name    string
		status  int // 0: 200
		header  http.Header
		next    time.Duration // the next departure, from t0
		trigger audit.Trigger // what the host status says sets the pace at t0
		invalid int           // header_invalid events
		applied bool          // a rate_limit_applied event
	}{
		{"delta reset: quota spread", 0, header("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "10"), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"exhausted: held until reset", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "7"), 7 * time.Second, audit.TriggerRateLimit, 0, true},
		{"epoch seconds", 0, header("X-RateLimit-Remaining", "2", "X-RateLimit-Reset", epoch(10*time.Second)), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"epoch milliseconds", 0, header("X-RateLimit-Remaining", "2", "X-RateLimit-Reset", epochMS(10*time.Second)), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"epoch from a server clock 10 min ahead: measured against Date", 0, header("Date", t0.Add(10*time.Minute).Format(http.TimeFormat), "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", epoch(10*time.Minute+10*time.Second)), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"epoch in the past", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(-time.Minute)), time.Second, audit.TriggerBase, 0, false},
		{"delta of 31 years (just under the epoch cut-off)", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "999999999"), time.Second, audit.TriggerBase, 1, false},
		{"epoch beyond the 1 h maximum", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", epoch(2*time.Hour)), time.Second, audit.TriggerBase, 1, false},
		{"epoch where delta is expected", 0, header("RateLimit-Remaining", "0", "RateLimit-Reset", epoch(10*time.Second)), time.Second, audit.TriggerBase, 1, false},
		{"remaining above limit", 0, header("X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "50", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"zero window", 0, header("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "0"), time.Second, audit.TriggerBase, 0, false},
		{"exhausted, zero window", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "0"), time.Second, audit.TriggerBase, 0, false},
		{"limit 0", 0, header("X-RateLimit-Limit", "0", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "10"), twoIn10s, audit.TriggerRateLimit, 1, true},
		{"negative remaining", 0, header("X-RateLimit-Remaining", "-1", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"20-digit remaining", 0, header("X-RateLimit-Remaining", "99999999999999999999", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"reset not a number", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon"), time.Second, audit.TriggerBase, 1, false},
		{"fractional reset", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1.5"), 1500 * time.Millisecond, audit.TriggerRateLimit, 0, true},
		{"reset with an exponent", 0, header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1e3"), time.Second, audit.TriggerBase, 1, false},
		{"non-ASCII digits", 0, header("X-RateLimit-Remaining", "２", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"duplicates that agree", 0, header("X-RateLimit-Remaining", "2", "X-RateLimit-Remaining", "2", "X-RateLimit-Reset", "10"), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"duplicates that conflict", 0, header("X-RateLimit-Remaining", "2", "X-RateLimit-Remaining", "3", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"conflicting list in one field", 0, header("X-RateLimit-Remaining", "2, 3", "X-RateLimit-Reset", "10"), time.Second, audit.TriggerBase, 1, false},
		{"families disagree: the stricter wins", 0, header("X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "10", "RateLimit-Remaining", "1", "RateLimit-Reset", "10"), 5 * time.Second, audit.TriggerRateLimit, 0, true},
		{"only a limit", 0, header("X-RateLimit-Limit", "100"), time.Second, audit.TriggerBase, 0, false},
		{"structured, exhausted", 0, header("RateLimit", `"default";r=0;t=4`), 4 * time.Second, audit.TriggerRateLimit, 0, true},
		{"structured, window from the policy", 0, header("RateLimit", `"default";r=2`, "RateLimit-Policy", `"default";q=100;w=10`), twoIn10s, audit.TriggerRateLimit, 0, true},
		{"structured, r above the policy quota", 0, header("RateLimit", `"default";r=5;t=10`, "RateLimit-Policy", `"default";q=3;w=10`), time.Second, audit.TriggerBase, 1, false},
		{"structured, syntax error", 0, header("RateLimit", `default;;r=1`), time.Second, audit.TriggerBase, 1, false},
		{"structured, zero window", 0, header("RateLimit", `"default";r=0;t=0`), time.Second, audit.TriggerBase, 0, false},
		{"structured, 1000 bad items: one event", 0, header("RateLimit", manyBad), time.Second, audit.TriggerBase, 1, false},
		{"Retry-After wins over them", 429, header("Retry-After", "3", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"), withRetryAfterBuffer(3 * time.Second), audit.TriggerRetryAfter, 0, false},
		{"bad Retry-After: they apply", 429, header("Retry-After", "soon", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "6"), 6 * time.Second, audit.TriggerRateLimit, 1, true},
		{"on a 429: the longer of them and the backoff", 429, header("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "6"), 3 * time.Second, audit.TriggerRateLimit, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf auditBuf
			p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithLogger(zerolog.New(&buf)))
			status := tc.status
			if status == 0 {
				status = http.StatusOK
			}
			p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: status, Header: tc.header}, t0)
			st, _ := p.HostAt("h", t0)
			if st.Trigger != tc.trigger {
				t.Errorf("trigger %q, want %q", st.Trigger, tc.trigger)
			}
			if got := p.ReserveAt("h", t0).At.Sub(t0); got != tc.next {
				t.Errorf("next departure at t0+%v, want t0+%v", got, tc.next)
			}
			if got := countEvents(t, &buf, audit.EventHeaderInvalid); got != tc.invalid {
				t.Errorf("%d header_invalid events, want %d", got, tc.invalid)
			}
			if got := findEvent(t, &buf, audit.EventRateLimitApplied) != nil; got != tc.applied {
				t.Errorf("rate_limit_applied event: %v, want %v", got, tc.applied)
			}
		})
	}
}

// robots.txt through Colly and the pacer: three pages are visited after the robots fetch, base delay 1 s.
func TestHostileRobots(t *testing.T) {
	binary := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range binary {
		binary[i] = byte(r.UintN(256))
	}
	filler := strings.Repeat("# filler line of a very large robots.txt\n", 10<<20/41) // 10 MiB
	body := func(status int, b string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			fmt.Fprint(w, b)
		}
	}
	for _, tc := range []struct {
		name       string
		robots     http.HandlerFunc
		setup      func(n *fakeNet) // other hosts
		opts       []Option
		crawlDelay time.Duration   // the host's Crawl-delay afterwards
		gap        time.Duration   // between page requests; 0: the host is parked
		gaps       []time.Duration // exact gaps instead, when the pace changes
		firstPage  time.Duration   // from the last robots.txt request to the first page; 0: not checked
		hops       int             // robots.txt requests the host sees; 0: not checked
		events     []audit.Event   // must be present
		quiet      bool            // no robots_invalid or robots_unavailable event
		complies   bool            // the last delay_applied has compliance_flag true
		collyCheck bool            // Colly's own robots check is on (IgnoreRobotsTxt = false)
	}{
		{name: "10 MiB, Crawl-delay first", robots: body(200, "User-agent: *\nCrawl-delay: 2\n"+filler),
			crawlDelay: 2 * time.Second, gap: 2 * time.Second, events: []audit.Event{audit.EventRobotsInvalid, audit.EventCrawlDelayApplied}, complies: true},
		{name: "10 MiB, Crawl-delay past 500 KiB", robots: body(200, filler+"User-agent: *\nCrawl-delay: 2\n"),
			gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "one 1 MiB line", robots: body(200, strings.Repeat("x", 1<<20)),
			gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "binary", robots: body(200, string(binary)), gap: time.Second, complies: true},
		{name: "UTF-8 BOM", robots: body(200, "\xef\xbb\xbfUser-agent: *\nCrawl-delay: 2\n"),
			crawlDelay: 2 * time.Second, gap: 2 * time.Second, quiet: true, complies: true},
		{name: "CR line endings", robots: body(200, "User-agent: *\rCrawl-delay: 2\r"),
			crawlDelay: 2 * time.Second, gap: 2 * time.Second, quiet: true, complies: true},
		{name: "bad Crawl-delay among good lines", robots: body(200, "User-agent: *\nCrawl-delay: soon\nCrawl-delay: 2\nDisallow: /private\n"),
			crawlDelay: 2 * time.Second, gap: 2 * time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "Crawl-delay 1e20: parked", robots: body(200, "User-agent: *\nCrawl-delay: 1e20\n"),
			crawlDelay: defaultMaxCrawlDelay, events: []audit.Event{audit.EventCrawlDelayClamped, audit.EventBreakerOpened, audit.EventRequestDeferred}},
		{name: "Crawl-delay 1e20, IgnoreCaps: clamped", robots: body(200, "User-agent: *\nCrawl-delay: 1e20\n"), opts: []Option{WithBreaker(BreakerPolicy{IgnoreCaps: true})},
			crawlDelay: defaultMaxCrawlDelay, gap: defaultMaxCrawlDelay, events: []audit.Event{audit.EventCrawlDelayClamped}},
		{name: "Crawl-delay negative", robots: body(200, "User-agent: *\nCrawl-delay: -5\n"), gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "Crawl-delay NaN", robots: body(200, "User-agent: *\nCrawl-delay: NaN\n"), gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "Crawl-delay hex", robots: body(200, "User-agent: *\nCrawl-delay: 0x10\n"), gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "Crawl-delay with a NUL", robots: body(200, "User-agent: *\nCrawl-delay: 2\x00\n"), gap: time.Second, events: []audit.Event{audit.EventRobotsInvalid}, complies: true},
		{name: "Crawl-delay fractional", robots: body(200, "User-agent: *\nCrawl-delay: 1.5\n"),
			crawlDelay: 1500 * time.Millisecond, gap: 1500 * time.Millisecond, quiet: true, complies: true},
		{name: "HTML page served as robots.txt", robots: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<!DOCTYPE html>\n<html><head><title>Welcome</title></head>\n<body><p>Note: a page</p>\n<a href=\"/x\">Disallow: /</a></body></html>\n")
		}, gap: time.Second, quiet: true, complies: true, collyCheck: true},
		// Unreachable means disallow (RFC 9309 §2.3.1.4): no page goes, robots.txt is asked again
		// after 1 s, 2 s, 4 s…; each 503 or timeout is a refusal, and the tenth in a row opens the
		// breaker: the pages are deferred, none lost.
		{name: "503: pages held, then parked", robots: body(503, ""),
			events: []audit.Event{audit.EventRobotsUnavailable, audit.EventBreakerOpened, audit.EventRequestDeferred}, hops: defaultBreakerFailures},
		{name: "timeout", robots: func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}, events: []audit.Event{audit.EventRobotsUnavailable, audit.EventBreakerOpened, audit.EventRequestDeferred}, hops: defaultBreakerFailures},
		{name: "redirect to another host", robots: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://other.test/robots.txt", http.StatusMovedPermanently)
		}, setup: func(n *fakeNet) {
			n.host("other.test", robotsSite(200, "User-agent: *\nCrawl-delay: 4\n", nil))
		}, crawlDelay: 4 * time.Second, gap: 4 * time.Second, quiet: true, complies: true},
		{name: "redirect loop", robots: func(w http.ResponseWriter, r *http.Request) {
			hop, _ := strconv.Atoi(r.URL.Query().Get("hop"))
			http.Redirect(w, r, "/robots.txt?hop="+strconv.Itoa(hop+1), http.StatusFound)
		}, gap: time.Second, firstPage: time.Second, hops: robots.MaxRedirects + 1, quiet: true, complies: true},
		// The redirect succeeds, the dead host fails: after robotsUnreachableLimit the breaker opens.
		{name: "redirect to a dead host", robots: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://nowhere.test/robots.txt", http.StatusFound)
		}, events: []audit.Event{audit.EventRobotsUnavailable, audit.EventBreakerOpened, audit.EventRequestDeferred}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				if tc.setup != nil {
					tc.setup(n)
				}
				h, base := n.host("bot.test", func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/robots.txt" {
						tc.robots(w, r)
						return
					}
					fmt.Fprint(w, "<html>ok</html>")
				})
				var buf auditBuf
				c, p := pacedCollector(n, append([]Option{WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf))}, tc.opts...)...)
				c.IgnoreRobotsTxt = !tc.collyCheck
				visitAll(t, c, base, 3)
				st, _ := p.Host("bot.test")
				if st.CrawlDelay != tc.crawlDelay {
					t.Errorf("Crawl-delay %v, want %v", st.CrawlDelay, tc.crawlDelay)
				}
				pages := pageArrivals(h)
				switch {
				case tc.gaps != nil:
					if got := h.gaps("/p/"); fmt.Sprint(got) != fmt.Sprint(tc.gaps) {
						t.Errorf("gaps %v, want %v", got, tc.gaps)
					}
				case tc.gap == 0:
					if len(pages) != 0 {
						t.Errorf("%d pages sent to a parked host", len(pages))
					}
					if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 3 {
						t.Errorf("%d deferred requests, want 3", len(d))
					}
				default:
					assertGaps(t, h.gaps("/p/"), tc.gap)
				}
				var robots []arrival
				for _, a := range h.log() {
					if a.path == "/robots.txt" {
						robots = append(robots, a)
					}
				}
				if tc.hops > 0 && len(robots) != tc.hops {
					t.Errorf("%d robots.txt requests, want %d", len(robots), tc.hops)
				}
				if tc.firstPage > 0 && len(robots) > 0 && len(pages) > 0 {
					if got := pages[0].at.Sub(robots[len(robots)-1].at); got != tc.firstPage {
						t.Errorf("first page %v after the last robots.txt request, want %v", got, tc.firstPage)
					}
				}
				for _, ev := range tc.events {
					if findEvent(t, &buf, ev) == nil {
						t.Errorf("no %s event", ev)
					}
				}
				if tc.quiet {
					for _, ev := range []audit.Event{audit.EventRobotsInvalid, audit.EventRobotsUnavailable} {
						if e := findEvent(t, &buf, ev); e != nil {
							t.Errorf("unexpected %s event: %v", ev, e[audit.FieldDetail])
						}
					}
				}
				if ev := lastEvent(t, &buf, audit.EventDelayApplied); len(pages) > 0 && ev[audit.FieldComplianceFlag] != tc.complies {
					t.Errorf("delay_applied compliance_flag %v, want %v", ev[audit.FieldComplianceFlag], tc.complies)
				}
			})
		})
	}
}

// Stored state a store hands back (a row written by another version, edited by hand, or hostile) is
// validated before use: the pacer never holds a host longer than any response could, never paces it
// beyond its ceilings, and says what it repaired.
func TestHostileStoredState(t *testing.T) {
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		state    StoredHost
		delay    time.Duration // the adaptive delay restored
		interval time.Duration
		next     time.Duration // the next departure, from t0
		breaker  audit.BreakerState
		parked   bool
		repaired bool // a state_repaired event
	}{
		{"future schema", StoredHost{Version: 99, AdaptiveDelay: time.Hour, HoldUntil: t0.Add(time.Hour)}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"schema 0", StoredHost{Version: 0, AdaptiveDelay: 20 * time.Second}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"negative adaptive delay", StoredHost{AdaptiveDelay: -5 * time.Second}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"adaptive delay of 146 years", StoredHost{AdaptiveDelay: 1 << 62}, DefaultMaxDelay, DefaultMaxDelay, 0, audit.BreakerClosed, false, true},
		{"hold until year 9999", StoredHost{HoldUntil: far}, time.Second, time.Second, maxRateLimitReset, audit.BreakerClosed, false, true},
		{"next departure in year 9999", StoredHost{NextDeparture: far}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"Crawl-delay of 11 days", StoredHost{CrawlDelay: 1e6 * time.Second}, time.Second, defaultMaxCrawlDelay, 0, audit.BreakerClosed, false, true},
		{"negative Crawl-delay", StoredHost{CrawlDelay: -time.Second}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"negative known limit", StoredHost{KnownLimit: -time.Second}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"unknown breaker state", StoredHost{Breaker: 7}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"breaker opened in year 9999", StoredHost{Breaker: audit.BreakerOpen, BreakerChanged: far}, time.Second, time.Second, 0, audit.BreakerOpen, true, true},
		{"half-open from a dead process", StoredHost{Breaker: audit.BreakerHalfOpen, BreakerChanged: t0.Add(-time.Hour)}, time.Second, time.Second, 0, audit.BreakerOpen, false, false},
		{"negative failure count", StoredHost{Failures: -3}, time.Second, time.Second, 0, audit.BreakerClosed, false, true},
		{"unknown hold trigger", StoredHost{HoldUntil: t0.Add(10 * time.Second), HoldTrigger: "<script>"}, time.Second, time.Second, 10 * time.Second, audit.BreakerClosed, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.state
			st.Host = "h"
			if st.Version == 0 && tc.name != "schema 0" {
				st.Version = StateVersion
			}
			if st.AdaptiveDelay == 0 && tc.name != "schema 0" {
				st.AdaptiveDelay = time.Second
			}
			store := newMemoryStore()
			if err := store.SaveHosts(t.Context(), []StoredHost{st}); err != nil {
				t.Fatal(err)
			}
			var buf auditBuf
			p := NewPacer(WithStore(store), WithBaseDelay(time.Second), WithJitter(0), WithFlushInterval(time.Hour), WithLogger(zerolog.New(&buf)))
			defer p.Close()
			p.now = func() time.Time { return t0 }
			res := p.ReserveAt("h", t0)
			s, _ := p.HostAt("h", t0)
			if s.AdaptiveDelay != tc.delay || s.Interval != tc.interval {
				t.Errorf("adaptive delay %v, interval %v; want %v, %v", s.AdaptiveDelay, s.Interval, tc.delay, tc.interval)
			}
			if got := res.At.Sub(t0); got != tc.next {
				t.Errorf("first departure at t0+%v, want t0+%v", got, tc.next)
			}
			if s.Breaker != tc.breaker {
				t.Errorf("breaker %v, want %v", s.Breaker, tc.breaker)
			}
			if h, _ := p.hosts.Load("h"); h.parked(t0, p.cfg.breaker) != tc.parked {
				got := !tc.parked
				t.Errorf("parked %v, want %v", got, tc.parked)
			}
			if got := findEvent(t, &buf, audit.EventStateRepaired) != nil; got != tc.repaired {
				t.Errorf("state_repaired event %v, want %v", got, tc.repaired)
			}
			if tc.name == "unknown hold trigger" && s.Trigger != audit.TriggerRetryAfter {
				t.Errorf("trigger %q, want retry_after", s.Trigger)
			}
		})
	}
}

// loadFailStore is a Store whose LoadHost fails (err) or, with hang, waits for its context to end.
type loadFailStore struct {
	*memoryStore
	err  error
	hang bool
}

func (s loadFailStore) LoadHost(ctx context.Context, _ string) (StoredHost, bool, error) {
	if s.hang {
		<-ctx.Done()
		return StoredHost{}, false, ctx.Err()
	}
	return StoredHost{}, false, s.err
}

// A store that cannot decode a row, fails, or hangs: the host starts afresh and pacing goes on.
func TestHostileStoreLoads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store loadFailStore
		event audit.Event
	}{
		{"undecodable row", loadFailStore{err: fmt.Errorf("row h: %w", ErrCorruptState)}, audit.EventStateCorrupt},
		{"store down", loadFailStore{err: errors.New("dial tcp 10.0.0.1:6379: connection refused")}, audit.EventStoreUnavailable},
		{"store hangs", loadFailStore{hang: true}, audit.EventStoreUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.store.memoryStore = newMemoryStore()
				var buf auditBuf
				p := NewPacer(WithStore(tc.store), WithBaseDelay(time.Second), WithJitter(0), WithLogger(zerolog.New(&buf)))
				defer p.Close()
				start := time.Now()
				res, release, err := p.Wait(t.Context(), "h")
				if err != nil {
					t.Fatal(err)
				}
				release()
				if waited := time.Since(start); tc.store.hang && waited != storeTimeout {
					t.Errorf("first departure after %v, want the %v store timeout", waited, storeTimeout)
				}
				if res.Interval != time.Second {
					t.Errorf("interval %v, want a fresh host's 1s", res.Interval)
				}
				if findEvent(t, &buf, tc.event) == nil {
					t.Errorf("no %s event", tc.event)
				}
			})
		})
	}
}

// Hosts spelled differently by Colly's URL parser share one schedule: an IDN in Unicode or punycode,
// any case, a non-canonical IPv6 literal, an explicit default port. Another port is another schedule.
func TestHostileHostSpellings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server string   // the fake server's name (as dialled)
		urls   []string // visited in order; each departs one interval after the previous
		key    string   // the one host key they share
	}{
		{"IDN", "xn--bcher-kva.test", []string{"http://bücher.test/p/0", "http://BÜCHER.test/p/1", "http://xn--bcher-kva.test/p/2"}, "xn--bcher-kva.test"},
		{"IPv6 literal", "[::1]", []string{"http://[::1]/p/0", "http://[0:0::1]/p/1", "http://[0000::0001]:80/p/2"}, "[::1]"},
		{"default port", "ports.test", []string{"http://ports.test/p/0", "http://ports.test:80/p/1", "http://PORTS.test/p/2"}, "ports.test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				h, _ := n.host(tc.server, slowPage(0))
				var buf auditBuf
				c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)))
				for _, u := range tc.urls {
					if err := c.Visit(u); err != nil {
						t.Fatalf("visit %s: %v", u, err)
					}
				}
				c.Wait()
				assertGaps(t, h.gaps("/p/"), time.Second)
				if hs := p.Hosts(); len(hs) != 1 || hs[0].Host != tc.key {
					t.Errorf("hosts %v, want one: %s", hs, tc.key)
				}
				for _, e := range events(t, &buf) {
					if e[audit.FieldTargetDomain] != tc.key {
						t.Errorf("target_domain %q, want %q", e[audit.FieldTargetDomain], tc.key)
					}
				}
			})
		})
	}
	t.Run("another port", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			n := newFakeNet(t)
			h, _ := n.host("ports.test", slowPage(0))
			fakeAlias(n, "ports.test:8080", h)
			c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots())
			for i := range 3 {
				for _, u := range []string{"http://ports.test/p/a", "http://ports.test:8080/p/b"} {
					if err := c.Visit(fmt.Sprintf("%s%d", u, i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.Wait()
			assertGaps(t, h.gaps("/p/a"), time.Second)
			assertGaps(t, h.gaps("/p/b"), time.Second)
			if got := pageArrivals(h); got[0].at != got[1].at {
				t.Errorf("first requests to :80 and :8080 at %v and %v, want together: separate schedules", got[0].at, got[1].at)
			}
			if hs := p.Hosts(); len(hs) != 2 {
				t.Errorf("hosts %v, want ports.test and ports.test:8080", hs)
			}
		})
	})
}

// A host reached under another spelling of its name (a trailing dot, upper case, an explicit default
// port, Unicode instead of punycode: in a link, or in a redirect's Location, which net/url keeps as
// written) is the same server: it must share the host's schedule, not get a fresh one.
func TestHostSpellingsShareOneSchedule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  string
		aliases []string // other dialled addresses of the same server
		first   string   // visited first
		second  string   // visited next, or the Location /first redirects to
		visit   bool     // second is visited (a link), not a redirect
	}{
		{"link with a trailing dot", "dot.test", []string{"dot.test.:80"}, "http://dot.test/p/0", "http://dot.test./p/1", true},
		{"redirect to upper case and :80", "case.test", []string{"CASE.TEST:80"}, "http://case.test/p/0", "http://CASE.TEST:80/p/1", false},
		{"redirect with a trailing dot", "dot.test", []string{"dot.test.:80"}, "http://dot.test/p/0", "http://dot.test./p/1", false},
		{"redirect to the Unicode spelling", "xn--bcher-kva.test", []string{"bücher.test:80"}, "http://xn--bcher-kva.test/p/0", "http://bücher.test/p/1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				h, _ := n.host(tc.server, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/p/0" && !tc.visit {
						w.Header().Set("Location", tc.second)
						w.WriteHeader(http.StatusFound)
						return
					}
					fmt.Fprint(w, "ok")
				})
				for _, a := range tc.aliases {
					fakeAlias(n, a, h)
				}
				c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots())
				urls := []string{tc.first}
				if tc.visit {
					urls = append(urls, tc.second)
				}
				for _, u := range urls {
					if err := c.Visit(u); err != nil {
						t.Fatal(err)
					}
				}
				c.Wait()
				gaps := h.gaps("/p/")
				if len(gaps) != 1 || gaps[0] != time.Second {
					t.Errorf("gap between %s and %s at the server %v, want 1s: one schedule", tc.first, tc.second, gaps)
				}
			})
		})
	}
}

// IPv6 on a real loopback socket: the host key keeps the brackets and the port.
func TestIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on this machine (%v): the IPv6 rows run over fakeNet only", err)
	}
	srv := httptest.NewUnstartedServer(slowPage(0))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := colly.NewCollector(colly.Async(true))
	p := AdaptivePacing(c, WithTransport(tr), WithBaseDelay(20*time.Millisecond))
	var fetched atomic.Int32
	c.OnResponse(func(*colly.Response) { fetched.Add(1) })
	for i := range 3 {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	c.Wait()
	key := strings.TrimPrefix(srv.URL, "http://")
	st, ok := p.Host(key)
	if !ok || st.Departures != 4 || fetched.Load() != 3 {
		t.Errorf("host %q known %v, %d departures, %d pages; want robots.txt + 3 pages", key, ok, st.Departures, fetched.Load())
	}
}

// URL userinfo never reaches the audit log, whatever path logs a URL: a robots.txt redirect to a dead
// host, redirect hops, deferral, draining, and a hostile deferred request in the store.
func TestUserinfoNeverLogged(t *testing.T) {
	secrets := []string{"alice", "s3cret", "bob", "hunter2", "carol", "pw3", "robuser", "robpw"}
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		n.host("ui.test", func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/robots.txt":
				http.Redirect(w, r, "http://robuser:robpw@nowhere.test/robots.txt", http.StatusFound)
			case "/p/redir":
				http.Redirect(w, r, "http://bob:hunter2@ui.test/p/ok2", http.StatusFound)
			case "/p/fail", "/p/fail2":
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				fmt.Fprint(w, "ok")
			}
		})
		store := newMemoryStore()
		if _, err := store.AddDeferred(t.Context(), DeferredRequest{Host: "ui.test", Method: "GET", URL: "http://carol:pw3@ui.test/%zz"}); err != nil {
			t.Fatal(err)
		}
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(1), WithStore(store), WithLogger(zerolog.New(&buf)),
			WithBreaker(BreakerPolicy{Failures: 2, Cooldown: time.Minute}))
		defer p.Close()
		// Bounds a wedged host (the test fails instead of hanging): fake time, the write-behind ticks it.
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		c.Context = ctx
		// robots.txt is unreachable until its redirect target comes up: its pages wait, then go, in
		// order (synchronous: the breaker opens on /p/fail's retry and /p/fail2 is deferred).
		go func() {
			time.Sleep(5 * time.Second)
			n.host("nowhere.test", http.NotFound)
		}()
		c.Async = false
		for _, path := range []string{"/p/ok", "/p/redir", "/p/fail", "/p/fail2"} {
			_ = c.Visit("http://alice:s3cret@ui.test" + path) // synchronous: Visit returns what OnError sees
		}
		c.Wait()
		time.Sleep(time.Minute)
		if _, err := p.Drain(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		kept := false
		if pending, err := p.DeferredRequests(t.Context(), ""); err == nil {
			for _, d := range pending {
				kept = kept || strings.HasSuffix(d.URL, "/%zz")
			}
		}
		if !kept {
			t.Error("the deferred request with an unparseable URL was dropped by Drain, want it kept")
		}
		for _, ev := range []audit.Event{audit.EventRobotsUnavailable, audit.EventRequestDeferred, audit.EventDeferredDrained} {
			if findEvent(t, &buf, ev) == nil {
				t.Errorf("no %s event: the path that logs a URL was not exercised", ev)
			}
		}
		if ev := findEvent(t, &buf, audit.EventPacingBypassed); ev != nil {
			t.Errorf("pacing_bypassed although the transport is the pacer's: %v", ev[audit.FieldDetail])
		}
		if st, _ := p.Host("ui.test"); st.Breaker == audit.BreakerHalfOpen {
			t.Error("breaker left half-open: the probe never resolved")
		}
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			for _, s := range secrets {
				if strings.Contains(line, s) {
					t.Errorf("audit line leaks userinfo %q: %s", s, line)
				}
			}
		}
	})
}

// Host keys given to Wait and Observe directly can be anything: the audit trail stays one valid JSON
// object per line, with the key escaped, never injecting a line.
func TestHostileHostKeysKeepAuditValid(t *testing.T) {
	keys := []string{"", `a"b\c`, "evil\n{\"event\":\"forged\"}", "\x00\x01\x7f", "ü.test", "[::1]:0", strings.Repeat("h", 8<<10)}
	var buf auditBuf
	p := NewPacer(WithBaseDelay(0), WithLogger(zerolog.New(&buf)))
	for _, k := range keys {
		res, release, err := p.Wait(t.Context(), k)
		if err != nil {
			t.Fatal(err)
		}
		p.Observe(res, Outcome{Status: 429, Header: header("Retry-After", "soon\"\n{}")})
		release()
	}
	evs := events(t, &buf) // fails on any line that is not JSON
	perKey := map[string]int{}
	for _, e := range evs {
		perKey[e[audit.FieldTargetDomain].(string)]++
		if e[audit.FieldEvent] == "forged" {
			t.Error("a host key injected an audit line")
		}
	}
	for _, k := range keys {
		if perKey[hostkey.Normalize(k)] != 3 { // delay_applied, header_invalid, delay_increased (ü.test as xn--tda.test)
			t.Errorf("key %.20q: %d events, want 3", k, perKey[k])
		}
	}
}
