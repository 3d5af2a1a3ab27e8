package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// The regression tests of issue 16, one a numbered item, against a private redis-server (items 7's
// first half, 9 and 10 against sqlitestore, in its package).

// fleetMember is one crawler process of a test: its own Redis client, store, collector and pacer.
type fleetMember struct {
	st    *redisstore.Store
	c     *colly.Collector
	p     *ext.Pacer
	trail *lockedTrail
}

// lockedTrail is an audit trail that the pacer's goroutines write and the test reads.
type lockedTrail struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedTrail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedTrail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newMember(t *testing.T, srv *redistest.Server, async bool, opts ...ext.Option) *fleetMember {
	t.Helper()
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	trail := &lockedTrail{}
	c := colly.NewCollector(colly.Async(async))
	opts = append([]ext.Option{ext.WithStore(st), ext.WithJitter(0), ext.WithoutRobots(), ext.WithMaxRetries(0),
		ext.WithLogger(zerolog.New(trail))}, opts...)
	p := ext.AdaptivePacing(c, opts...)
	t.Cleanup(func() { _ = p.Close() })
	return &fleetMember{st: st, c: c, p: p, trail: trail}
}

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	return strings.TrimPrefix(rawURL, "http://")
}

// Item 1: an exhausted rate-limit quota (a 30 s hold) is written through before the response's
// callbacks return: another process asking then is told to wait out the hold.
func TestRateLimitHoldWrittenThrough(t *testing.T) {
	srv := redistest.Start(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", "30")
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(site.Close)
	a := newMember(t, srv, false, ext.WithBaseDelay(100*time.Millisecond), ext.WithFlushInterval(time.Hour)) // no write-behind
	other := newMember(t, srv, false).st
	var got ext.Admission
	var err error
	a.c.OnResponse(func(*colly.Response) { got, err = other.Admit(ctx, hostOf(t, site.URL), 100*time.Millisecond) })
	if err := a.c.Visit(site.URL + "/a"); err != nil {
		t.Fatal(err)
	}
	if err != nil || got.OK || got.Wait < 29*time.Second {
		t.Errorf("another process asking from A's OnResponse: %+v, %v; want a wait of the 30 s hold", got, err)
	}
}

// Item 2: an adaptive increase is written through before the response's callbacks return: another
// process asking then learns the longer delay.
func TestAdaptiveIncreaseWrittenThrough(t *testing.T) {
	srv := redistest.Start(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(site.Close)
	const base = 200 * time.Millisecond
	a := newMember(t, srv, false, ext.WithBaseDelay(base), ext.WithFlushInterval(time.Hour)) // no write-behind
	other := newMember(t, srv, false).st
	var got ext.Admission
	var err error
	a.c.OnError(func(*colly.Response, error) { got, err = other.Admit(ctx, hostOf(t, site.URL), base) })
	_ = a.c.Visit(site.URL + "/a")
	if err != nil || got.AdaptiveDelay <= base || got.OK {
		t.Errorf("another process asking from A's OnError: %+v, %v; want the increased delay (above %v) and a wait", got, err, base)
	}
}

// slowDialTransport delays every dial (keep-alives off: every request dials).
func slowDialTransport(delay time.Duration) *http.Transport {
	return &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(delay)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// Item 3: A's dials take 250 ms, over a 200 ms interval. Its departure is pending in the store until
// its wire instant, so B's requests never reach the host within an interval of A's.
func TestSlowDialHoldsFleet(t *testing.T) {
	srv := redistest.Start(t)
	site := &arrivals{}
	host := site.serve(t)
	const interval = 200 * time.Millisecond
	a := newMember(t, srv, true, ext.WithBaseDelay(interval), ext.WithTransport(slowDialTransport(250*time.Millisecond)))
	b := newMember(t, srv, true, ext.WithBaseDelay(interval))
	var wg sync.WaitGroup
	for name, m := range map[string]*fleetMember{"a": a, "b": b} {
		wg.Go(func() {
			for i := range 4 {
				_ = m.c.Visit(fmt.Sprintf("%s/%s%d", host.URL, name, i))
			}
			m.c.Wait()
		})
	}
	wg.Wait()
	for i, g := range site.gaps() {
		if g < interval-timerNoise {
			t.Errorf("requests %d and %d reached the server %v apart, under the %v interval", i, i+1, g, interval)
		}
	}
}

// Item 4: one host's key overwritten by something else (a SET) concerns that host only: the record
// is repaired and audited, and the fleet keeps sharing every other host's schedule.
func TestCorruptKeyScopedToHost(t *testing.T) {
	srv := redistest.Start(t)
	bad, good := &arrivals{}, &arrivals{}
	badHost, goodHost := bad.serve(t), good.serve(t)
	if err := srv.Client().Set(ctx, redisstore.DefaultPrefix+"host:"+hostOf(t, badHost.URL), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const interval = 300 * time.Millisecond
	var alerts atomic.Int32
	a := newMember(t, srv, true, ext.WithBaseDelay(interval), ext.WithAlert(func(ext.Alert) { alerts.Add(1) }))
	b := newMember(t, srv, true, ext.WithBaseDelay(interval))
	_ = a.c.Visit(badHost.URL + "/x")
	a.c.Wait()
	var wg sync.WaitGroup
	for name, m := range map[string]*fleetMember{"a": a, "b": b} {
		wg.Go(func() {
			for i := range 3 {
				_ = m.c.Visit(fmt.Sprintf("%s/%s%d", goodHost.URL, name, i))
			}
			m.c.Wait()
		})
	}
	wg.Wait()
	for i, g := range good.gaps() {
		if g < interval-timerNoise {
			t.Errorf("requests %d and %d to the sound host %v apart, under the %v interval: the bad key turned sharing off", i, i+1, g, interval)
		}
	}
	if !strings.Contains(a.trail.String(), `"event":"`+string(audit.EventStateCorrupt)+`"`) || strings.Contains(a.trail.String(), string(audit.EventStoreUnavailable)) {
		t.Errorf("A's trail: want state_corrupt for the bad host and no store_unavailable:\n%s", a.trail)
	}
	if n := alerts.Load(); n != 0 {
		t.Errorf("%d alerts, want none: the store is up", n)
	}
	if typ, err := srv.Client().Type(ctx, redisstore.DefaultPrefix+"host:"+hostOf(t, badHost.URL)).Result(); err != nil || typ != "hash" {
		t.Errorf("the bad key is %q (%v) after A's request, want it repaired as a hash", typ, err)
	}
}

// Item 5: Redis restarted empty inside a 30 s Retry-After window: the process that holds it finds the
// loss (it looks every 200 ms, departing nowhere) and writes the hold back.
func TestRestartEmptyWritesBack(t *testing.T) {
	srv := redistest.Start(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(site.Close)
	a := newMember(t, srv, false, ext.WithBaseDelay(100*time.Millisecond))
	_ = a.c.Visit(site.URL + "/a")
	key := redisstore.DefaultPrefix + "host:" + hostOf(t, site.URL)
	// The hold is written through in the background: the restart must come after it landed, or it
	// lands after the restart and no loss is there to find.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, err := srv.Client().HExists(ctx, key, "hold_srv").Result(); err == nil && n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold was not written through within 3 s")
		}
	}
	srv.Restart()
	c := srv.Client()
	deadline := time.Now().Add(3 * time.Second)
	for {
		hold, err := c.HGet(ctx, key, "hold_srv").Int64()
		if err == nil {
			if left := time.Until(time.Unix(0, hold)); left < 25*time.Second {
				t.Errorf("hold written back with %v left, want about 33 s", left)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hold was not written back within 3 s of the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for !strings.Contains(a.trail.String(), "lost its state") { // audited beside the write-back
		if time.Now().After(deadline) {
			t.Errorf("no audit event names the loss:\n%s", a.trail)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Item 6: with the server paused, a store call ends at its context's deadline (ContextTimeoutEnabled),
// not at go-redis's read timeout; and a pacer waiting on it names the stall and its end.
func TestPausedRedisTimesOut(t *testing.T) {
	srv := redistest.Start(t)
	m := newMember(t, srv, false, ext.WithBaseDelay(50*time.Millisecond))
	st := m.st
	if _, err := st.Admit(ctx, "p.test", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Departed(ctx, "p.test", 0); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	_, err := st.Admit(cctx, "p.test", 0)
	took := time.Since(start)
	cancel()
	if err == nil || took > time.Second {
		t.Errorf("Admit on a paused server: %v after %v; want an error at the 200 ms deadline (go-redis's own read timeout is 3 s)", err, took)
	}

	done := make(chan error, 1)
	go func() {
		_, release, err := m.p.Wait(ctx, "p.test")
		if err == nil {
			release()
		}
		done <- err
	}()
	time.Sleep(2500 * time.Millisecond)
	srv.Resume()
	resumed = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	trail := m.trail.String()
	if !strings.Contains(trail, `"event":"store_unavailable"`) && !strings.Contains(trail, `"event":"store_slow"`) || !strings.Contains(trail, `"event":"store_recovered"`) {
		t.Errorf("the trail does not name the stall and its end:\n%s", trail)
	}
}

// dropProxy forwards TCP connections to a unix socket and, when armed, drops the first reply that
// contains its marker (closing the connection), as a link that fails after the server acted.
type dropProxy struct {
	ln     net.Listener
	socket string
	marker []byte
	armed  atomic.Bool
}

func startDropProxy(t *testing.T, socket string, marker string) *dropProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, socket: socket, marker: []byte(marker)}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", socket)
			if err != nil {
				_ = client.Close()
				continue
			}
			go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
			go func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if n > 0 && p.armed.Load() && bytes.Contains(buf[:n], p.marker) && p.armed.CompareAndSwap(true, false) {
						_ = client.Close()
						_ = server.Close()
						return
					}
					if n > 0 {
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						_ = client.Close()
						return
					}
				}
			}()
		}
	}()
	return p
}

// Item 7, second half: the reply of a take is lost on the way (the connection drops after the server
// took) and go-redis retries: the retry returns the same requests, none is lost, none is taken twice.
func TestLostTakeReplyLosesNothing(t *testing.T) {
	srv := redistest.Start(t)
	proxy := startDropProxy(t, srv.Socket(), "/0")
	c := redis.NewClient(&redis.Options{Addr: proxy.ln.Addr().String(), MaxRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	st := redisstore.New(c, redisstore.WithPrefix(newPrefix()))
	var reqs []ext.DeferredRequest
	for i := range 4 {
		reqs = append(reqs, ext.DeferredRequest{Method: http.MethodGet, URL: fmt.Sprintf("http://s.test/%d", i), Header: http.Header{}})
	}
	if err := st.SpillRequests(ctx, "s.test", reqs); err != nil {
		t.Fatal(err)
	}
	proxy.armed.Store(true)
	got, err := st.TakeSpilled(ctx, "s.test", 2)
	if proxy.armed.Load() {
		t.Fatal("the proxy dropped no reply: the test did not lose one")
	}
	if err != nil || len(got) != 2 || got[0].URL != "http://s.test/0" || got[1].URL != "http://s.test/1" {
		t.Fatalf("TakeSpilled(2) after a lost reply = %v, %v; want /0 /1", urlsOf(got), err)
	}
	rest, err := st.TakeSpilled(ctx, "s.test", 0)
	if err != nil || len(rest) != 2 || rest[0].URL != "http://s.test/2" || rest[1].URL != "http://s.test/3" {
		t.Errorf("the rest = %v, %v; want /2 /3", urlsOf(rest), err)
	}
}

func urlsOf(rs []ext.DeferredRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.URL)
	}
	return out
}

// Item 8: two processes draining the shared deferred set at once send each request once.
func TestConcurrentDrainSendsOnce(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	seen := map[string]int{}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(site.Close)
	a := newMember(t, srv, true, ext.WithBaseDelay(10*time.Millisecond))
	b := newMember(t, srv, true, ext.WithBaseDelay(10*time.Millisecond))
	for i := range 3 {
		if _, err := a.st.AddDeferred(ctx, ext.DeferredRequest{Host: hostOf(t, site.URL), Method: http.MethodGet,
			URL: fmt.Sprintf("%s/d%d", site.URL, i), Header: http.Header{}, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var drained atomic.Int32
	for _, m := range []*fleetMember{a, b} {
		wg.Go(func() {
			n, err := m.p.Drain(ctx, m.c)
			if err != nil {
				t.Error(err)
			}
			drained.Add(int32(n))
			m.c.Wait()
		})
	}
	wg.Wait()
	if n := drained.Load(); n != 3 {
		t.Errorf("%d drained in all, want 3", n)
	}
	for i := range 3 {
		if n := seen[fmt.Sprintf("/d%d", i)]; n != 1 {
			t.Errorf("/d%d reached the server %d times, want once", i, n)
		}
	}
	if left, err := a.st.ListDeferred(ctx, "", 0); err != nil || len(left) != 0 {
		t.Errorf("left in the store: %v, %v", left, err)
	}
}

// Item 1, Crawl-delay: a Crawl-delay read from robots.txt is written through before the page's
// callbacks run, and the admission script spaces every process by it.
func TestCrawlDelayWrittenThrough(t *testing.T) {
	srv := redistest.Start(t)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nCrawl-delay: 2\n")
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(site.Close)
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := colly.NewCollector()
	// No write-behind within the test: only a write-through can tell the other process.
	p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(100*time.Millisecond), ext.WithJitter(0), ext.WithFlushInterval(time.Hour))
	t.Cleanup(func() { _ = p.Close() })
	other := newMember(t, srv, false).st
	var got ext.Admission
	c.OnResponse(func(r *colly.Response) {
		if r.Request.URL.Path == "/a" {
			got, err = other.Admit(ctx, hostOf(t, site.URL), 100*time.Millisecond)
		}
	})
	if err := c.Visit(site.URL + "/a"); err != nil {
		t.Fatal(err)
	}
	if err != nil || got.OK || got.Wait < 1900*time.Millisecond {
		t.Errorf("another process asking from the page's OnResponse: %+v, %v; want a wait of the 2 s Crawl-delay", got, err)
	}
}

// Item 8, what a take leaves: deferred members that cannot be decoded are not taken (never lost: the
// listing still names them), the good ones are.
func TestTakeDeferredLeavesUndecodable(t *testing.T) {
	c := redistest.Start(t).Client()
	prefix := newPrefix()
	st := redisstore.New(c, redisstore.WithPrefix(prefix))
	if _, err := st.AddDeferred(ctx, ext.DeferredRequest{Host: "u.test", Method: http.MethodGet, URL: "http://u.test/good", Header: http.Header{}}); err != nil {
		t.Fatal(err)
	}
	for i, m := range []string{`not json`, `{"v":2,"host":"u.test","method":"GET","url":"http://u.test/v2"}`} {
		if err := c.ZAdd(ctx, prefix+"deferred", redis.Z{Score: float64(100 + i), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.TakeDeferred(ctx, "", 0)
	if err != nil || len(got) != 1 || got[0].URL != "http://u.test/good" {
		t.Fatalf("TakeDeferred = %v, %v; want the one good request", urlsOf(got), err)
	}
	if n, err := c.ZCard(ctx, prefix+"deferred").Result(); err != nil || n != 2 {
		t.Errorf("%d members left (%v), want the 2 undecodable ones kept", n, err)
	}
}
