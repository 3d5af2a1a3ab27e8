package sqlitestore_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
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
