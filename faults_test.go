package ext

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// Fault tests run real Colly crawls through AdaptivePacing against a loopback fault server. They assert
// what a user relies on whatever a server does: no goroutine leak, no panic, every URL accounted for
// (fetched, deferred, or a final failure the user's OnError sees), the delay backing off and coming
// back, the breaker parking a dead host. Nothing here bounds wall-clock time: faults are planned by
// request count, and recovery is measured in responses. Exact timings are tested in synctest.

const (
	faultBase    = 20 * time.Millisecond  // base delay: keeps the crawls short
	faultCeiling = 200 * time.Millisecond // ceiling of the adaptive delay
	faultTimeout = 300 * time.Millisecond // the collector's request timeout
)

// URL fates as the user's callbacks see them.
const (
	fateFetched  = "fetched"  // OnResponse
	fateDeferred = "deferred" // OnError with Pacer.Deferred
	fateFailed   = "failed"   // OnError, neither Retrying nor Deferred: the final failure
)

// faultCrawl is a paced collector crawling a fault server, recording each URL's fate.
type faultCrawl struct {
	t   *testing.T
	srv *faultServer
	c   *colly.Collector
	p   *Pacer
	buf auditBuf
	al  alerts

	mu      sync.Mutex // protects the fields below
	fate    map[string]string
	fetched map[string]int
	failed  map[string]int
	visited []string
}

// newFaultCrawl starts a fault server following plan and a paced async collector on it. When the test
// ends the server and connections are closed, then no goroutine started during the test may remain.
func newFaultCrawl(t *testing.T, plan func(int) fault, opts ...Option) *faultCrawl {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) }) // registered first, so it runs last
	fc := &faultCrawl{t: t, fate: map[string]string{}, fetched: map[string]int{}, failed: map[string]int{}}
	fc.srv = newFaultServer(t, plan)
	// One connection per request: http.Transport would otherwise silently resend a GET that failed
	// on a reused connection, and the server would count a request the pacer never saw.
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	fc.c = colly.NewCollector(colly.Async(true))
	fc.p = AdaptivePacing(fc.c, append([]Option{
		WithTransport(tr), WithBaseDelay(faultBase), WithMaxDelay(faultCeiling), WithJitter(0),
		WithLogger(zerolog.New(&fc.buf)), WithAlert(fc.al.add),
	}, opts...)...)
	fc.c.SetRequestTimeout(faultTimeout)
	t.Cleanup(func() { _ = fc.p.Close() })

	// The URL first visited travels in the request's Ctx: retries share it, Drain restores it.
	fc.c.OnRequest(func(r *colly.Request) {
		if r.Ctx.Get("fault_url") == "" {
			r.Ctx.Put("fault_url", r.URL.String())
		}
	})
	fc.c.OnResponse(func(r *colly.Response) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		u := r.Ctx.Get("fault_url")
		fc.fate[u] = fateFetched
		fc.fetched[u]++
	})
	fc.c.OnError(func(r *colly.Response, _ error) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		u := r.Ctx.Get("fault_url")
		switch {
		case fc.p.Deferred(r):
			fc.fate[u] = fateDeferred
		case fc.p.Retrying(r):
		default:
			fc.fate[u] = fateFailed
			fc.failed[u]++
		}
	})
	return fc
}

// crawl visits n pages under prefix and waits for every request, retries included.
func (fc *faultCrawl) crawl(prefix string, n int) {
	fc.t.Helper()
	for i := range n {
		u := fmt.Sprintf("%s/%s/%d", fc.srv.srv.URL, prefix, i)
		fc.mu.Lock()
		fc.visited = append(fc.visited, u)
		fc.mu.Unlock()
		if err := fc.c.Visit(u); err != nil {
			fc.t.Fatalf("visit %s: %v", u, err)
		}
	}
	fc.c.Wait()
}

// account checks that every URL visited so far has exactly one fate, that no URL was fetched or
// finally failed twice, and that the deferred ones are exactly those the pacer keeps. It returns the
// number of URLs of each fate.
func (fc *faultCrawl) account() map[string]int {
	fc.t.Helper()
	pending, err := fc.p.DeferredRequests(fc.t.Context(), "")
	if err != nil {
		fc.t.Fatal(err)
	}
	kept := map[string]int{}
	for _, d := range pending {
		kept[d.Ctx["fault_url"]]++
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	counts := map[string]int{}
	for _, u := range fc.visited {
		f := fc.fate[u]
		counts[f]++
		switch {
		case f == "":
			fc.t.Errorf("%s lost: neither fetched, deferred, nor seen failing by OnError", u)
		case fc.fetched[u] > 1 || fc.failed[u] > 1 || fc.fetched[u]+fc.failed[u] > 1:
			fc.t.Errorf("%s: fetched %d times, failed %d times; want one final outcome", u, fc.fetched[u], fc.failed[u])
		case f == fateDeferred && kept[u] != 1:
			fc.t.Errorf("%s: OnError saw it deferred, but the pacer keeps %d deferred requests for it", u, kept[u])
		case f != fateDeferred && kept[u] != 0:
			fc.t.Errorf("%s is %s, yet still among the deferred requests", u, f)
		}
	}
	return counts
}

// increases returns the delay_increased events with the given trigger.
func (fc *faultCrawl) increases(trigger audit.Trigger) []map[string]any {
	var out []map[string]any
	for _, e := range events(fc.t, &fc.buf) {
		if e[audit.FieldEvent] == string(audit.EventDelayIncreased) && e[audit.FieldTrigger] == string(trigger) {
			out = append(out, e)
		}
	}
	return out
}

// adaptive returns the host's adaptive delay and its recovery target (the floor, or the capacity
// model's good interval when it is above it).
func (fc *faultCrawl) adaptive() (delay, target time.Duration) {
	h, ok := fc.p.hosts.Load(fc.srv.host())
	if !ok {
		fc.t.Fatalf("host %s unknown to the pacer", fc.srv.host())
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.delay.Delay(), max(h.policy.BaseDelay, h.delay.Good())
}

// recovers sends clean requests one at a time until the adaptive delay is back at its recovery target,
// and fails when 60 are not enough. Counted in responses, not seconds.
func (fc *faultCrawl) recovers() {
	fc.t.Helper()
	for i := range 60 {
		if d, target := fc.adaptive(); d <= target {
			return
		}
		fc.crawl(fmt.Sprintf("recover%d", i), 1)
	}
	d, target := fc.adaptive()
	fc.t.Errorf("adaptive delay %v after 60 clean responses, want back at its recovery target %v", d, target)
}

func (fc *faultCrawl) events(name audit.Event) int {
	n := 0
	for _, e := range events(fc.t, &fc.buf) {
		if e[audit.FieldEvent] == string(name) {
			n++
		}
	}
	return n
}

// A transient fault (the first three page requests meet it) is survived: every URL is fetched on a
// retry, the delay backs off on the failure and comes back to its target once the host answers.
func TestFaultsBackOffAndRecover(t *testing.T) {
	for _, f := range []fault{faultHangAfterHeaders, faultReset, faultSlow, faultCloseMidBody} {
		t.Run(f.String(), func(t *testing.T) {
			fc := newFaultCrawl(t, faultsFor(f, 3))
			fc.crawl("p", 4)
			if got := fc.srv.count(f); got != 3 {
				t.Fatalf("server injected %d faults, want 3", got)
			}
			if counts := fc.account(); counts[fateFetched] != 4 {
				t.Errorf("fates %v, want all 4 URLs fetched on a retry", counts)
			}
			if st, _ := fc.p.Host(fc.srv.host()); st.Refusals == 0 {
				t.Errorf("host counted no refusal after 3 %s faults", f)
			}
			if len(fc.increases(audit.TriggerTransportError)) == 0 {
				t.Errorf("no delay_increased event with trigger transport_error after 3 %s faults", f)
			}
			fc.recovers()
		})
	}
}

// A host that keeps failing is parked by its breaker after Failures consecutive failures: the
// requests still to go are deferred, not sent again and again, and none is lost.
func TestFaultPersistentParksHost(t *testing.T) {
	for _, f := range []fault{faultHangAfterHeaders, faultReset, faultSlow, faultCloseMidBody} {
		t.Run(f.String(), func(t *testing.T) {
			fc := newFaultCrawl(t, func(int) fault { return f },
				WithBreaker(BreakerPolicy{Failures: 3, Cooldown: time.Hour}))
			fc.crawl("p", 6)
			counts := fc.account()
			if st, _ := fc.p.Host(fc.srv.host()); st.Breaker != audit.BreakerOpen {
				t.Errorf("breaker %v after %d %s faults in a row, want open (Failures: 3)", st.Breaker, fc.srv.count(f), f)
			}
			if counts[fateDeferred] == 0 {
				t.Errorf("fates %v, want the requests left deferred", counts)
			}
			if fmt.Sprint(fc.al.events()) != "["+string(audit.EventBreakerOpened)+"]" {
				t.Errorf("alerts %v, want one breaker_opened", fc.al.events())
			}
			// Before the trip at most MaxInFlight requests were under way; after it nothing departs.
			if got := fc.srv.count(f); got > 3+DefaultMaxInFlight {
				t.Errorf("server saw %d requests to a dead host, want at most %d", got, 3+DefaultMaxInFlight)
			}
		})
	}
}

// A persistent fault with the breaker's failure count disabled: every URL is tried 1 + MaxRetries
// times, then the user's OnError sees it once as a final failure (Retrying false).
func TestFaultRetriesExhaustedAreFinalFailures(t *testing.T) {
	fc := newFaultCrawl(t, func(int) fault { return faultReset },
		WithMaxRetries(2), WithBreaker(BreakerPolicy{Failures: -1}))
	fc.crawl("p", 3)
	if counts := fc.account(); counts[fateFailed] != 3 {
		t.Errorf("fates %v, want 3 final failures", counts)
	}
	if got := fc.srv.count(faultReset); got != 9 {
		t.Errorf("server saw %d attempts, want 9 (3 URLs × (1 + 2 retries))", got)
	}
	if got := fc.events(audit.EventRetriesExhausted); got != 3 {
		t.Errorf("%d retries_exhausted events, want 3", got)
	}
	if st, _ := fc.p.Host(fc.srv.host()); st.Retries != 6 || st.InFlight != 0 {
		t.Errorf("retries %d, in flight %d; want 6 and 0", st.Retries, st.InFlight)
	}
}

// A host flapping between 200 and 503 is backed off on each 503 and recovers when it settles; half
// its answers succeed, so it is never parked. Every URL is fetched or finally failed.
func TestFaultFlapping(t *testing.T) {
	fc := newFaultCrawl(t, func(n int) fault {
		if n <= 12 && n%2 == 1 {
			return fault503
		}
		return faultNone
	}, WithMaxRetries(5))
	fc.crawl("p", 8)
	counts := fc.account()
	if counts[fateFetched]+counts[fateFailed] != 8 {
		t.Errorf("fates %v, want each of 8 URLs fetched or finally failed", counts)
	}
	if got := fc.srv.count(fault503); got != 6 {
		t.Errorf("server sent %d 503s, want 6", got)
	}
	incs := fc.increases(audit.TriggerRefusal)
	if len(incs) == 0 {
		t.Error("no delay_increased event with trigger refusal")
	}
	for _, e := range incs {
		if ms := e[audit.FieldComputedDelay].(float64); ms > float64(faultCeiling.Milliseconds()) {
			t.Errorf("delay increased to %v ms, above the %v ceiling", ms, faultCeiling)
		}
	}
	if fc.events(audit.EventBreakerOpened) != 0 {
		t.Error("breaker opened on a host answering every other request")
	}
	fc.recovers()
}

// A host answering 429 to everything for a while trips its breaker; after the cool-down Drain sends
// the deferred requests, the first as the probe, and the breaker closes once the host answers.
// Every URL is fetched in the end, exactly once.
func TestFault429StormTripsAndClosesBreaker(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	fc := newFaultCrawl(t, faultsFor(fault429, 4),
		WithBreaker(BreakerPolicy{Failures: 3, Cooldown: cooldown}))
	fc.crawl("p", 10)
	counts := fc.account()
	if counts[fateDeferred] == 0 {
		t.Fatalf("fates %v, want requests deferred while the breaker is open", counts)
	}
	if fc.events(audit.EventBreakerHalfOpen) == 0 { // no probe yet (the crawl ended within the cool-down)
		if st, _ := fc.p.Host(fc.srv.host()); st.Breaker != audit.BreakerOpen {
			t.Errorf("breaker %v, want open", st.Breaker)
		}
	}
	for round := 0; ; round++ {
		pending, err := fc.p.DeferredRequests(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 {
			break
		}
		if round == 10 {
			t.Fatalf("%d requests still deferred after 10 cool-downs", len(pending))
		}
		time.Sleep(cooldown)
		if _, err := fc.p.Drain(t.Context(), fc.c); err != nil {
			t.Fatal(err)
		}
		fc.c.Wait()
	}
	if counts := fc.account(); counts[fateFetched] != 10 {
		t.Errorf("fates %v, want all 10 URLs fetched after draining", counts)
	}
	if got := fc.srv.count(fault429); got != 4 {
		t.Errorf("server sent %d 429s, want 4", got)
	}
	if st, _ := fc.p.Host(fc.srv.host()); st.Breaker != audit.BreakerClosed || st.InFlight != 0 {
		t.Errorf("breaker %v, in flight %d; want closed and 0", st.Breaker, st.InFlight)
	}
	var order []audit.Event
	for _, e := range events(t, &fc.buf) {
		if ev := audit.Event(e[audit.FieldEvent].(string)); slices.Contains([]audit.Event{audit.EventBreakerOpened, audit.EventBreakerHalfOpen, audit.EventBreakerClosed}, ev) {
			order = append(order, ev)
		}
	}
	if len(order) < 3 || order[0] != audit.EventBreakerOpened || order[len(order)-1] != audit.EventBreakerClosed {
		t.Errorf("breaker events %v, want opened … half-open … closed", order)
	}
	if al := fc.al.events(); len(al) == 0 || al[0] != audit.EventBreakerOpened {
		t.Errorf("alerts %v, want breaker_opened", al)
	}
}

// A URL with userinfo departs once: Go's http.Client copies the header map to add Authorization, and
// the pacer's transport must still recognise the request that already waited in OnRequestHeaders
// instead of booking a second departure (and holding a second in-flight slot) for it.
func TestUserinfoRequestDepartsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, _ := n.host("auth.test", slowPage(0))
		var buf auditBuf
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithoutRobots(), WithLogger(zerolog.New(&buf)))
		start := time.Now()
		visitAll(t, c, "http://user:pw@auth.test", 3)
		assertGaps(t, h.gaps("/p/"), time.Second)
		if st, _ := p.Host("auth.test"); st.Departures != 3 {
			t.Errorf("%d departures for 3 requests, want 3", st.Departures)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Errorf("3 requests took %v, want 2s (two intervals)", waited)
		}
		if ev := findEvent(t, &buf, audit.EventPacingBypassed); ev != nil {
			t.Errorf("pacing_bypassed although the transport is the pacer's: %v", ev[audit.FieldDetail])
		}
	})
}

// A half-open probe that never reaches the network (another OnRequestHeaders callback aborts it) must
// not wedge its host: the next request becomes the probe, instead of waiting forever for an outcome
// that will never come.
func TestAbortedProbeDoesNotWedgeHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var down atomic.Bool
		down.Store(true)
		h, base := n.host("probe.test", flakySite(&down))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0), WithoutRobots(),
			WithBreaker(BreakerPolicy{Failures: 1, Cooldown: time.Minute}))
		c.OnRequestHeaders(func(r *colly.Request) {
			if strings.HasSuffix(r.URL.Path, "/abort") {
				r.Abort()
			}
		})
		visitAll(t, c, base, 1) // refused: the breaker opens
		if st, _ := p.Host("probe.test"); st.Breaker != audit.BreakerOpen {
			t.Fatalf("breaker %v, want open", st.Breaker)
		}
		down.Store(false)
		time.Sleep(time.Minute)
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour) // a wedged host fails the test at +1 h (fake time)
		defer cancel()
		c.Context = ctx
		start := time.Now()
		for _, path := range []string{"/abort", "/next"} { // the first is the probe, and never leaves
			if err := c.Visit(base + path); err != nil {
				t.Fatal(err)
			}
			c.Wait()
		}
		if waited := time.Since(start); waited >= time.Hour {
			t.Errorf("the request after an aborted probe waited %v, until the collector's context ended", waited)
		}
		if log := h.log(); log[len(log)-1].path != "/next" {
			t.Errorf("server never saw /next: %v", log)
		}
		if st, _ := p.Host("probe.test"); st.Breaker != audit.BreakerClosed {
			t.Errorf("breaker %v, want closed after /next succeeded as the probe", st.Breaker)
		}
	})
}
