package ext

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/collypace/ext/internal/robots"
)

// countingRobots is robotsInMemory counting the robots.txt reads.
type countingRobots struct{ reads atomic.Int32 }

func (c *countingRobots) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/robots.txt" {
		c.reads.Add(1)
	}
	return robotsInMemory{}.RoundTrip(req)
}

// Evicted hosts keep their robots.txt rules up to robots.IdleHosts of them: the oldest beyond it
// leave the robots cache, and its next request reads robots.txt again (its Crawl-delay applies again
// from that read), while a recently evicted host's rules are applied again without a read.
func TestRobotsCacheForgetsTheOldestEvictedHosts(t *testing.T) {
	rt := &countingRobots{}
	p := NewPacer(WithTransport(rt), WithBaseDelay(100*time.Millisecond))
	now := time.Now()
	n := robots.IdleHosts + 10
	fillHosts(t, p, n, now)
	if got := int(rt.reads.Load()); got != n {
		t.Fatalf("%d robots.txt reads for %d hosts", got, n)
	}
	if got := p.evictIdleAt(now.Add(defaultIdleEviction + time.Minute)); got != n {
		t.Fatalf("evicted %d hosts, want %d", got, n)
	}
	cached, _, _ := p.robots.Sizes()
	forgotten, kept := -1, -1 // a host whose rules left the cache, one whose rules stayed
	for i := range n {
		if p.robots.Lookup("http://host-"+strconv.Itoa(i)+".example") != nil {
			kept = i
		} else {
			forgotten = i
		}
	}
	if cached != robots.IdleHosts || forgotten < 0 || kept < 0 {
		t.Fatalf("%d origins in the robots cache after evicting %d hosts, want %d", cached, n, robots.IdleHosts)
	}
	read := func(i int) {
		t.Helper()
		key := "host-" + strconv.Itoa(i) + ".example"
		if _, err := p.ensureRobots(context.Background(), &url.URL{Scheme: "http", Host: key, Path: "/"}, key, "bench"); err != nil {
			t.Fatal(err)
		}
		if st, _ := p.Host(key); st.CrawlDelay != time.Second {
			t.Errorf("%s: Crawl-delay %v once back, want 1s", key, st.CrawlDelay)
		}
	}
	read(kept) // among the last robots.IdleHosts evicted: still known
	if got := int(rt.reads.Load()); got != n {
		t.Errorf("robots.txt read again for a host evicted last (%d reads, want %d)", got, n)
	}
	read(forgotten) // evicted first, beyond the bound: forgotten, read again
	if got := int(rt.reads.Load()); got != n+1 {
		t.Errorf("%d robots.txt reads after the first evicted host came back, want %d", got, n+1)
	}
}

// Rules due to be read again (past the robots.txt TTL) leave the cache with their host, whatever
// the bound: nothing would apply them again.
func TestRobotsCacheForgetsDueRulesOfEvictedHosts(t *testing.T) {
	p := NewPacer(WithTransport(robotsInMemory{}), WithBaseDelay(100*time.Millisecond))
	now := time.Now()
	fillHosts(t, p, 3, now)
	if got := p.evictIdleAt(now.Add(defaultRobotsTTL + time.Minute)); got != 3 {
		t.Fatalf("evicted %d hosts, want 3", got)
	}
	if origins, keys, idle := p.robots.Sizes(); origins != 0 || keys != 0 || idle != 0 {
		t.Errorf("robots cache after evicting hosts whose rules are due: %d origins, %d keys, %d idle",
			origins, keys, idle)
	}
}
