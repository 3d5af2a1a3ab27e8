package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// ext.Queue on the fleet's frontier, against a real redis-server: several crawler processes (each its
// own collector, pacer, Queue and Redis client) crawl many hosts of one loopback server, told apart
// by the Host header.

// frontierSite logs each page's arrivals by host and URL; every page links to the next pages of its
// host, so that the processes discover (and add) the same URLs.
type frontierSite struct {
	srv   *httptest.Server
	pages int
	mu    sync.Mutex
	seen  map[string][]time.Time // URL → arrivals
}

func newFrontierSite(t *testing.T, pages int) *frontierSite {
	s := &frontierSite{pages: pages, seen: map[string][]time.Time{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := "http://" + r.Host + r.URL.Path
		s.mu.Lock()
		s.seen[u] = append(s.seen[u], time.Now())
		s.mu.Unlock()
		var n int
		_, _ = fmt.Sscanf(r.URL.Path, "/p/%d", &n)
		fmt.Fprint(w, "<html><body>")
		for i := n + 1; i < min(n+3, pages); i++ {
			fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// transport sends every host's requests to the one server.
func (s *frontierSite) transport() *http.Transport {
	addr := s.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

func (s *frontierSite) arrivals() map[string][]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]time.Time{}
	for u, at := range s.seen {
		out[u] = slices.Clone(at)
	}
	return out
}

// check asserts that every page of hosts arrived exactly once (dup allows URLs to arrive twice: those
// a dead owner had in flight) and that no host saw two pages closer than interval, timer noise aside.
// The server reads a request when its handler runs, which a loaded machine can delay for one request
// and not the next: a gap short at the server is the fleet's only when the two departures' wire
// instants (their delay_applied timestamps in the members' trails) are that close too, or one of them
// is unknown (a member without a trail).
func (s *frontierSite) check(t *testing.T, hosts int, interval time.Duration, dup map[string]bool, members ...*frontierMember) {
	t.Helper()
	got := s.arrivals()
	type arrival struct {
		at  time.Time
		url string
	}
	byHost := map[string][]arrival{}
	for h := range hosts {
		host := fmt.Sprintf("h%d.test", h)
		for p := range s.pages {
			u := fmt.Sprintf("http://%s/p/%d", host, p)
			n := len(got[u])
			if n == 0 || n > 1 && !(dup[u] && n == 2) {
				t.Errorf("%s arrived %d times, want once", u, n)
			}
			for _, at := range got[u] {
				byHost[host] = append(byHost[host], arrival{at, u})
			}
		}
	}
	wire := wireInstantsOf(members)
	for host, as := range byHost {
		slices.SortFunc(as, func(a, b arrival) int { return a.at.Compare(b.at) })
		for i := 1; i < len(as); i++ {
			gap := as[i].at.Sub(as[i-1].at)
			if gap >= interval-timerNoise {
				continue
			}
			w0, w1 := wireBefore(wire[as[i-1].url], as[i-1].at), wireBefore(wire[as[i].url], as[i].at)
			if !w0.IsZero() && !w1.IsZero() && w1.Sub(w0) >= interval-time.Millisecond {
				t.Logf("%s: %s and %s %v apart at the server, %v at the wire: read late", host, as[i-1].url, as[i].url, gap, w1.Sub(w0))
				continue
			}
			t.Errorf("%s: two pages %v apart, under its %v interval (%s, %s)", host, gap, interval, as[i-1].url, as[i].url)
		}
	}
}

// wireInstantsOf returns, by URL, the instants the members' requests reached the wire: their
// delay_applied events' timestamps (a member without a trail says nothing).
func wireInstantsOf(members []*frontierMember) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, m := range members {
		if m == nil || m.trail == nil {
			continue
		}
		for line := range strings.SplitSeq(m.trail.String(), "\n") {
			var e map[string]any
			if json.Unmarshal([]byte(line), &e) != nil || e[audit.FieldEvent] != string(audit.EventDelayApplied) {
				continue
			}
			u, _ := e[audit.FieldURL].(string)
			ts, _ := e[audit.FieldTimestamp].(string)
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil && u != "" {
				out[u] = append(out[u], at)
			}
		}
	}
	return out
}

// frontierMember is one crawler process of a test fleet.
type frontierMember struct {
	st    *redisstore.Store
	c     *colly.Collector
	p     *ext.Pacer
	q     *ext.Queue
	trail *lockedTrail // its audit trail
	fig   *figures     // its figures as a fleet member, as its Queue tells them
}

// figures is an ext.Observer that keeps a fleet member's latest figures (those pacemetrics exports).
type figures struct {
	mu sync.Mutex
	st audit.FleetStats
}

func (*figures) Departed(string, time.Duration)            {}
func (*figures) Refused(string, audit.Trigger)             {}
func (*figures) RetryAfter(string, time.Duration)          {}
func (*figures) BreakerChanged(string, audit.BreakerState) {}

// FleetChanged is what the Queue calls at each heartbeat and when its Run ends.
func (f *figures) FleetChanged(st audit.FleetStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
}

func (f *figures) get() audit.FleetStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

// seedHosts adds the first page of each of hosts to q.
func seedHosts(t *testing.T, q *ext.Queue, hosts int) {
	t.Helper()
	for h := range hosts {
		if err := q.AddURL(fmt.Sprintf("http://h%d.test/p/0", h)); err != nil {
			t.Fatal(err)
		}
	}
}

// runMembers runs every member's Queue together, until each has nothing left.
func runMembers(t *testing.T, members []*frontierMember) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			if err := m.q.Run(m.c); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func newFrontierMember(t *testing.T, srv *redistest.Server, site *frontierSite, prefix string, workers int, interval time.Duration, opts ...redisstore.Option) *frontierMember {
	t.Helper()
	return newMemberWith(t, srv, site, prefix, workers, interval, []ext.Option{ext.WithoutRobots()}, opts...)
}

// newMemberWith is newFrontierMember with the pacer's options pacing (robots.txt read unless they
// say otherwise).
func newMemberWith(t *testing.T, srv *redistest.Server, site *frontierSite, prefix string, workers int, interval time.Duration, pacing []ext.Option, opts ...redisstore.Option) *frontierMember {
	t.Helper()
	st, err := redisstore.Open(srv.Addr(), append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := colly.NewCollector()
	if err := c.SetStorage(st.CollyStorage()); err != nil {
		t.Fatal(err)
	}
	trail, fig := &lockedTrail{}, &figures{}
	p := ext.AdaptivePacing(c, append([]ext.Option{ext.WithStore(st), ext.WithTransport(site.transport()), ext.WithBaseDelay(interval), ext.WithJitter(0),
		ext.WithLogger(zerolog.New(trail).Level(zerolog.InfoLevel)), ext.WithObserver(fig)}, pacing...)...)
	t.Cleanup(func() { _ = p.Close() })
	q := ext.NewQueue(p, workers)
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		if err := q.AddURL(e.Request.AbsoluteURL(e.Attr("href"))); err != nil {
			t.Error(err)
		}
	})
	return &frontierMember{st: st, c: c, p: p, q: q, trail: trail, fig: fig}
}

// Three processes seeded with the same URLs, discovering the same links: every page is fetched
// exactly once, and each host keeps its interval whichever process holds it.
func TestFleetQueueFetchesEachURLOnce(t *testing.T) {
	srv := redistest.Start(t)
	const hosts, pages, interval = 12, 5, 60 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	var members []*frontierMember
	for range 3 {
		m := newFrontierMember(t, srv, site, prefix, 2, interval)
		seedHosts(t, m.q, hosts)
		members = append(members, m)
	}
	runMembers(t, members)
	site.check(t, hosts, interval, nil, members...)
	if n := members[0].q.Size(); n != 0 {
		t.Errorf("Size after the crawl = %d, want 0", n)
	}
}

// A fleet stopped mid-crawl gives its leases back; a fleet started again on the same Redis (new
// processes) resumes the frontier where it stopped: every page once over both runs.
func TestFleetQueueResumesAfterRestart(t *testing.T) {
	srv := redistest.Start(t)
	const hosts, pages, interval = 6, 6, 50 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	first := newFrontierMember(t, srv, site, prefix, 2, interval)
	seedHosts(t, first.q, hosts)
	var done atomic.Int32
	first.c.OnScraped(func(*colly.Response) {
		if done.Add(1) == 8 {
			first.q.Stop()
		}
	})
	if err := first.q.Run(first.c); err != nil {
		t.Fatal(err)
	}
	sent := len(site.arrivals())
	left := first.q.Size()
	if sent >= hosts*pages || left == 0 {
		t.Fatalf("the first run sent %d pages and left %d: want it stopped mid-crawl", sent, left)
	}
	var resumed []*frontierMember
	for range 2 {
		resumed = append(resumed, newFrontierMember(t, srv, site, prefix, 2, interval))
	}
	if n := resumed[0].q.Size(); n != left {
		t.Errorf("the restarted fleet's Size = %d, want the %d the stopped one left", n, left)
	}
	runMembers(t, resumed)
	site.check(t, hosts, interval, nil, append(resumed, first)...)
}

// A process that died holding a lease, with requests taken and one of them sent (and marked visited
// in the shared Colly storage): once its lease runs out, the live process takes the host over and is
// handed the dead one's requests first; the one sent goes out again (at least once: a request the
// dead process had in flight), bypassing the visited set, and nothing is lost.
func TestFleetQueueTakesOverFromDeadProcess(t *testing.T) {
	srv := redistest.Start(t)
	const pages, interval = 5, 40 * time.Millisecond
	ttl := 600 * time.Millisecond
	site := newFrontierSite(t, pages)
	prefix := newPrefix()
	dead := newFrontierMember(t, srv, site, prefix, 1, interval, redisstore.WithLeaseTTL(ttl))
	for p := range pages {
		if err := dead.q.AddURL(fmt.Sprintf("http://h0.test/p/%d", p)); err != nil {
			t.Fatal(err)
		}
	}
	// The dead process, by hand: it leased the host, took two requests and sent the first (its
	// collector marked it visited), then died before marking it done.
	if got, _, _, err := leaseOf(dead.st, "dead", 1); err != nil || len(got) != 1 {
		t.Fatalf("lease = %v, %v", got, err)
	}
	taken, _, err := dead.st.FrontierTake(ctx, "dead", "h0.test", 2)
	if err != nil || len(taken) != 2 {
		t.Fatalf("take = %v, %v", taken, err)
	}
	plain := colly.NewCollector()
	if err := plain.SetStorage(dead.st.CollyStorage()); err != nil {
		t.Fatal(err)
	}
	plain.WithTransport(site.transport())
	if err := plain.Visit(taken[0].URL); err != nil {
		t.Fatal(err)
	}
	live := newFrontierMember(t, srv, site, prefix, 2, interval, redisstore.WithLeaseTTL(ttl))
	if err := live.q.Run(live.c); err != nil {
		t.Fatal(err)
	}
	site.check(t, 1, interval, map[string]bool{taken[0].URL: true}, live)
	if n := len(site.arrivals()[taken[0].URL]); n != 2 {
		t.Errorf("%s, sent by the dead process, arrived %d times: want again once (handed out again past the visited set)", taken[0].URL, n)
	}
	if n := live.q.Size(); n != 0 {
		t.Errorf("Size = %d, want 0", n)
	}
}

// Colly's storage in Redis: a URL one process visited is visited for another; cookies are shared.
func TestCollyStorageSharedByProcesses(t *testing.T) {
	srv := redistest.Start(t)
	prefix := newPrefix()
	a := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix)).CollyStorage()
	b := redisstore.New(srv.Client(), redisstore.WithPrefix(prefix)).CollyStorage()
	if err := a.Init(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.IsVisited(42); ok || err != nil {
		t.Fatalf("IsVisited before = %v, %v", ok, err)
	}
	if err := a.Visited(42); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.IsVisited(42); !ok || err != nil {
		t.Errorf("IsVisited in the other process = %v, %v; want true", ok, err)
	}
	u := mustURL(t, "http://a.test/x")
	a.SetCookies(u, "k=v")
	if got := b.Cookies(u); !strings.Contains(got, "k=v") {
		t.Errorf("Cookies in the other process = %q", got)
	}
	srv.Stop()
	if _, err := b.IsVisited(42); err == nil {
		t.Error("IsVisited with the server gone: no error")
	}
	if got := b.Cookies(u); got != "" {
		t.Errorf("Cookies with the server gone = %q, want none", got)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
