package ext

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// queueCollector returns a synchronous collector paced over the fake network and a queue on it.
func queueCollector(n *fakeNet, workers int, opts ...Option) (*colly.Collector, *Pacer, *Queue) {
	c := colly.NewCollector()
	p := AdaptivePacing(c, append([]Option{WithTransport(n.tr), WithJitter(0)}, opts...)...)
	return c, p, NewQueue(p, workers)
}

// Requests to one host leave in the order they were queued.
func TestQueueKeepsHostOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("order.test", slowPage(0))
		c, _, q := queueCollector(n, 3, WithBaseDelay(time.Second), WithoutRobots())
		for i := range 6 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := servedPaths(h); got != "/p/0 /p/1 /p/2 /p/3 /p/4 /p/5" {
			t.Errorf("order at the server: %s", got)
		}
		assertGaps(t, h.gaps("/p/"), time.Second)
	})
}

// Hosts ready at the same time take turns.
func TestQueueIsFairBetweenHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var served serveOrder
		_, a := n.host("a.test", served.page("a"))
		_, b := n.host("b.test", served.page("b"))
		_, cc := n.host("c.test", served.page("c"))
		c, _, q := queueCollector(n, 1, WithBaseDelay(time.Second), WithoutRobots())
		for i := range 3 {
			for j, base := range []string{a, a, b, cc} { // a is queued twice as often
				_ = q.AddURL(fmt.Sprintf("%s/p/%d-%d", base, i, j))
			}
		}
		if err := q.AddURL(a + "/last"); err != nil {
			t.Fatal(err)
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		// One worker: a, b, c in turn while all are ready; a's extra requests wait for a's interval.
		if got := strings.Join(served.names()[:6], ""); got != "abcabc" {
			t.Errorf("first departures %s, want abcabc", got)
		}
	})
}

// No worker waits on a host while another is ready: a host with a 5 s Crawl-delay does not hold up
// a fast one, with a single worker.
func TestQueueNoHeadOfLineBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		slow, slowBase := n.host("slow.test", robotsSite(200, "User-agent: *\nCrawl-delay: 5\n", nil))
		fast, fastBase := n.host("fast.test", robotsSite(404, "", nil))
		c, _, q := queueCollector(n, 1, WithBaseDelay(100*time.Millisecond))
		for i := range 4 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", slowBase, i))
		}
		for i := range 20 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", fastBase, i))
		}
		start := time.Now()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		fastLog, slowLog := fast.log(), slow.log()
		if last := fastLog[len(fastLog)-1].at.Sub(start); last > 3*time.Second {
			t.Errorf("fast host finished at +%v, want within its own schedule (~2.1s), not behind the slow host", last)
		}
		assertGaps(t, slow.gaps("/p/"), 5*time.Second)
		if took := time.Since(start); took != slowLog[len(slowLog)-1].at.Sub(start) {
			t.Errorf("queue ran %v, want it to end with the slow host's last page", took)
		}
	})
}

// Over the memory bound, requests spill to the store and come back in order; none is lost, and the
// goroutines stay bounded by the workers whatever the number of URLs.
func TestQueueSpillsOverMemoryBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var peak atomic.Int32
		h, base := n.host("many.test", func(w http.ResponseWriter, r *http.Request) {
			if g := int32(runtime.NumGoroutine()); g > peak.Load() {
				peak.Store(g)
			}
			fmt.Fprint(w, "ok")
		})
		store := newMemoryStore()
		c := colly.NewCollector()
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(10*time.Millisecond), WithoutRobots(), WithStore(store))
		defer p.Close()
		q := NewQueue(p, 4, WithQueueMemory(50))
		before := runtime.NumGoroutine()
		for i := range 500 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%03d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		if spilled := len(spilledRows(store)); spilled != 450 {
			t.Errorf("%d requests spilled to the store, want 450 over the bound of 50", spilled)
		}
		if deferred, _ := store.ListDeferred(t.Context(), "", 0); len(deferred) != 0 {
			t.Errorf("the store lists %d of the queue's spilled requests as deferred, want none", len(deferred))
		}
		if deferred, _ := p.DeferredRequests(t.Context(), ""); len(deferred) != 0 {
			t.Errorf("DeferredRequests lists %d of the queue's spilled requests, want none: they are not deferred", len(deferred))
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		log := h.log()
		if len(log) != 500 {
			t.Fatalf("server saw %d requests, want 500", len(log))
		}
		for i, a := range log {
			if want := fmt.Sprintf("/p/%03d", i); a.path != want {
				t.Fatalf("request %d was %s, want %s: spilled requests out of order", i, a.path, want)
			}
		}
		if extra := int(peak.Load()) - before; extra > 4+16 {
			t.Errorf("%d goroutines beyond the baseline for 500 queued URLs, want about the 4 workers (plus connections)", extra)
		}
	})
}

// Requests of a parked host leave the ready set and come back when its cool-down ends; the others go on.
func TestQueueParkedHostComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var down atomic.Bool
		down.Store(true)
		flaky, flakyBase := n.host("flaky.test", flakySite(&down))
		ok, okBase := n.host("ok.test", slowPage(0))
		c, p, q := queueCollector(n, 2, WithBaseDelay(time.Second), WithMaxRetries(1),
			WithBreaker(BreakerPolicy{Failures: 2, Cooldown: time.Minute}), WithoutRobots())
		for i := range 5 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", flakyBase, i))
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", okBase, i))
		}
		fetched := map[string]bool{}
		var mu sync.Mutex
		c.OnResponse(func(r *colly.Response) {
			mu.Lock()
			fetched[r.Request.URL.String()] = true
			mu.Unlock()
		})
		go func() {
			time.Sleep(30 * time.Second)
			down.Store(false)
		}()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := len(ok.log()); got != 5 {
			t.Errorf("ok.test saw %d requests, want 5", got)
		}
		served := map[string]bool{}
		for _, a := range flaky.log() {
			served[a.path] = true
		}
		if len(served) != 5 {
			t.Errorf("flaky.test pages requested: %v, want all 5 after its breaker closed", served)
		}
		if len(fetched) != 10 {
			t.Errorf("pages fetched: %v, want all 10: deferred requests come back to the queue and are sent", fetched)
		}
		if st, _ := p.Host("flaky.test"); st.Breaker != audit.BreakerClosed {
			t.Errorf("breaker %v, want closed", st.Breaker)
		}
		if left, _ := p.DeferredRequests(t.Context(), ""); len(left) != 0 {
			t.Errorf("%d requests left deferred, want 0: the queue takes them back", len(left))
		}
	})
}

// Run refuses an Async collector: its goroutine per request is what the queue avoids.
func TestQueueRefusesAsyncCollector(t *testing.T) {
	c := colly.NewCollector(colly.Async(true))
	p := AdaptivePacing(c)
	if err := NewQueue(p, 2).Run(c); err != errAsyncCollector {
		t.Errorf("Run(async) = %v, want errAsyncCollector", err)
	}
}

// Run refuses a collector its pacer is not installed on: it would send unpaced.
func TestQueueRefusesUnpacedCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("unpaced.test", slowPage(0))
		p := NewPacer(WithTransport(n.tr), WithBaseDelay(500*time.Millisecond), WithoutRobots())
		q := NewQueue(p, 2)
		for i := range 3 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", base, i))
		}
		c := colly.NewCollector()
		c.WithTransport(n.tr)
		if err := q.Run(c); err == nil || len(h.log()) != 0 {
			t.Errorf("Run on an unpaced collector = %v with %d requests sent, want an error and none", err, len(h.log()))
		}
		if q.Size() != 3 {
			t.Errorf("%d queued after the refusal, want 3", q.Size())
		}
	})
}

// Run returns once the collector's context ends, with the context's error: what is left stays queued.
func TestQueueStopsWithCollectorContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("ctx.test", slowPage(0))
		c, _, q := queueCollector(n, 2, WithBaseDelay(time.Second), WithoutRobots())
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		c.Context = ctx
		for i := range 10 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", base, i))
		}
		if err := q.Run(c); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v, want the context's error: requests are left", err)
		}
		if left := q.Size(); left != 7 {
			t.Errorf("%d requests left queued, want 7 (3 sent at 0, 1, 2 s)", left)
		}
	})
}

// Among hosts ready at once, the one with the longest remaining schedule goes first: it sets the end
// of the crawl, and the others fit in its gaps.
func TestQueueLongestScheduleFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var served serveOrder
		_, short := n.host("short.test", served.page("s"))
		_, long := n.host("long.test", served.page("l"))
		c, _, q := queueCollector(n, 1, WithBaseDelay(time.Second), WithoutRobots())
		for i := range 2 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", short, i))
		}
		for i := range 6 {
			_ = q.AddURL(fmt.Sprintf("%s/p/%d", long, i))
		}
		start := time.Now()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if order := served.names(); order[0] != "l" {
			t.Errorf("departures %v: the host with 6 requests should go before the one with 2", order)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("crawl took %v, want 5s: the long host's own schedule", took)
		}
	})
}

// serveOrder records which host served each page, in order.
type serveOrder struct {
	mu    sync.Mutex
	order []string
}

// page is a handler serving "ok" as the host name.
func (o *serveOrder) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		o.mu.Lock()
		o.order = append(o.order, name)
		o.mu.Unlock()
		fmt.Fprint(w, "ok")
	}
}

func (o *serveOrder) names() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.order...)
}

// refuseFirst answers 429 with Retry-After: 1 to the first request of each path (and of each POST
// body), then "ok"; it records the bodies it received.
type refuseFirst struct {
	mu     sync.Mutex
	seen   map[string]bool
	bodies []string
}

func (s *refuseFirst) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodPost {
		s.bodies = append(s.bodies, string(body))
	}
	key := r.Method + " " + r.URL.Path
	if !s.seen[key] {
		if s.seen == nil {
			s.seen = map[string]bool{}
		}
		s.seen[key] = true
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "ok")
}

// issue 10 item 16: a request the queue sends and the host refuses comes back through the queue and
// is sent again after the window: a GET despite Colly's revisit check, a POST with its body.
func TestQueueRetriesRefusedRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		var site refuseFirst
		h, base := n.host("refuse.test", site.serve)
		c, p, q := queueCollector(n, 2, WithBaseDelay(100*time.Millisecond), WithoutRobots())
		var ok atomic.Int32
		c.OnResponse(func(*colly.Response) { ok.Add(1) })
		for i := range 3 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		req, err := c.UnmarshalRequest([]byte(`{"URL":"` + base + `/form","Method":"POST","Depth":1,"Body":"` +
			base64.StdEncoding.EncodeToString([]byte("a=1&b=2")) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AddRequest(req); err != nil {
			t.Fatal(err)
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := ok.Load(); got != 4 {
			t.Errorf("%d pages fetched after their retry, want all 4 (server saw %d requests)", got, len(h.log()))
		}
		site.mu.Lock()
		bodies := strings.Join(site.bodies, " | ")
		site.mu.Unlock()
		if bodies != "a=1&b=2 | a=1&b=2" {
			t.Errorf("POST bodies at the server: %q, want the body twice (refused, then retried)", bodies)
		}
		if st, _ := p.Host("refuse.test"); st.Retries != 4 {
			t.Errorf("%d retries counted, want 4", st.Retries)
		}
	})
}

// issue 10 item 16: requests the pacer deferred while their host was parked come back through the queue
// when its cool-down ends and are sent, although Colly marked their URLs visited when first requested.
func TestQueueSendsAbsorbedDeferredRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("park.test", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/p/0" {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "ok")
		})
		c, p, q := queueCollector(n, 1, WithMaxRetries(0), WithoutRobots(), WithBreaker(BreakerPolicy{Failures: 1, Cooldown: time.Minute}))
		var ok atomic.Int32
		c.OnResponse(func(*colly.Response) { ok.Add(1) })
		for i := range 3 { // p/0 is refused and opens the breaker; p/1 and p/2 are deferred
			_ = c.Visit(fmt.Sprintf("%s/p/%d", base, i))
		}
		if d, _ := p.DeferredRequests(t.Context(), ""); len(d) != 2 {
			t.Fatalf("%d requests deferred, want 2", len(d))
		}
		_ = q.AddURL(base + "/p/3")
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := ok.Load(); got != 3 {
			t.Errorf("%d pages fetched, want 3: p/1 and p/2 (deferred, absorbed by the queue) and p/3", got)
		}
	})
}

// spilledRows returns the requests spilled in m, every host's, leaving them there.
func spilledRows(m *memoryStore) []DeferredRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeferredRequest
	for _, rs := range m.spilled {
		out = append(out, rs...)
	}
	return out
}

// lockCheckStore fails a test when the Queue's store I/O runs under the Queue's lock (one worker: no
// other goroutine holds it while the worker does the I/O).
type lockCheckStore struct {
	*memoryStore
	t *testing.T
	q atomic.Pointer[Queue]
}

func (s *lockCheckStore) check(op string) {
	q := s.q.Load()
	if q == nil {
		return
	}
	if !q.mu.TryLock() {
		s.t.Errorf("%s runs under the Queue's lock", op)
		return
	}
	q.mu.Unlock()
}

func (s *lockCheckStore) LoadHost(ctx context.Context, host string) (StoredHost, bool, error) {
	s.check("LoadHost")
	return s.memoryStore.LoadHost(ctx, host)
}

func (s *lockCheckStore) ListDeferred(ctx context.Context, host string, limit int) ([]DeferredRequest, error) {
	s.check("ListDeferred")
	return s.memoryStore.ListDeferred(ctx, host, limit)
}

func (s *lockCheckStore) SpillRequests(ctx context.Context, host string, reqs []DeferredRequest) error {
	s.check("SpillRequests")
	return s.memoryStore.SpillRequests(ctx, host, reqs)
}

func (s *lockCheckStore) TakeSpilled(ctx context.Context, host string, limit int) ([]DeferredRequest, error) {
	s.check("TakeSpilled")
	return s.memoryStore.TakeSpilled(ctx, host, limit)
}

// The Queue reads and writes the store with its lock released: spilling, refilling, and restoring a
// host's stored state before it reads its schedule.
func TestQueueStoreIOOutsideLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("io.test", slowPage(0))
		store := &lockCheckStore{memoryStore: newMemoryStore(), t: t}
		st := StoredHost{Host: "io.test", Version: StateVersion, AdaptiveDelay: 2 * time.Second}
		if err := store.SaveHosts(t.Context(), []StoredHost{st}); err != nil {
			t.Fatal(err)
		}
		c := colly.NewCollector()
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(time.Second), WithoutRobots(), WithStore(store))
		defer p.Close()
		q := NewQueue(p, 1, WithQueueMemory(2))
		store.q.Store(q)
		for i := range 6 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if len(h.log()) != 6 {
			t.Fatalf("server saw %d requests, want 6", len(h.log()))
		}
		if gaps := h.gaps("/p/"); gaps[0] != 2*time.Second {
			t.Errorf("first gap %v, want the stored adaptive delay of 2s: restored before the schedule was read", gaps[0])
		}
	})
}

// Spilled requests that are no longer in the store (taken by someone else, or undecodable) are
// counted out and audited: the others are sent and Run ends.
func TestQueueSpilledGoneFromStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("gone.test", slowPage(0))
		store := newMemoryStore()
		var buf auditBuf
		c := colly.NewCollector()
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(time.Second), WithoutRobots(), WithStore(store),
			WithLogger(zerolog.New(&buf)))
		defer p.Close()
		q := NewQueue(p, 2, WithQueueMemory(2))
		for i := range 5 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		if taken, _ := store.TakeSpilled(t.Context(), "gone.test", 1); len(taken) != 1 {
			t.Fatalf("took %d spilled requests behind the queue's back, want 1", len(taken))
		}
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if got := servedPaths(h); got != "/p/0 /p/1 /p/3 /p/4" {
			t.Errorf("order at the server: %s, want every request still stored, in order", got)
		}
		if q.Size() != 0 {
			t.Errorf("queue size %d after Run, want 0", q.Size())
		}
		if e := findEvent(t, &buf, audit.EventStateCorrupt); e == nil || !strings.Contains(fmt.Sprint(e[audit.FieldDetail]), "1 spilled requests are no longer in the store") {
			t.Errorf("state_corrupt event %v, want one saying 1 spilled request is gone", e)
		}
	})
}

// servedPaths returns the paths h served, in order, space-separated.
func servedPaths(h *fakeHost) string {
	var paths []string
	for _, a := range h.log() {
		paths = append(paths, a.path)
	}
	return strings.Join(paths, " ")
}
