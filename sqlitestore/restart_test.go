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
