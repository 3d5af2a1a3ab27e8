package ext

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gocolly/colly/v2"
)

// memFrontier is a Frontier in memory, for the Queue's side of the fleet's frontier in a synctest
// bubble: leases never run out by themselves, and renewals fail while renewFails is set.
type memFrontier struct {
	*memoryStore
	ttl time.Duration

	mu         sync.Mutex
	seen       map[string]bool
	queued     map[string][]DeferredRequest
	taken      map[string]map[int64]DeferredRequest
	lease      map[string]string
	seq        int64
	renewFails bool
	released   []string
	share      int                  // the share FrontierRenew reports, and FrontierLease keeps to (0: none)
	next       time.Duration        // when FrontierLease says the next host is due
	leaseCalls []time.Time          // when FrontierLease was called
	dueAt      map[string]time.Time // a released host is due at its next departure
}

var _ Frontier = (*memFrontier)(nil)

func newMemFrontier(ttl time.Duration) *memFrontier {
	return &memFrontier{memoryStore: newMemoryStore(), ttl: ttl, seen: map[string]bool{}, queued: map[string][]DeferredRequest{},
		taken: map[string]map[int64]DeferredRequest{}, lease: map[string]string{}}
}

func (f *memFrontier) FrontierAdd(_ context.Context, host string, reqs []DeferredRequest, keys []string, force bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i, r := range reqs {
		if f.seen[keys[i]] && !force {
			continue
		}
		f.seen[keys[i]] = true
		f.seq++
		r.ID, r.Host = f.seq, host
		f.queued[host] = append(f.queued[host], r)
		n++
	}
	return n, nil
}

func (f *memFrontier) leftLocked() int {
	n := 0
	for h, q := range f.queued {
		n += len(q) + len(f.taken[h])
	}
	return n
}

func (f *memFrontier) FrontierLease(_ context.Context, owner string, n int, held []string) ([]Lease, []string, int, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseCalls = append(f.leaseCalls, time.Now())
	if f.share > 0 {
		n = min(n, f.share-len(held))
	}
	var out []Lease
	for h, q := range f.queued {
		if len(out) < n && len(q) > 0 && f.lease[h] == "" && !time.Now().Before(f.dueAt[h]) {
			f.lease[h] = owner
			f.seq++
			out = append(out, Lease{Host: h, Token: f.seq, Until: time.Now().Add(f.ttl)})
		}
	}
	return out, nil, f.leftLocked(), f.next, nil
}

func (f *memFrontier) FrontierRenew(_ context.Context, owner string, hosts []string) ([]string, time.Time, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewFails {
		return nil, time.Time{}, 0, errors.New("renewal: connection refused")
	}
	var lost []string
	for _, h := range hosts {
		if f.lease[h] != owner {
			lost = append(lost, h)
		}
	}
	return lost, time.Now().Add(f.ttl), f.share, nil
}

// FrontierAdmit is never called: memFrontier is not a SharedStore.
func (f *memFrontier) FrontierAdmit(context.Context, Lease, time.Duration) (Admission, error) {
	return Admission{}, errors.New("memFrontier admits nothing")
}

func (f *memFrontier) FrontierLeave(context.Context, string) error { return nil }

func (f *memFrontier) FrontierTake(_ context.Context, owner, host string, n int) ([]DeferredRequest, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease[host] != owner {
		return nil, false, fmt.Errorf("%w: %s", ErrLeaseLost, host)
	}
	q := f.queued[host]
	got := slices.Clone(q[:min(n, len(q))])
	f.queued[host] = q[len(got):]
	if f.taken[host] == nil {
		f.taken[host] = map[int64]DeferredRequest{}
	}
	for _, r := range got {
		f.taken[host][r.ID] = r
	}
	if len(got) == 0 && len(f.taken[host]) == 0 {
		delete(f.lease, host)
		return nil, false, nil
	}
	return got, true, nil
}

func (f *memFrontier) FrontierDone(_ context.Context, host string, ids []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		delete(f.taken[host], id)
	}
	return nil
}

func (f *memFrontier) FrontierRelease(_ context.Context, owner, host string, after time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease[host] != owner {
		return nil
	}
	var back []DeferredRequest
	for _, r := range f.taken[host] {
		back = append(back, r)
	}
	slices.SortFunc(back, func(a, b DeferredRequest) int { return int(a.ID - b.ID) })
	f.queued[host] = append(back, f.queued[host]...)
	delete(f.taken, host)
	delete(f.lease, host)
	f.released = append(f.released, host)
	if f.dueAt == nil {
		f.dueAt = map[string]time.Time{}
	}
	f.dueAt[host] = time.Now().Add(after)
	return nil
}

func (f *memFrontier) FrontierSize(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leftLocked(), nil
}

func (f *memFrontier) FrontierTTL() time.Duration { return f.ttl }

// A Queue whose lease renewals fail stops sending to the host two thirds into the lease, a third
// before it runs out on the store, so that the host's next owner never sends at the same time.
func TestFleetQueueStopsSendingBeforeAnUnrenewedLeaseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		h, base := n.host("a.test", slowPage(0))
		f := newMemFrontier(3 * time.Second)
		f.renewFails = true
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		c := colly.NewCollector(colly.StdlibContext(ctx))
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(700*time.Millisecond), WithoutRobots(), WithStore(f))
		defer p.Close()
		q := NewQueue(p, 2)
		for i := range 8 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := q.Run(c); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want the context's end (the host is held, unrenewed)", err)
		}
		arrivals := h.gaps("/p/")
		if got := len(arrivals) + 1; got != 3 {
			t.Errorf("%d pages sent, want 3 (at 0, 0.7 and 1.4 s: the lease is dropped at 2 s)", got)
		}
		h.mu.Lock()
		last := h.arrivals[len(h.arrivals)-1].at
		h.mu.Unlock()
		if end := start.Add(2 * time.Second); last.After(end) {
			t.Errorf("a page sent %v after the start: past two thirds of the unrenewed 3 s lease", last.Sub(start))
		}
	})
}

// Stop gives the leases back: the requests taken and not sent return to the head of their host's
// queue, and Size counts them.
func TestFleetQueueStopReturnsLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		_, base := n.host("b.test", slowPage(0))
		f := newMemFrontier(3 * time.Second)
		c := colly.NewCollector()
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(time.Second), WithoutRobots(), WithStore(f))
		defer p.Close()
		q := NewQueue(p, 1)
		for i := range 6 {
			if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.AddURL(base + "/p/0"); err != nil { // the same URL again: not queued twice
			t.Fatal(err)
		}
		sent := 0
		c.OnScraped(func(*colly.Response) {
			if sent++; sent == 2 {
				q.Stop()
			}
		})
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.released, []string{"b.test"}) {
			t.Errorf("leases given back: %v, want b.test", f.released)
		}
		if got := q.Size(); got != 4 {
			t.Errorf("Size after Stop = %d, want the 4 pages not sent", got)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if got := f.queued["b.test"]; len(got) != 4 || got[0].URL != base+"/p/2" {
			t.Errorf("queued after Stop: %d, first %q; want /p/2 to /p/5, in order", len(got), got[0].URL)
		}
	})
}

// Issue 27, item 1: a member holding more hosts than its share gives the excess up at its heartbeat,
// each host due again at its next departure by the member's schedule (its pacing holds across the
// handover), and counts them stolen; the hosts it gave up are crawled all the same, each page once,
// at the interval.
func TestFleetQueueGivesUpHostsOverItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		f := newMemFrontier(2 * time.Second)
		c := colly.NewCollector()
		const interval = 300 * time.Millisecond
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(interval), WithoutRobots(), WithStore(f))
		defer p.Close()
		q := NewQueue(p, 4)
		var hosts []*fakeHost
		for h := range 6 {
			fh, base := n.host(fmt.Sprintf("s%d.test", h), slowPage(0))
			hosts = append(hosts, fh)
			for i := range 8 {
				if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The member leases every host; at 1 s its share falls to 2 (others joined): it gives up 4.
		go func() {
			time.Sleep(time.Second)
			f.mu.Lock()
			f.share = 2
			f.mu.Unlock()
		}()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		st, ok := q.fleetStats()
		if !ok || st.Stolen < 1 || st.Leased < 6+st.Stolen || st.Held != 0 || st.Share != 2 {
			t.Errorf("FleetStats = %+v, %v; want hosts given up, leased again, none held at the end, share 2", st, ok)
		}
		f.mu.Lock()
		released := len(f.released)
		f.mu.Unlock()
		if int64(released) < st.Stolen {
			t.Errorf("%d leases given back to the frontier, want at least the %d given up", released, st.Stolen)
		}
		for _, h := range hosts {
			gaps := h.gaps("/p/")
			if len(gaps) != 7 {
				t.Errorf("%s: %d pages, want 8", h.name, len(gaps)+1)
			}
			for i, g := range gaps {
				if g < interval {
					t.Errorf("%s: pages %d and %d %v apart, under the %v interval", h.name, i, i+1, g, interval)
				}
			}
		}
	})
}

// Issue 35: a member holding its share, granted nothing at its last ask, asks the frontier again when
// its next host is due or after one heartbeat (500 ms with 2 s leases), not every fleetAskPoll; once a
// heartbeat tells it its share grew, it leases at once. Share 2 of 3 hosts, the next due in 10 s: from
// 1 s to 3 s at most 5 asks (20 at fleetAskPoll); its share grows to 3 at 3 s: the third host's first
// page goes within a heartbeat.
func TestFleetQueueAtItsShareAsksOncePerHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		f := newMemFrontier(2 * time.Second)
		f.share, f.next = 2, 10*time.Second
		c := colly.NewCollector()
		p := AdaptivePacing(c, WithTransport(n.tr), WithJitter(0), WithBaseDelay(300*time.Millisecond), WithoutRobots(), WithStore(f))
		defer p.Close()
		q := NewQueue(p, 4)
		var hosts []*fakeHost
		for h := range 3 {
			fh, base := n.host(fmt.Sprintf("s%d.test", h), slowPage(0))
			hosts = append(hosts, fh)
			for i := range 16 {
				if err := q.AddURL(fmt.Sprintf("%s/p/%d", base, i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		t0 := time.Now()
		grown := t0.Add(3 * time.Second)
		go func() {
			time.Sleep(time.Until(grown))
			f.mu.Lock()
			f.share = 3
			f.mu.Unlock()
		}()
		if err := q.Run(c); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		asks := 0
		for _, at := range f.leaseCalls {
			if d := at.Sub(t0); d >= time.Second && d < 3*time.Second {
				asks++
			}
		}
		f.mu.Unlock()
		if asks > 5 {
			t.Errorf("%d lease asks from 1 s to 3 s at its share, want at most 5 (one a heartbeat)", asks)
		}
		var third *fakeHost
		for _, h := range hosts {
			if log := h.log(); len(log) > 0 && log[0].at.After(t0.Add(time.Second)) {
				third = h
			}
		}
		if third == nil {
			t.Fatal("every host crawled from the start, want one held back by the share")
		}
		if first := third.log()[0].at; first.Before(grown) || first.After(grown.Add(600*time.Millisecond)) {
			t.Errorf("the third host's first page at %v, want within a heartbeat (500 ms) of its share growing at 3s", first.Sub(t0))
		}
	})
}

// fleetExcess gives up nothing before a share is known, and what is held beyond it after.
func TestFleetExcess(t *testing.T) {
	for _, c := range []struct{ held, share, want int }{{10, 0, 0}, {10, 10, 0}, {3, 10, 0}, {12, 10, 2}, {1, 1, 0}} {
		if got := fleetExcess(c.held, c.share); got != c.want {
			t.Errorf("fleetExcess(%d, %d) = %d, want %d", c.held, c.share, got, c.want)
		}
	}
}
