package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// pacedCollector returns an async collector paced over the fake network, without jitter so that
// gaps are exact.
func pacedCollector(n *fakeNet, opts ...Option) (*colly.Collector, *Pacer) {
	c := colly.NewCollector(colly.Async(true))
	p := AdaptivePacing(c, append([]Option{WithTransport(n.tr), WithJitter(0)}, opts...)...)
	return c, p
}

// slowPage answers after latency.
func slowPage(latency time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(latency)
		fmt.Fprint(w, "<html><body>ok</body></html>")
	}
}

func visitAll(t *testing.T, c *colly.Collector, base string, n int) {
	t.Helper()
	for i := range n {
		if err := c.Visit(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
			t.Fatalf("visit %d: %v", i, err)
		}
	}
	c.Wait()
}

func assertGaps(t *testing.T, gaps []time.Duration, want time.Duration) {
	t.Helper()
	if len(gaps) == 0 {
		t.Fatal("no gaps: fewer than two arrivals")
	}
	for i, g := range gaps {
		if g != want {
			t.Errorf("gap %d = %v, want %v (all gaps %v)", i, g, want, gaps)
			return
		}
	}
}

// A host answering in 2 s is paced at exactly 1 s start-to-start: departures, not arrivals, are spaced.
func TestSlowHostPacedByStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("slow.test", slowPage(2*time.Second))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 6)
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// The default in-flight cap keeps a host answering in 4 s on a 1 s interval.
func TestDefaultInFlightCapKeepsSlowHostOnInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("slow.test", slowPage(4*time.Second))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, base, 10)
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// The in-flight cap holds requests back until a slot frees, beside the schedule.
func TestInFlightCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("slow.test", slowPage(5*time.Second))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithMaxInFlight(2))
		visitAll(t, c, base, 4)
		if got := h.maxInFlight(); got != 2 {
			t.Errorf("max in flight at the server = %d, want 2", got)
		}
		gaps := h.gaps("/p/")
		want := []time.Duration{time.Second, 4 * time.Second, time.Second}
		if fmt.Sprint(gaps) != fmt.Sprint(want) {
			t.Errorf("gaps = %v, want %v", gaps, want)
		}
	})
}

// A redirect hop is a departure like any other: it waits for the interval.
func TestRedirectHopIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("redir.test", func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/a":
				http.Redirect(w, r, "/b", http.StatusFound)
			case "/b":
				fmt.Fprint(w, "ok")
			default:
				http.NotFound(w, r)
			}
		})
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		if err := c.Visit(base + "/a"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		log := h.log()
		if len(log) != 3 || log[1].path != "/a" || log[2].path != "/b" {
			t.Fatalf("arrivals = %v, want robots.txt, /a, /b", log)
		}
		if gap := log[2].at.Sub(log[1].at); gap != time.Second {
			t.Errorf("redirect hop left %v after the first hop, want 1s", gap)
		}
	})
}

// A refusal met after a redirect is retried: the verdict the binding acts on is the final response's,
// not the first hop's (its flight's) clean 302.
func TestRefusalAfterRedirectIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var refused atomic.Bool
		h, base := n.host("redir.test", func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/a":
				http.Redirect(w, r, "/b", http.StatusFound)
			case "/b":
				if refused.CompareAndSwap(false, true) {
					w.Header().Set("Retry-After", "5")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				fmt.Fprint(w, "ok")
			default:
				http.NotFound(w, r)
			}
		})
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		if err := c.Visit(base + "/a"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		var paths []string
		for _, a := range h.log() {
			paths = append(paths, a.path)
		}
		if got, want := fmt.Sprint(paths), "[/robots.txt /a /b /b]"; got != want {
			t.Errorf("arrivals = %v, want %v", got, want)
		}
	})
}

// The robots.txt fetch is paced too: the first page departs one interval after it.
func TestRobotsFetchIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("robots.test", slowPage(0))
		c, _ := pacedCollector(n, WithBaseDelay(3*time.Second))
		visitAll(t, c, base, 1)
		log := h.log()
		if len(log) != 2 || log[0].path != "/robots.txt" {
			t.Fatalf("arrivals = %v, want robots.txt then the page", log)
		}
		if gap := log[1].at.Sub(log[0].at); gap != 3*time.Second {
			t.Errorf("page left %v after robots.txt, want 3s", gap)
		}
	})
}

// A page served from Colly's cache is not delayed and sends nothing.
func TestCachedPageIsNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("cache.test", slowPage(0))
		dir := t.TempDir()
		c, p := pacedCollector(n, WithBaseDelay(5*time.Second))
		c.CacheDir = dir
		visitAll(t, c, base, 2)
		sent := len(h.log())

		c2 := colly.NewCollector(colly.Async(true), colly.CacheDir(dir))
		p.Install(c2)
		start := time.Now()
		visitAll(t, c2, base, 2)
		if got := len(h.log()); got != sent {
			t.Errorf("cached visits sent %d requests", got-sent)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("cached visits waited %v, want 0", waited)
		}
	})
}

// Spacing holds when the user also sets a LimitRule with Parallelism.
func TestParallelismRuleKeepsSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("par.test", slowPage(3*time.Second))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 4}); err != nil {
			t.Fatal(err)
		}
		visitAll(t, c, base, 8)
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// Replacing the transport after installing is detected on the first response and said loudly, in the
// audit trail and to WithAlert; departures keep their spacing, since they wait in OnRequestHeaders.
func TestBypassedTransportDetected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("bypass.test", slowPage(0))
		var buf auditBuf
		var alerts atomic.Int32
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)),
			WithAlert(func(a Alert) {
				if a.Event == audit.EventPacingBypassed {
					alerts.Add(1)
				}
			}))
		c.WithTransport(n.tr) // the user's own transport, set after AdaptivePacing
		visitAll(t, c, base, 3)
		ev := findEvent(t, &buf, audit.EventPacingBypassed)
		if ev == nil || ev["level"] != "error" {
			t.Errorf("pacing_bypassed event = %v, want one at error level", ev)
		}
		if alerts.Load() != 1 {
			t.Errorf("%d pacing_bypassed alerts, want 1", alerts.Load())
		}
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// A LimitRule Delay stacked on top of pacing is detected and warned about.
func TestStackedLimitRuleDelayWarned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("stacked.test", slowPage(0))
		var buf auditBuf
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)))
		if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Delay: 500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		visitAll(t, c, base, 3)
		if ev := findEvent(t, &buf, audit.EventLimitRuleStacked); ev == nil || ev["level"] != "warn" {
			t.Errorf("limit_rule_stacked event = %v, want one at warn level", ev)
		}
	})
}

// Without a stacked LimitRule Delay, no warning.
func TestNoStackedWarningWithoutDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("plain.test", slowPage(0))
		var buf auditBuf
		c, _ := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)))
		visitAll(t, c, base, 3)
		if ev := findEvent(t, &buf, audit.EventLimitRuleStacked); ev != nil {
			t.Errorf("unexpected limit_rule_stacked event %v", ev)
		}
	})
}

// Cancelling the collector's context ends the waits: the waiting requests are not sent, and OnError
// sees an error that wraps context.Canceled, with neither Retrying nor Deferred.
func TestCancelEndsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("cancel.test", slowPage(0))
		c, p := pacedCollector(n, WithBaseDelay(10*time.Second), WithoutRobots())
		ctx, cancel := context.WithCancel(t.Context())
		c.Context = ctx
		var aborted atomic.Int32
		c.OnError(func(r *colly.Response, err error) {
			if errors.Is(err, context.Canceled) && !p.Retrying(r) && !p.Deferred(r) {
				aborted.Add(1)
			}
		})
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		visitAll(t, c, base, 3)
		if got := len(h.log()); got != 1 {
			t.Errorf("server saw %d requests, want only the first", got)
		}
		if got := aborted.Load(); got != 2 {
			t.Errorf("%d waits ended in OnError with context.Canceled, want 2", got)
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("Wait returned after %v, want 1s (at the cancellation)", waited)
		}
	})
}

// A cloned collector installed on the same Pacer shares each host's schedule.
func TestInstallSharesScheduleAcrossCollectors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("shared.test", slowPage(0))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots())
		c2 := c.Clone()
		p.Install(c2)
		for i := range 3 {
			if err := c.Visit(fmt.Sprintf("%s/p/a%d", base, i)); err != nil {
				t.Fatal(err)
			}
			if err := c2.Visit(fmt.Sprintf("%s/p/b%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Wait()
		c2.Wait()
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// A redirect hop to another host is paced by that host's robots.txt Crawl-delay, read first.
func TestRedirectToNewHostReadsItsRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, src := n.host("from.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			http.Redirect(w, r, "http://to.test"+r.URL.Path, http.StatusMovedPermanently)
		})
		dst, _ := n.host("to.test", robotsSite(200, "User-agent: *\nCrawl-delay: 4\n", nil))
		c, _ := pacedCollector(n, WithBaseDelay(time.Second))
		visitAll(t, c, src, 3)
		log := dst.log()
		if len(log) == 0 || log[0].path != "/robots.txt" {
			t.Fatalf("to.test arrivals = %v, want robots.txt first", log)
		}
		assertGaps(t, dst.gaps("/p/"), 4*time.Second)
	})
}

// Requests cut short because the collector's context ended are not the host's failure: no backoff,
// no retry.
func TestCrawlEndIsNotAHostFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("end.test", slowPage(5*time.Second))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots())
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		c.Context = ctx
		visitAll(t, c, base, 1)
		st, _ := p.Host("end.test")
		if st.AdaptiveDelay != time.Second || st.Retries != 0 {
			t.Errorf("adaptive delay %v, retries %d; want 1s and 0 after the crawl's own deadline", st.AdaptiveDelay, st.Retries)
		}
		if got := len(h.log()); got != 1 {
			t.Errorf("server saw %d requests, want 1", got)
		}
		time.Sleep(5 * time.Second) // let the server's handler finish inside the bubble
	})
}

// Issue 10 item 14: with ParseHTTPErrorResponse, refusals reach OnResponse instead of OnError; the
// pacer retries them all the same.
func TestParseHTTPErrorResponseStillRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var calls atomic.Int32
		h, base := n.host("flaky.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			if calls.Add(1) <= 2 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "ok")
		})
		c, p := pacedCollector(n, WithBaseDelay(100*time.Millisecond), WithoutRobots())
		c.ParseHTTPErrorResponse = true
		var ok atomic.Int32
		c.OnResponse(func(r *colly.Response) {
			if r.StatusCode == http.StatusOK {
				ok.Add(1)
			} else if !p.Retrying(r) {
				t.Errorf("refusal %d in OnResponse not marked as retrying", r.StatusCode)
			}
		})
		if err := c.Visit(base + "/p/0"); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		if got := len(h.log()); got != 3 || ok.Load() != 1 {
			t.Errorf("%d arrivals and %d pages fetched, want 3 and 1 (two refusals retried)", got, ok.Load())
		}
	})
}

// Issue 10 item 15: installing the same pacer twice on one collector paces each request once.
func TestInstallTwiceIsIdempotent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("twice.test", slowPage(0))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots())
		p.Install(c)
		visitAll(t, c, base, 3)
		assertGaps(t, h.gaps("/p/"), time.Second)
		if st, _ := p.Host("twice.test"); st.Departures != 3 {
			t.Errorf("%d departures counted for 3 requests", st.Departures)
		}
	})
}

// Issue 10 item 20: a departure's audit event carries this request's URL (no userinfo, no query unless
// asked), its wait in computed_delay_ms and wait_ms, its own jitter, and the interval in force, at the
// instant its headers reached the wire.
func TestDepartureEventTellsThisRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("audit.test", slowPage(0))
		var buf auditBuf
		c := colly.NewCollector(colly.Async(true))
		AdaptivePacing(c, WithTransport(n.tr), WithBaseDelay(time.Second), WithJitter(0.5), WithoutRobots(),
			WithLogger(zerolog.New(&buf)), withRandom(func() float64 { return 0.5 }))
		start := time.Now()
		for _, path := range []string{"/a?session=secret", "/b"} {
			if err := c.Visit(strings.Replace(base, "http://", "http://user:pw@", 1) + path); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		c.Wait()
		var deps []map[string]any
		for _, e := range events(t, &buf) {
			if e[audit.FieldEvent] == string(audit.EventDelayApplied) {
				deps = append(deps, e)
			}
		}
		if len(deps) != 2 {
			t.Fatalf("%d departure events, want 2", len(deps))
		}
		if deps[0][audit.FieldURL] != base+"/a" || deps[1][audit.FieldURL] != base+"/b" {
			t.Errorf("urls %v, %v; want %s/a (query and userinfo dropped) and %s/b", deps[0][audit.FieldURL], deps[1][audit.FieldURL], base, base)
		}
		// The second waited 1s + its jitter of 0.5 × 0.5 × 1s after the first.
		second := deps[1]
		if second[audit.FieldComputedDelay] != 1250.0 || second[audit.FieldWaitMS] != 1250.0 || second[audit.FieldJitterMS] != 250.0 || second[audit.FieldIntervalMS] != 1000.0 {
			t.Errorf("second departure: computed %v wait %v jitter %v interval %v; want 1250, 1250, 250, 1000",
				second[audit.FieldComputedDelay], second[audit.FieldWaitMS], second[audit.FieldJitterMS], second[audit.FieldIntervalMS])
		}
		if ts, _ := second[audit.FieldTimestamp].(string); ts != start.Add(1250*time.Millisecond).UTC().Format(time.RFC3339Nano) {
			t.Errorf("second departure at %s, want +1.25s", ts)
		}
	})
}

// Requests whose wait a cancellation ended are named in the trail: each departure_abandoned carries its
// URL, redacted as every URL is (no userinfo, no query).
func TestAbandonedDeparturesNameTheirURL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("cancel.test", slowPage(0))
		var buf auditBuf
		ctx, cancel := context.WithCancel(t.Context())
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)))
		c.Context = ctx
		defer p.Close()
		withUser := strings.Replace(base, "http://", "http://user:secret@", 1)
		for i := range 4 {
			if err := c.Visit(fmt.Sprintf("%s/p/%d?token=t%d", withUser, i, i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond) // two departed (t0, t0+1s), two wait in line
		cancel()
		c.Wait()
		var departed, abandoned, all []string // Colly starts the requests in any order
		for _, e := range events(t, &buf) {
			u, _ := e[audit.FieldURL].(string)
			switch e[audit.FieldEvent] {
			case string(audit.EventDelayApplied):
				departed = append(departed, u)
			case string(audit.EventDepartureAbandoned):
				abandoned = append(abandoned, u)
			}
		}
		all = append(slices.Clone(departed), abandoned...)
		slices.Sort(all)
		want := []string{base + "/p/0", base + "/p/1", base + "/p/2", base + "/p/3"}
		if len(abandoned) != 2 || !slices.Equal(all, want) {
			t.Errorf("departed %q, abandoned %q; want 2 of each, together %q", departed, abandoned, want)
		}
		if strings.Contains(buf.String(), "secret") || strings.Contains(buf.String(), "token=") {
			t.Errorf("the trail holds the userinfo or the query:\n%s", buf.String())
		}
	})
}
