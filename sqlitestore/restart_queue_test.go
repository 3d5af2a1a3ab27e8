package sqlitestore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/sqlitestore"
	"github.com/gocolly/colly/v2"
)

// The regression tests of issue 16 that need a durable store of one process: items 7 (first half), 9
// and 10. The others are in redisstore.

// pathLog is a loopback server that logs the path of each request, in order.
type pathLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *pathLog) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.paths = append(l.paths, r.URL.Path)
		l.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (l *pathLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.paths)
}

func openStore(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Item 7, first half: a Queue on a file where an earlier Queue left spills resumes them, each host's
// oldest first and before what is added to it later, and Size counts them: every URL is sent.
func TestNewQueueResumesSpills(t *testing.T) {
	site := &pathLog{}
	srv := site.serve(t)
	path := filepath.Join(t.TempDir(), "spill.db")

	st := openStore(t, path) // run 1: three URLs, one in memory and two spilled; it stops before Run
	p := ext.NewPacer(ext.WithStore(st), ext.WithoutRobots())
	q := ext.NewQueue(p, 1, ext.WithQueueMemory(1))
	for i := range 3 {
		if err := q.AddURL(fmt.Sprintf("%s/old%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path) // run 2 on the same file
	c := colly.NewCollector()
	p = ext.AdaptivePacing(c, ext.WithStore(st), ext.WithoutRobots(), ext.WithBaseDelay(time.Millisecond), ext.WithJitter(0))
	defer p.Close()
	q = ext.NewQueue(p, 1, ext.WithQueueMemory(1))
	for i := range 3 {
		if err := q.AddURL(fmt.Sprintf("%s/new%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.Size(); n != 5 {
		t.Errorf("Size() = %d before Run, want 5: the two spills left by run 1 and the three new URLs", n)
	}
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
	want := []string{"/old1", "/old2", "/new0", "/new1", "/new2"}
	if got := site.got(); !slices.Equal(got, want) {
		t.Errorf("sent %v, want %v (run 1's /old0 was only in its memory)", got, want)
	}
	if left, err := st.SpilledHosts(context.Background()); err != nil || len(left) != 0 {
		t.Errorf("still spilled: %v, %v", left, err)
	}
}

// Item 9: Stop before Run holds: Run returns at once and sends nothing.
func TestStopBeforeRun(t *testing.T) {
	site := &pathLog{}
	srv := site.serve(t)
	st := openStore(t, filepath.Join(t.TempDir(), "stop.db"))
	c := colly.NewCollector()
	p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithoutRobots(), ext.WithBaseDelay(time.Millisecond))
	defer p.Close()
	q := ext.NewQueue(p, 2)
	for i := range 3 {
		if err := q.AddURL(fmt.Sprintf("%s/%d", srv.URL, i)); err != nil {
			t.Fatal(err)
		}
	}
	q.Stop()
	if err := q.Run(c); err != nil {
		t.Fatal(err)
	}
	if got := site.got(); len(got) != 0 {
		t.Errorf("Run after Stop sent %v, want nothing", got)
	}
	if n := q.Size(); n != 3 {
		t.Errorf("Size() = %d after Stop; Run, want the 3 still queued", n)
	}
}

// Item 10: a Retry-After above the maximum parks the host until the time it announced (two hours
// here); the park's end is stored, so a restart keeps the whole park, not the one-hour repair limit.
func TestParkEndStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "park.db")
	now := time.Now()
	st := openStore(t, path)
	p := ext.NewPacer(ext.WithStore(st), ext.WithoutRobots(), ext.WithMaxRetryAfter(time.Hour))
	res := p.ReserveAt("park.test", now)
	p.ObserveAt(res, ext.Outcome{Status: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"7200"}}}, now)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	stored, ok, err := st.LoadHost(context.Background(), "park.test")
	if err != nil || !ok || stored.ParkUntil.Before(now.Add(2*time.Hour)) {
		t.Fatalf("stored park end %v (ok %v, %v), want at least 2 h ahead", stored.ParkUntil, ok, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openStore(t, path)
	p = ext.NewPacer(ext.WithStore(st), ext.WithoutRobots(), ext.WithMaxRetryAfter(time.Hour))
	defer p.Close()
	p.AdmitAt("park.test", time.Now()) // the host is read from the store
	snap, _ := p.Host("park.test")
	if snap.Breaker != audit.BreakerOpen || snap.RetryAfterUntil.Before(now.Add(2*time.Hour)) {
		t.Errorf("after the restart: breaker %v, held until %v; want open and held 2 h (the park), not cut to 1 h",
			snap.Breaker, snap.RetryAfterUntil.Sub(now).Round(time.Minute))
	}
}
