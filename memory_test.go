package ext

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/internal/robots"
)

// What the pacer keeps per host: its state, its place in the host map and its robots.txt rules,
// measured on the heap after a collection, and what it still keeps once they have gone idle and been
// evicted.
//
//	go test -run '^$' -bench MemoryPerHost -benchtime 1x .    # 100 000 hosts

// robotsInMemory answers every robots.txt from memory (Crawl-delay 1 s) and 404 otherwise: the hosts
// are filled through the pacer's own robots.txt read, with no network.
type robotsInMemory struct{}

func (robotsInMemory) RoundTrip(req *http.Request) (*http.Response, error) {
	status, body := http.StatusNotFound, ""
	if req.URL.Path == "/robots.txt" {
		status, body = http.StatusOK, "User-agent: *\nCrawl-delay: 1\n"
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// fillHosts gives p n hosts, each with one departure recorded and its robots.txt read, at now.
func fillHosts(tb testing.TB, p *Pacer, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	for i := range n {
		key := "host-" + strconv.Itoa(i) + ".example"
		if _, ok := p.AdmitAt(key, now); !ok {
			tb.Fatalf("%s: first departure not admitted", key)
		}
		if _, err := p.ensureRobots(ctx, &url.URL{Scheme: "http", Host: key, Path: "/"}, key, "bench"); err != nil {
			tb.Fatalf("%s: %v", key, err)
		}
	}
}

// memoryPerHost fills a new pacer with n hosts and returns the heap it keeps per host, then the heap
// it still keeps (in total) once they have all been idle past the eviction delay and swept.
func memoryPerHost(tb testing.TB, n int) (perHost float64, afterIdle int64) {
	before := heapInUse()
	p := NewPacer(WithTransport(robotsInMemory{}), WithBaseDelay(100*time.Millisecond))
	now := time.Now()
	fillHosts(tb, p, n, now)
	full := heapInUse()
	if got := p.hosts.Len(); got != n {
		tb.Fatalf("%d hosts in memory, want %d", got, n)
	}
	p.evictIdleAt(now.Add(defaultIdleEviction + time.Hour))
	idle := heapInUse()
	runtime.KeepAlive(p)
	return float64(int64(full)-int64(before)) / float64(n), int64(idle) - int64(before)
}

// A host costs a bounded amount, robots.txt included (the benchmark measures 100 000 hosts; a host
// state of about 700 bytes, a robots.txt entry of 144 and the maps' share come to about 1 080), and
// once the hosts are idle and evicted the memory kept no longer depends on how many there were: the
// robots cache keeps the rules of the last robots.IdleHosts evicted hosts only, and the maps shrink.
func TestMemoryPerHostBounded(t *testing.T) {
	small, keptSmall := memoryPerHost(t, 2*robots.IdleHosts)
	large, keptLarge := memoryPerHost(t, 6*robots.IdleHosts)
	t.Logf("%.0f and %.0f bytes per host at %d and %d hosts; %d and %d bytes kept once idle",
		small, large, 2*robots.IdleHosts, 6*robots.IdleHosts, keptSmall, keptLarge)
	// Issue 32: a field the model needs to be right is worth its bytes. The budget is 2 KiB a host with
	// Colly's own share (about 490 B: its visited set and request state), so 1536 B for ours.
	if large > 1536 {
		t.Errorf("%.0f bytes per host at %d hosts, want at most 1536 (2 KiB with Colly's share)", large, 6*robots.IdleHosts)
	}
	if keptLarge > robots.IdleHosts*1024+256<<10 {
		t.Errorf("%d bytes kept once %d hosts were idle and evicted, want at most %d", keptLarge, 6*robots.IdleHosts, robots.IdleHosts*1024+256<<10)
	}
	if keptLarge-keptSmall > 128<<10 {
		t.Errorf("memory kept once idle grows with the hosts seen: %d bytes after %d hosts, %d after %d",
			keptSmall, 2*robots.IdleHosts, keptLarge, 6*robots.IdleHosts)
	}
}

func BenchmarkMemoryPerHost(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		perHost, afterIdle := memoryPerHost(b, n)
		b.ReportMetric(perHost, "B/host")
		b.ReportMetric(float64(afterIdle)/n, "B/host-idle")
	}
}
