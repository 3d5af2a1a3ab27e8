package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/redisstore"
	"github.com/collypace/ext/redisstore/internal/redistest"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// arrivals is a loopback server that logs when each request arrives.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (a *arrivals) gaps() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	at := slices.Clone(a.at)
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]))
	}
	return out
}

// recording wraps a Store and records, on the server's clock, the departures it admits.
type recording struct {
	*redisstore.Store
	mu       sync.Mutex
	admitted []time.Time
}

func (r *recording) Admit(ctx context.Context, host string, gap time.Duration) (ext.Admission, error) {
	a, at, err := redisstore.AdmitNow(r.Store, ctx, host, gap)
	if a.OK {
		r.mu.Lock()
		r.admitted = append(r.admitted, at)
		r.mu.Unlock()
	}
	return a, err
}

// Three crawler processes (three collectors, each with its own pacer and Redis client) sharing one
// host keep its interval together: Redis admits their departures an interval apart, and no two
// requests reach the server together.
func TestFleetSharesOneSchedule(t *testing.T) {
	srv := redistest.Start(t)
	site := &arrivals{}
	host := site.serve(t)
	const interval = 300 * time.Millisecond
	var stores []*recording
	var wg sync.WaitGroup
	for i := range 3 {
		st, err := redisstore.Open(srv.Addr(), redisstore.WithPrefix("fleet:"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		rec := &recording{Store: st}
		stores = append(stores, rec)
		c := colly.NewCollector(colly.Async(true))
		p := ext.AdaptivePacing(c, ext.WithStore(rec), ext.WithBaseDelay(interval), ext.WithJitter(0), ext.WithoutRobots())
		t.Cleanup(func() { _ = p.Close() })
		wg.Go(func() {
			for j := range 6 {
				_ = c.Visit(fmt.Sprintf("%s/c%d/p%d", host.URL, i, j))
			}
			c.Wait()
		})
	}
	wg.Wait()
	var admitted []time.Time
	for _, r := range stores {
		admitted = append(admitted, r.admitted...)
	}
	slices.SortFunc(admitted, func(x, y time.Time) int { return x.Compare(y) })
	if len(admitted) != 18 {
		t.Fatalf("%d departures admitted by Redis, want 18", len(admitted))
	}
	for i := 1; i < len(admitted); i++ {
		if gap := admitted[i].Sub(admitted[i-1]); gap < interval {
			t.Errorf("departures %d and %d admitted %v apart, want at least %v", i-1, i, gap, interval)
		}
	}
	// At the server, a gap can be shorter than the admissions' by the scheduling delay of a loaded
	// machine (2 cores running the whole suite under -race); half an interval is what no process
	// sharing the schedule can come near, and what three processes pacing alone would.
	for i, g := range site.gaps() {
		if g < interval/2 {
			t.Errorf("requests %d and %d reached the server %v apart: the processes did not share the schedule", i, i+1, g)
		}
	}
}

// Issue 9, point 3: a hold learned by one process stops the others' waiting requests before they
// depart. Process A's request is refused with Retry-After: 2; process B's, waiting at a 200 ms
// interval, reaches the server only after A's window (2.2 s with the 10% buffer) ends.
func TestFleetHoldStopsOtherProcess(t *testing.T) {
	srv := redistest.Start(t)
	var (
		mu       sync.Mutex
		refusals []time.Time
		after    []time.Time // B's arrivals after A's refusal
	)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/a" && len(refusals) == 0 {
			refusals = append(refusals, time.Now())
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if len(refusals) > 0 && strings.HasPrefix(r.URL.Path, "/b") {
			after = append(after, time.Now())
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(site.Close)
	collector := func() *colly.Collector {
		st, err := redisstore.Open(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		c := colly.NewCollector(colly.Async(true))
		p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(200*time.Millisecond), ext.WithJitter(0), ext.WithoutRobots(), ext.WithMaxRetries(0))
		t.Cleanup(func() { _ = p.Close() })
		return c
	}
	a, b := collector(), collector()
	if err := a.Visit(site.URL + "/a"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_ = b.Visit(fmt.Sprintf("%s/b%d", site.URL, i))
	}
	a.Wait()
	b.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(refusals) != 1 {
		t.Fatalf("%d refusals, want 1", len(refusals))
	}
	windowEnd := refusals[0].Add(2200 * time.Millisecond)
	for _, at := range after {
		// B's request already on its way when A's refusal was written is allowed: it left before.
		if at.Before(windowEnd) && at.Sub(refusals[0]) > 50*time.Millisecond {
			t.Errorf("process B reached the server %v after A's refusal, inside the 2.2s window", at.Sub(refusals[0]))
		}
	}
}

// Issue 16 item 6: Redis killed mid-crawl for 2 s. The departures wait for it (a fleet member pacing
// alone would add its share to the others'), the stall is named in the audit trail (store_unavailable,
// then store_recovered) and alerted once, no URL is lost, and no gap falls under the interval.
func TestFleetWaitsForLostRedis(t *testing.T) {
	srv := redistest.Start(t)
	site := &arrivals{}
	host := site.serve(t)
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs strings.Builder
	var mu sync.Mutex
	var alerts []audit.Event
	c := colly.NewCollector()
	const interval = 100 * time.Millisecond
	p := ext.AdaptivePacing(c, ext.WithStore(st), ext.WithBaseDelay(interval), ext.WithJitter(0), ext.WithoutRobots(),
		ext.WithLogger(zerolog.New(zerolog.SyncWriter(&logs))),
		ext.WithAlert(func(a ext.Alert) { mu.Lock(); alerts = append(alerts, a.Event); mu.Unlock() }))
	defer p.Close()
	fetched := 0
	c.OnResponse(func(*colly.Response) { fetched++ })
	const pages = 30
	done := make(chan error, 1)
	go func() {
		for i := range pages {
			if err := c.Visit(fmt.Sprintf("%s/p/%d", host.URL, i)); err != nil {
				done <- fmt.Errorf("visit %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	time.Sleep(500 * time.Millisecond)
	srv.Stop()
	stopped := time.Now()
	time.Sleep(2 * time.Second)
	site.mu.Lock()
	during := 0
	for _, at := range site.at {
		if at.After(stopped.Add(50 * time.Millisecond)) {
			during++
		}
	}
	site.mu.Unlock()
	srv.Restart()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if during != 0 {
		t.Errorf("%d requests reached the server while Redis was down, want none: a fleet member does not pace alone", during)
	}
	if fetched != pages {
		t.Errorf("%d pages fetched, want all %d", fetched, pages)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(alerts) != 1 || alerts[0] != audit.EventStoreUnavailable {
		t.Errorf("alerts = %v, want one store_unavailable", alerts)
	}
	for _, ev := range []string{string(audit.EventStoreUnavailable), string(audit.EventStoreRecovered)} {
		if !strings.Contains(logs.String(), `"event":"`+ev+`"`) {
			t.Errorf("no %s event in the audit trail", ev)
		}
	}
	// The server reads each request when its handler runs, which a loaded machine (-race, 2 cores) can
	// delay for one request and not the next: a gap short at the server is the pacer's only when the
	// requests' wire instants (their delay_applied timestamps) are that close too.
	wire, server := wireGaps(t, logs.String()), site.gaps()
	for i, g := range server {
		if g >= interval-5*time.Millisecond {
			continue
		}
		if len(wire) == len(server) && wire[i] >= interval-time.Millisecond { // the same requests, in order
			t.Logf("requests %d and %d %v apart at the server, %v at the wire: read late", i, i+1, g, wire[i])
			continue
		}
		t.Errorf("requests %d and %d %v apart, under the %v interval", i, i+1, g, interval)
	}
}

// wireGaps returns the gaps between the departures of an audit trail (delay_applied events, stamped
// with the instant each request's headers reached the wire), in order.
func wireGaps(t *testing.T, trail string) []time.Duration {
	t.Helper()
	var at []time.Time
	for _, line := range strings.Split(trail, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e[audit.FieldEvent] != string(audit.EventDelayApplied) {
			continue
		}
		ts, _ := e[audit.FieldTimestamp].(string)
		if x, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			at = append(at, x)
		}
	}
	slices.SortFunc(at, time.Time.Compare)
	var out []time.Duration
	for i := 1; i < len(at); i++ {
		out = append(out, at[i].Sub(at[i-1]))
	}
	return out
}

// Issue 9, point 3: a request that gives up waiting (a cancel, or a process that crashes while its
// requests wait) leaves nothing booked in Redis: only departures that happened are recorded.
func TestCancelledWaitLeavesNothingBooked(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisstore.Open(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := ext.NewPacer(ext.WithStore(st), ext.WithBaseDelay(time.Hour), ext.WithJitter(0), ext.WithoutRobots())
	t.Cleanup(func() { _ = p.Close() })
	if _, release, err := p.Wait(ctx, "cancel.test"); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	key := redisstore.DefaultPrefix + "host:cancel.test"
	before, err := srv.Client().HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		if _, _, err := p.Wait(wctx, "cancel.test"); err == nil {
			t.Fatal("a request departed within the hour's interval")
		}
		cancel()
	}
	after, err := srv.Client().HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if before["last_departure"] == "" || after["last_departure"] != before["last_departure"] {
		t.Errorf("last departure %q before the cancelled waits, %q after: they booked something", before["last_departure"], after["last_departure"])
	}
	// Another process asking now is told to wait for the one real departure's interval, no longer.
	if a, err := st.Admit(ctx, "cancel.test", time.Hour); err != nil || a.OK || a.Wait > time.Hour {
		t.Errorf("another process: %+v (%v); want a wait of at most the hour", a, err)
	}
}
