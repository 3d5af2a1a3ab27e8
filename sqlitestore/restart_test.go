package sqlitestore_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// A crawler stopped inside a host's Retry-After window, its store closed, and started again on the same
// file sends nothing to that host before the window ends: measured at the server.
func TestRestartInsideRetryAfterWindow(t *testing.T) {
	var mu sync.Mutex
	var arrivals []time.Time
	var refused atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		if !refused.Swap(true) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "pacing.db")

	crawl := func(page string, retries int) {
		st, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		c := colly.NewCollector()
		p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(100*time.Millisecond), ext.WithoutRobots(), ext.WithMaxRetries(retries))
		_ = c.Visit(srv.URL + page)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	crawl("/first", 0) // refused: Retry-After 2 s, the hold ends 2.2 s after the refusal
	crawl("/second", 0)
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 2 {
		t.Fatalf("%d requests reached the server, want 2", len(arrivals))
	}
	if gap := arrivals[1].Sub(arrivals[0]); gap < 2200*time.Millisecond {
		t.Errorf("after the restart the host was asked again %v after its refusal, inside the 2.2 s window", gap)
	}
}

// Requests deferred while a host was parked survive a restart on the same file, and a new crawler
// drains them.
func TestDeferredSurviveRestart(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "pacing.db")
	breaker := ext.WithBreaker(ext.BreakerPolicy{Failures: 1, Cooldown: 100 * time.Millisecond})

	st := open(t, path)
	c := colly.NewCollector()
	p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(10*time.Millisecond), ext.WithoutRobots(), ext.WithMaxRetries(0), breaker)
	for i := range 4 {
		_ = c.Visit(fmt.Sprintf("%s/p/%d", srv.URL, i)) // the first is refused and parks the host
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	down.Store(false)
	time.Sleep(150 * time.Millisecond) // past the cool-down
	st2 := open(t, path)
	c2 := colly.NewCollector()
	p2 := ext.AdaptivePacing(c2, ext.WithStore(st2), ext.WithBaseDelay(10*time.Millisecond), ext.WithoutRobots(), breaker)
	defer p2.Close()
	n, err := p2.Drain(t.Context(), c2)
	if err != nil || n != 3 {
		t.Fatalf("Drain after the restart = %d, %v; want the 3 deferred requests", n, err)
	}
	c2.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < 4; i++ {
		if p := fmt.Sprintf("/p/%d", i); seen[p] != 1 {
			t.Errorf("%s requested %d times, want once (after the drain)", p, seen[p])
		}
	}
}

// A host whose connection is refused is not a robots.txt outage to wait out across restarts: three
// crawlers in a row on the same file each fail it as fast as the first did, naming the refused
// connection, and the store keeps no hold, no doubled delay, no failure and no departure for it.
func TestRestartAfterRefusedConnectionFailsAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	page := "http://" + l.Addr().String() + "/"
	l.Close() // nothing listens: every connection is refused
	path := filepath.Join(t.TempDir(), "state.db")
	for run := 1; run <= 3; run++ {
		st, err := sqlitestore.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var trail bytes.Buffer
		c := colly.NewCollector()
		p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithLogger(zerolog.New(&trail)))
		var got error
		c.OnError(func(_ *colly.Response, err error) { got = err })
		start := time.Now()
		_ = c.Visit(page)
		took := time.Since(start)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		row, ok, err := st.LoadHost(t.Context(), l.Addr().String())
		if cerr := st.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		switch {
		case err != nil || !ok:
			t.Fatalf("run %d: stored row: %v, %v", run, ok, err)
		case !errors.Is(got, syscall.ECONNREFUSED) || !strings.Contains(got.Error(), "connection refused"):
			t.Errorf("run %d: OnError got %v, want the refused connection", run, got)
		case took > 100*time.Millisecond: // a bound, not a measure: the defect waited 30 s
			t.Errorf("run %d: failed after %v, want at once; trail:\n%s", run, took, trail.String())
		}
		if !row.HoldUntil.IsZero() || row.AdaptiveDelay != ext.DefaultBaseDelay || row.Failures != 0 || row.NextDeparture.After(time.Now()) {
			t.Errorf("run %d: stored hold %v (%s), delay %v, failures %d, next departure %v; want none of them",
				run, row.HoldUntil, row.HoldTrigger, row.AdaptiveDelay, row.Failures, row.NextDeparture)
		}
		if strings.Contains(trail.String(), "restored from the store") {
			t.Errorf("run %d: a hold was restored:\n%s", run, trail.String())
		}
	}
}
