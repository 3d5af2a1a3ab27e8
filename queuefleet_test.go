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
}

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

func (f *memFrontier) FrontierLease(_ context.Context, owner string, n int) ([]string, int, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for h, q := range f.queued {
		if len(out) < n && len(q) > 0 && f.lease[h] == "" {
			f.lease[h] = owner
			out = append(out, h)
		}
	}
	return out, f.leftLocked(), 0, nil
}

func (f *memFrontier) FrontierRenew(_ context.Context, owner string, hosts []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.renewFails {
		return nil, errors.New("renewal: connection refused")
	}
	var lost []string
	for _, h := range hosts {
		if f.lease[h] != owner {
			lost = append(lost, h)
		}
	}
	return lost, nil
}

func (f *memFrontier) FrontierTake(_ context.Context, owner, host string, n int) ([]DeferredRequest, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lease[host] != owner {
		return nil, false, nil
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

func (f *memFrontier) FrontierRelease(_ context.Context, owner, host string, _ time.Duration) error {
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
