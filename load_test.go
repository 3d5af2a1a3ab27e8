package ext

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// loadKeys returns n distinct host keys, built before any measurement.
func loadKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i) + ".example:443"
	}
	return keys
}

// lineCounter is a concurrency-safe audit writer that only counts lines.
type lineCounter struct{ n atomic.Int64 }

func (w *lineCounter) Write(p []byte) (int, error) {
	w.n.Add(1) // zerolog writes one event per call
	return len(p), nil
}

// 10 000 hosts and 100 000 requests through one pacer from many goroutines (run with -race): Wait and
// Observe on every host, while other goroutines read Hosts and Host, feed refusals, Retry-After and
// rate-limit fields to other hosts at explicit instants, and evict those as they go idle. Every request
// departs exactly once, no slot is left taken, no departure is lost.
func TestLoadTenThousandHosts(t *testing.T) {
	const hosts, workers = 10_000, 16
	requests := 100_000
	if testing.Short() {
		requests = 20_000
	}
	perHost := int64(requests / hosts)
	keys := loadKeys("host-", hosts)
	side := loadKeys("side-", 1_000)
	var audit lineCounter
	p := NewPacer(WithBaseDelay(0), WithLogger(zerolog.New(&audit)), WithIdleEviction(time.Hour))
	ctx := t.Context()
	start := time.Now()

	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := w; i < requests; i += workers {
				key := keys[(i*7919)%hosts] // 7919 is prime to 10 000: each host gets requests/hosts
				res, release, err := p.Wait(ctx, key)
				if err != nil {
					failed.Add(1)
					continue
				}
				p.Observe(res, Outcome{Status: 200, Latency: time.Millisecond})
				release()
			}
		})
	}

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	chaos.Go(func() { // snapshots
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%50 == 0 {
				_ = p.Hosts()
			}
			_, _ = p.Host(keys[i%hosts])
		}
	})
	chaos.Go(func() { // hostile responses on other hosts, used an hour ago, evicted as they go idle
		outcomes := []Outcome{
			{Status: 429, Header: header("Retry-After", "soon")},
			{Status: 503, Header: header("Retry-After", "2")},
			{Status: 200, Header: header("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "5")},
			{Status: 200, Header: header("RateLimit", `"p";r=x`)},
			{Err: errTest},
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			then := time.Now().Add(-time.Hour)
			key := side[i%len(side)]
			p.ObserveAt(p.ReserveAt(key, then), outcomes[i%len(outcomes)], then)
			if i%500 == 0 {
				p.evictIdleAt(time.Now())
			}
		}
	})
	wg.Wait()
	close(stop)
	chaos.Wait()
	elapsed := time.Since(start)

	if n := failed.Load(); n != 0 {
		t.Fatalf("%d Waits failed", n)
	}
	var total int64
	for _, k := range keys {
		st, ok := p.Host(k)
		if !ok || st.Departures != perHost || st.InFlight != 0 {
			t.Fatalf("%s: known %v, %d departures, %d in flight; want %d and 0", k, ok, st.Departures, st.InFlight, perHost)
		}
		total += st.Departures
	}
	if total != int64(requests) {
		t.Errorf("%d departures, want %d", total, requests)
	}
	if got := audit.n.Load(); got < int64(requests) {
		t.Errorf("%d audit lines, want at least one delay_applied per request (%d)", got, requests)
	}
	t.Logf("%d requests over %d hosts from %d goroutines in %v (%v per request)",
		requests, hosts, workers, elapsed.Round(time.Millisecond), elapsed/time.Duration(requests))
}

// Memory per tracked host, measured around creating 10 000 hosts (their keys built beforehand):
// under 1 KiB, so a crawl of a million hosts fits in a gigabyte before idle eviction.
func TestMemoryPerTrackedHost(t *testing.T) {
	const hosts = 10_000
	keys := loadKeys("mem-", hosts)
	p := NewPacer(WithIdleEviction(0))
	now := time.Now()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, k := range keys {
		p.ReserveAt(k, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / hosts
	runtime.KeepAlive(p)
	runtime.KeepAlive(keys)
	t.Logf("%d B per tracked host (%d hosts, heap %d → %d B)", per, hosts, before.HeapAlloc, after.HeapAlloc)
	if per >= 1024 {
		t.Errorf("%d B per tracked host, want under 1 KiB", per)
	}
}

// Idle eviction at scale, with a store: 10 000 hosts with state worth keeping (a backed-off delay, a
// Retry-After hold) leave memory once idle, the held ones only after their hold, and every one comes
// back from the store as it was on its next use.
func TestEvictionRestoresStoredStateAtScale(t *testing.T) {
	const hosts = 10_000
	keys := loadKeys("evict-", hosts)
	store := newMemoryStore()
	p := NewPacer(WithStore(store), WithIdleEviction(10*time.Minute), WithBaseDelay(time.Second), WithJitter(0),
		WithMaxRetryAfter(time.Hour), WithFlushInterval(time.Hour))
	defer p.Close()
	held := func(i int) bool { return i%100 == 0 }
	backedOff := func(i int) bool { return i%10 == 0 }
	hold := withRetryAfterBuffer(20 * time.Minute)
	for i, k := range keys {
		o := Outcome{Status: 200}
		switch {
		case held(i):
			o = Outcome{Status: 429, Header: header("Retry-After", "1200")}
		case backedOff(i):
			o = Outcome{Status: 503}
		}
		p.ObserveAt(p.ReserveAt(k, t0), o, t0)
	}

	if n := p.evictIdleAt(t0.Add(15 * time.Minute)); n != hosts-hosts/100 {
		t.Errorf("evicted %d hosts idle for 15 min, want %d (all but the 1%% still held)", n, hosts-hosts/100)
	}
	if n := len(p.Hosts()); n != hosts/100 {
		t.Errorf("%d hosts in memory, want the %d held ones", n, hosts/100)
	}
	if n := p.evictIdleAt(t0.Add(hold + 10*time.Minute)); n != hosts/100 {
		t.Errorf("evicted %d once the holds ended, want %d", n, hosts/100)
	}
	if n := len(p.Hosts()); n != 0 {
		t.Errorf("%d hosts in memory, want 0", n)
	}

	now := t0.Add(hold + 11*time.Minute)
	for i, k := range keys {
		p.ReserveAt(k, now)
		st, _ := p.HostAt(k, now)
		want := time.Second
		if backedOff(i) {
			want = 1500 * time.Millisecond // held hosts were refused too
		}
		if st.AdaptiveDelay != want {
			t.Fatalf("%s restored with adaptive delay %v, want %v", k, st.AdaptiveDelay, want)
		}
	}
}

// Idle eviction never takes a host that is being created or used: with an idle time of an hour,
// hosts created this instant are not idle, and a sweep running beside their creation must evict none
// of them. (A host evicted between its lookup and its use keeps being used, detached: a second
// schedule for the same host beside the new one, and its departures lost.)
func TestEvictionSparesNewHosts(t *testing.T) {
	const creators, perCreator = 8, 5_000
	p := NewPacer(WithIdleEviction(time.Hour))
	var wg sync.WaitGroup
	for c := range creators {
		keys := loadKeys("new-"+strconv.Itoa(c)+"-", perCreator)
		wg.Go(func() {
			for _, k := range keys {
				p.ReserveAt(k, time.Now())
			}
		})
	}
	var evicted atomic.Int64
	var finished atomic.Bool
	var sweeper sync.WaitGroup
	sweeper.Go(func() {
		for !finished.Load() {
			evicted.Add(int64(p.evictIdleAt(time.Now())))
		}
	})
	wg.Wait()
	finished.Store(true)
	sweeper.Wait()
	if n := evicted.Load(); n != 0 {
		t.Errorf("a sweep evicted %d hosts created moments before, with an idle time of 1 h", n)
	}
	if n := len(p.Hosts()); n != creators*perCreator {
		t.Errorf("%d hosts in memory, want %d", n, creators*perCreator)
	}
}
