package ext

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// robotsSite serves body as robots.txt (with the given status) and "ok" pages.
func robotsSite(status int, body string, fetches *atomic.Int32) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if fetches != nil {
				fetches.Add(1)
			}
			w.WriteHeader(status)
			fmt.Fprint(w, body)
			return
		}
		fmt.Fprint(w, "<html>ok</html>")
	}
}

// A robots.txt Crawl-delay sets the interval when it is longer than the base delay.
func TestCrawlDelayPacesHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("cd.test", robotsSite(200, "User-agent: *\nCrawl-delay: 2\n", nil))
		c, p := pacedCollector(n, WithBaseDelay(500*time.Millisecond))
		visitAll(t, c, base, 4)
		assertGaps(t, h.gaps("/p/"), 2*time.Second)
		if st, _ := p.Host("cd.test"); st.Trigger != audit.TriggerCrawlDelay {
			t.Errorf("trigger = %q, want crawl_delay", st.Trigger)
		}
	})
}

// One bad Crawl-delay line does not lose the rest: the group for our product token still applies.
func TestBadCrawlDelayLineKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		body := "User-agent: other\nCrawl-delay: soon\n\nUser-agent: pacebot\nCrawl-delay: 3\n"
		h, base := n.host("bad.test", robotsSite(200, body, nil))
		var buf auditBuf
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)))
		c.UserAgent = "PaceBot/1.0 (+https://example.org/bot)"
		visitAll(t, c, base, 3)
		assertGaps(t, h.gaps("/p/"), 3*time.Second)
		if findEvent(t, &buf, audit.EventRobotsInvalid) == nil {
			t.Error("no robots_invalid event for the bad line")
		}
	})
}

// An absurd Crawl-delay is clamped to the maximum and audited as not fully honoured, when the breaker
// is told to crawl on over caps.
func TestAbsurdCrawlDelayClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("huge.test", robotsSite(200, "User-agent: *\nCrawl-delay: 1e20\n", nil))
		var buf auditBuf
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithMaxCrawlDelay(5*time.Second), WithLogger(zerolog.New(&buf)),
			WithBreaker(BreakerPolicy{IgnoreCaps: true}))
		visitAll(t, c, base, 3)
		assertGaps(t, h.gaps("/p/"), 5*time.Second)
		ev := findEvent(t, &buf, audit.EventCrawlDelayClamped)
		if ev == nil || ev[audit.FieldComplianceFlag] != false {
			t.Errorf("crawl_delay_clamped event = %v, want one with compliance_flag false", ev)
		}
		if ev := lastEvent(t, &buf, audit.EventDelayApplied); ev == nil || ev[audit.FieldComplianceFlag] != false {
			t.Errorf("delay_applied = %v, want compliance_flag false while the Crawl-delay is clamped", ev)
		}
	})
}

// A 4xx robots.txt means no rules and no delay.
func TestRobots404NoDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("none.test", robotsSite(404, "", nil))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 3)
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// A 5xx robots.txt is read again by one request at a time, not by every request waiting for it: three
// pages waiting make one read per try.
func TestRobots5xxRetriedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		robots := newMutableRobots("User-agent: *\n")
		robots.status = func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}
		h, base := n.host("down.test", robots.handler)
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0))
		visitAll(t, c, base, 3)
		if got := robots.fetches.Load(); got != 3 {
			t.Errorf("robots.txt fetched %d times, want 3 (two failures, then read)", got)
		}
		if got := len(pageArrivals(h)); got != 3 {
			t.Errorf("%d pages, want 3", got)
		}
	})
}

// Colly's own robots.txt check is answered from the pacer's cache: one fetch per host, and Colly
// parses the sanitized body, so a bad line no longer fails every Visit.
func TestCollyRobotsCheckServedFromCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var fetches atomic.Int32
		body := "User-agent: *\nCrawl-delay: nope\nDisallow: /private\n"
		_, base := n.host("colly.test", robotsSite(200, body, &fetches))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		c.IgnoreRobotsTxt = false
		visitAll(t, c, base, 2)
		if err := c.Visit(base + "/private/x"); err != colly.ErrRobotsTxtBlocked {
			t.Errorf("Visit of a disallowed path = %v, want ErrRobotsTxtBlocked", err)
		}
		if got := fetches.Load(); got != 1 {
			t.Errorf("robots.txt fetched %d times, want 1", got)
		}
	})
}

// robots.txt bodies are read up to the cap: a 10 MiB body does not take 10 MiB.
func TestRobotsBodyCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		big := "User-agent: *\nCrawl-delay: 2\n" + strings.Repeat("# filler line of a very large robots.txt\n", 10<<20/41)
		h, base := n.host("big.test", robotsSite(200, big, nil))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 2)
		assertGaps(t, h.gaps("/p/"), 2*time.Second)
	})
}

// A valid robots.txt whose Crawl-delay is above the cap draws no robots_invalid warning: the clamp is
// reported once, as crawl_delay_clamped, saying the host is parked; parked, nothing departs, so neither
// it nor crawl_delay_applied says the crawl is not compliant, and both say why.
func TestCrawlDelayAboveCapIsNotInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("slow.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, "User-agent: *\nCrawl-delay: 120\n")
				return
			}
			fmt.Fprint(w, "ok")
		})
		var buf auditBuf
		c, _ := pacedCollector(n, WithLogger(zerolog.New(&buf)))
		_ = c.Visit(base + "/")
		c.Wait()
		if ev := findEvent(t, &buf, audit.EventRobotsInvalid); ev != nil {
			t.Errorf("a valid robots.txt drew %v", ev)
		}
		ev := findEvent(t, &buf, audit.EventCrawlDelayClamped)
		if ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), "parked") || ev[audit.FieldComplianceFlag] != true {
			t.Errorf("crawl_delay_clamped = %v, want one saying the host is parked, compliant", ev)
		}
		ev = findEvent(t, &buf, audit.EventCrawlDelayApplied)
		if ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), "parked") || ev[audit.FieldComplianceFlag] != true {
			t.Errorf("crawl_delay_applied = %v, want one saying the host is parked, compliant", ev)
		}
	})
}
