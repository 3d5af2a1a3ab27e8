package ext

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// flakySite answers 503 while down is true, 200 otherwise.
func flakySite(down *atomic.Bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r)
		case down.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			fmt.Fprint(w, "ok")
		}
	}
}

type alerts struct {
	mu   sync.Mutex
	list []Alert
}

func (a *alerts) add(x Alert) { a.mu.Lock(); a.list = append(a.list, x); a.mu.Unlock() }
func (a *alerts) events() []audit.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []audit.Event
	for _, x := range a.list {
		out = append(out, x.Event)
	}
	return out
}

// A host that keeps refusing trips its breaker: the requests still waiting are deferred, not sent,
// an alert is raised; after the cool-down, Drain sends them again, the first as the half-open
// probe, and the breaker closes when it succeeds. No URL is lost.
func TestBreakerTripDeferProbeCloseDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var down atomic.Bool
		down.Store(true)
		h, base := n.host("flaky.test", flakySite(&down))
		var buf auditBuf
		var al alerts
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxDelay(2*time.Second), WithMaxRetries(0),
			WithBreaker(BreakerPolicy{Failures: 3, Cooldown: time.Minute}), WithAlert(al.add), WithLogger(zerolog.New(&buf)))
		var deferred atomic.Int32
		c.OnError(func(r *colly.Response, err error) {
			if p.Deferred(r) {
				deferred.Add(1)
			}
		})
		visitAll(t, c, base, 6)
		if got := len(h.gaps("/p/")) + 1; got != 3 {
			t.Errorf("server saw %d page requests, want 3 before the breaker opened", got)
		}
		if got := deferred.Load(); got != 3 {
			t.Errorf("OnError saw %d deferred requests, want 3", got)
		}
		if fmt.Sprint(al.events()) != "["+string(audit.EventBreakerOpened)+"]" {
			t.Errorf("alerts = %v, want one breaker_opened", al.events())
		}
		if st, _ := p.Host("flaky.test"); st.Breaker != audit.BreakerOpen {
			t.Errorf("breaker = %v, want open", st.Breaker)
		}
		pending, err := p.DeferredRequests(t.Context(), "")
		if err != nil || len(pending) != 3 {
			t.Fatalf("deferred requests = %d (%v), want 3", len(pending), err)
		}

		// Still cooling down: Drain leaves them.
		if got, _ := p.Drain(t.Context(), c); got != 0 {
			t.Errorf("Drain during the cool-down handed back %d, want 0", got)
		}
		down.Store(false)
		time.Sleep(time.Minute)
		if got, err := p.Drain(t.Context(), c); got != 3 || err != nil {
			t.Errorf("Drain = %d, %v; want 3", got, err)
		}
		c.Wait()
		if got := len(h.gaps("/p/")) + 1; got != 6 {
			t.Errorf("server saw %d page requests in all, want 6 (3 + 3 drained)", got)
		}
		if st, _ := p.Host("flaky.test"); st.Breaker != audit.BreakerClosed {
			t.Errorf("breaker = %v after a good probe, want closed", st.Breaker)
		}
		if left, _ := p.DeferredRequests(t.Context(), ""); len(left) != 0 {
			t.Errorf("%d deferred requests left after draining", len(left))
		}
		for _, ev := range []audit.Event{audit.EventBreakerOpened, audit.EventRequestDeferred, audit.EventBreakerHalfOpen, audit.EventBreakerClosed, audit.EventDeferredDrained} {
			if findEvent(t, &buf, ev) == nil {
				t.Errorf("no %s event in the audit trail", ev)
			}
		}
	})
}

// A failed probe opens the breaker again and the probe's request is deferred again: nothing is lost.
func TestBreakerProbeFailureReopens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var down atomic.Bool
		down.Store(true)
		_, base := n.host("down.test", flakySite(&down))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithMaxRetries(0),
			WithBreaker(BreakerPolicy{Failures: 2, Cooldown: time.Minute}))
		visitAll(t, c, base, 4)
		time.Sleep(time.Minute)
		if _, err := p.Drain(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		c.Wait()
		if st, _ := p.Host("down.test"); st.Breaker != audit.BreakerOpen {
			t.Errorf("breaker = %v after a failed probe, want open", st.Breaker)
		}
		// The probe failed (its request is a refusal the user sees); the others were deferred again.
		if left, _ := p.DeferredRequests(t.Context(), ""); len(left) != 1 {
			t.Errorf("%d requests deferred after the failed probe, want 1", len(left))
		}
	})
}

// A Retry-After above the cap parks the host by default.
func TestBreakerTripsOnRetryAfterAboveCap(t *testing.T) {
	p := NewPacer(WithMaxRetryAfter(time.Minute))
	p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: header("Retry-After", "3600")}, t0)
	if st, _ := p.HostAt("h", t0); st.Breaker != audit.BreakerOpen {
		t.Errorf("breaker = %v after Retry-After: 3600 over a 1 min cap, want open", st.Breaker)
	}
}

// Wait on a parked host fails at once with ErrBreakerOpen: it does not join the host's line first.
func TestWaitOnParkedHostFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPacer(WithMaxRetryAfter(time.Minute))
		start := time.Now()
		p.ObserveAt(p.ReserveAt("h", start), Outcome{Status: 429, Header: header("Retry-After", "3600")}, start)
		if _, _, err := p.Wait(t.Context(), "h"); err != ErrBreakerOpen || time.Since(start) != 0 {
			t.Errorf("Wait on a parked host: %v after %v, want ErrBreakerOpen at once", err, time.Since(start))
		}
	})
}

// A Crawl-delay above the cap parks the host until robots.txt asks for less.
func TestBreakerParksHostOverCrawlDelayCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("slowbot.test", robotsSite(200, "User-agent: *\nCrawl-delay: 600\n", nil))
		c, p := pacedCollector(n, WithBaseDelay(time.Second), WithBreaker(BreakerPolicy{Cooldown: time.Minute}))
		visitAll(t, c, base, 3)
		if got := len(h.log()); got != 1 {
			t.Errorf("server saw %d requests, want only robots.txt", got)
		}
		time.Sleep(2 * time.Minute) // past the cool-down: still parked
		if got, _ := p.Drain(context.Background(), c); got != 0 {
			t.Errorf("Drain handed back %d requests of a host still over the cap, want 0", got)
		}
		if left, _ := p.DeferredRequests(t.Context(), ""); len(left) != 3 {
			t.Errorf("%d deferred, want 3", len(left))
		}
	})
}
