package ext

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/robots"
	"github.com/collypace/ext/internal/robotstxt"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// robotsFleet is a fleet of pacers on one store, over one fake network of hosts that count their
// robots.txt reads.
type robotsFleet struct {
	t       *testing.T
	n       *fakeNet
	store   Store
	bases   []string
	fetches []*atomic.Int32
	page    atomic.Int32 // numbers the pages visited, so that no collector visits one twice
}

func newRobotsFleet(t *testing.T, store Store, hosts int, robots string) *robotsFleet {
	f := &robotsFleet{t: t, n: newFakeNet(t), store: store}
	for i := range hosts {
		var fetches atomic.Int32
		_, base := f.n.host(fmt.Sprintf("h%d.test", i), robotsSite(200, robots, &fetches))
		f.bases, f.fetches = append(f.bases, base), append(f.fetches, &fetches)
	}
	return f
}

// member starts a pacer of the fleet; it is closed when the test ends.
func (f *robotsFleet) member(opts ...Option) (*colly.Collector, *Pacer) {
	c, p := pacedCollector(f.n, append([]Option{WithStore(f.store), WithBaseDelay(100 * time.Millisecond)}, opts...)...)
	f.t.Cleanup(func() { _ = p.Close() })
	return c, p
}

// crawl has every collector visit a page of every host at once, and waits for them.
func (f *robotsFleet) crawl(cs ...*colly.Collector) {
	var wg sync.WaitGroup
	for _, c := range cs {
		for _, base := range f.bases {
			u := fmt.Sprintf("%s/p/%d", base, f.page.Add(1))
			wg.Go(func() {
				if err := c.Visit(u); err != nil {
					f.t.Errorf("visit %s: %v", u, err)
				}
			})
		}
	}
	wg.Wait()
	for _, c := range cs {
		c.Wait()
	}
}

// assertFetches checks that every host was asked for robots.txt want times.
func (f *robotsFleet) assertFetches(when string, want int32) {
	f.t.Helper()
	for i, n := range f.fetches {
		if got := n.Load(); got != want {
			f.t.Errorf("%s: %s asked for robots.txt %d times, want %d", when, f.bases[i], got, want)
		}
	}
}

// Issue 35 item 3: pacers sharing a store ask each origin for robots.txt once, when they miss at
// once, when a host changes hands and after restarts; once more when the read expires; and each member
// paces by the Crawl-delay read by another.
func TestRobotsReadOncePerFleet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRobotsFleet(t, newMemoryStore(), 4, "User-agent: *\nCrawl-delay: 2\n")
		c1, _ := f.member()
		c2, _ := f.member()
		c3, p3 := f.member()
		f.crawl(c1, c2, c3)
		f.assertFetches("three members missing at once", 1)

		c4, p4 := f.member() // a member that takes the hosts over
		f.crawl(c4)
		f.assertFetches("after a takeover", 1)
		for _, p := range []*Pacer{p3, p4} {
			if st, _ := p.Host("h0.test"); st.CrawlDelay != 2*time.Second {
				t.Errorf("a member's Crawl-delay %v, want robots.txt's 2s", st.CrawlDelay)
			}
		}

		time.Sleep(defaultRobotsTTL)
		f.crawl(c1, c2, c3, c4)
		f.assertFetches("after the expiry", 2)
	})
}

// Colly's own robots.txt check is served from the shared read: a path disallowed by robots.txt that
// another member read is not visited.
func TestRobotsSharedReadDisallows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRobotsFleet(t, newMemoryStore(), 1, "User-agent: *\nDisallow: /private\n")
		c1, _ := f.member()
		f.crawl(c1)
		c2, _ := f.member()
		c2.IgnoreRobotsTxt = false
		if err := c2.Visit(f.bases[0] + "/private/x"); !errors.Is(err, colly.ErrRobotsTxtBlocked) {
			t.Errorf("visit of a disallowed path = %v, want ErrRobotsTxtBlocked", err)
		}
		f.assertFetches("a second member's robots check", 1)
	})
}

// An unreachable robots.txt is not shared: each member that misses reads it itself (the claim is given
// up), then retries on its own schedule, holding the host meanwhile, as without a store; the read that
// succeeds is shared.
func TestRobotsUnreachableNotShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNet(t)
		store := newMemoryStore()
		robots := newMutableRobots("User-agent: *\n")
		robots.status = func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}
		h, base := n.host("down.test", robots.handler)
		var cs []*colly.Collector
		for range 2 {
			c, p := pacedCollector(n, WithStore(store))
			defer p.Close()
			cs = append(cs, c)
		}
		var wg sync.WaitGroup
		for i, c := range cs {
			wg.Go(func() { visitAll(t, c, fmt.Sprintf("%s/m%d", base, i), 1) })
		}
		wg.Wait()
		if got := robots.fetches.Load(); got != 3 {
			t.Errorf("robots.txt asked %d times, want 3 (a 503 for each member, then one shared read)", got)
		}
		if got := len(pageArrivals(h)); got != 2 {
			t.Errorf("%d pages, want 2", got)
		}
		if status, _, _, _ := store.LoadRobots(t.Context(), base); status != http.StatusOK {
			t.Errorf("stored read %d, want the 200", status)
		}
	})
}

// robotsFailingStore is a store whose robots.txt methods fail.
type robotsFailingStore struct{ *memoryStore }

var errRobotsStoreDown = errors.New("store down")

func (robotsFailingStore) LoadRobots(context.Context, string) (int, []byte, time.Time, error) {
	return 0, nil, time.Time{}, errRobotsStoreDown
}
func (robotsFailingStore) SaveRobots(context.Context, string, int, []byte, time.Time, time.Duration) error {
	return errRobotsStoreDown
}
func (robotsFailingStore) ClaimRobots(context.Context, string, string, time.Duration) (bool, error) {
	return false, errRobotsStoreDown
}
func (robotsFailingStore) ReleaseRobots(context.Context, string, string) error {
	return errRobotsStoreDown
}

// A store that fails never stops the crawl: each member reads robots.txt itself, and says so.
func TestRobotsFailingStoreFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newRobotsFleet(t, robotsFailingStore{newMemoryStore()}, 2, "User-agent: *\nCrawl-delay: 1\n")
		var buf auditBuf
		c1, p1 := f.member(WithLogger(zerolog.New(&buf)))
		c2, _ := f.member()
		f.crawl(c1, c2)
		f.assertFetches("two members on a failing store", 2)
		if st, _ := p1.Host("h0.test"); st.CrawlDelay != time.Second {
			t.Errorf("Crawl-delay %v, want robots.txt's 1s", st.CrawlDelay)
		}
		ev := findEvent(t, &buf, audit.EventStoreUnavailable)
		if ev == nil || !strings.Contains(ev[audit.FieldDetail].(string), "robots.txt of http://h") {
			t.Errorf("store_unavailable = %v, want one naming the robots.txt read without the store", ev)
		}
	})
}

// A stored read that cannot be trusted is read again, overwritten, and audited.
func TestRobotsBadStoredReadReadAgain(t *testing.T) {
	type read struct {
		status    int
		body      []byte
		fetchedAt time.Duration // from now; -1: the zero time
	}
	for name, bad := range map[string]read{
		"unreachable status": {status: 503},
		"future read":        {status: 200, fetchedAt: time.Hour},
		"oversized body":     {status: 200, body: make([]byte, robotstxt.MaxBody+2)},
		"no read instant":    {status: 200, fetchedAt: -1},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemoryStore()
				f := newRobotsFleet(t, store, 1, "User-agent: *\nCrawl-delay: 1\n")
				at := time.Now().Add(bad.fetchedAt)
				if bad.fetchedAt < 0 {
					at = time.Time{}
				}
				if err := store.SaveRobots(t.Context(), f.bases[0], bad.status, bad.body, at, time.Hour); err != nil {
					t.Fatal(err)
				}
				var buf auditBuf
				c, p := f.member(WithLogger(zerolog.New(&buf)))
				f.crawl(c)
				f.assertFetches("a bad stored read", 1)
				if st, _ := p.Host("h0.test"); st.CrawlDelay != time.Second {
					t.Errorf("Crawl-delay %v, want robots.txt's 1s", st.CrawlDelay)
				}
				if findEvent(t, &buf, audit.EventStateCorrupt) == nil {
					t.Error("no state_corrupt event for the bad stored read")
				}
				if status, body, _, _ := store.LoadRobots(t.Context(), f.bases[0]); status != 200 || len(body) == 0 {
					t.Errorf("stored read %d %q, want robots.txt as read again", status, body)
				}
			})
		})
	}
}

// A member that waits for another's claim past robots.ClaimWait (the claimant died) reads robots.txt
// itself.
func TestRobotsStaleClaimBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemoryStore()
		f := newRobotsFleet(t, store, 1, "User-agent: *\n")
		if ok, _ := store.ClaimRobots(t.Context(), f.bases[0], "dead", time.Hour); !ok {
			t.Fatal("claim refused")
		}
		c, _ := f.member()
		start := time.Now()
		f.crawl(c)
		f.assertFetches("a claim left by a dead member", 1)
		if waited := time.Since(start); waited < robots.ClaimWait || waited > robots.ClaimWait+time.Second {
			t.Errorf("the page came %v after the visit, want the claim's wait bound %v (and its read)", waited, robots.ClaimWait)
		}
	})
}

// A fleet's robots.txt read is a departure to the host but not a page its limiter is known to count:
// it is reported to the store as the refusals are, so that the page after it credits only a lower bound
// of the gap since the host's last accepted request (issue 32: a robots.txt read 10 ms before the first
// page was taken as a 10 ms gap the host accepted, and every refusal after it read as not about speed).
func TestFleetRobotsReadCreditsNoPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := newSimShared()
		f := newRobotsFleet(t, shared.view(1), 1, "User-agent: *\n")
		c, _ := f.member()
		f.crawl(c)
		f.assertFetches("one member", 1)
		shared.mu.Lock()
		defer shared.mu.Unlock()
		h := shared.fleet["h0.test"]
		if h == nil || h.seq != 2 {
			t.Fatalf("the fleet's departures to h0.test: %+v, want the robots.txt read and a page", h)
		}
		if h.refused != 1 {
			t.Errorf("the robots.txt read (departure 1) is not reported as uncredited: the latest reported is %d", h.refused)
		}
	})
}
