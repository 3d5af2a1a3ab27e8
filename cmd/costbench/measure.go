package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	ext "github.com/collypace/ext"
	"github.com/gocolly/colly/v2"
)

// hosts are local HTTP hosts, one loopback listener each (so one pacer host key each), answering
// every request at once with a short page.
type hosts struct {
	srv   *http.Server
	bases []string     // http://127.0.0.1:PORT
	conns atomic.Int64 // connections accepted so far, all hosts together
}

var page = []byte("<html><body>ok</body></html>")

func startHosts(n int) (*hosts, error) {
	h := &hosts{srv: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(page)
	}), ReadHeaderTimeout: 10 * time.Second}}
	h.srv.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			h.conns.Add(1)
		}
	}
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			h.close()
			return nil, err
		}
		go func() { _ = h.srv.Serve(ln) }()
		h.bases = append(h.bases, "http://"+ln.Addr().String())
	}
	return h, nil
}

func (h *hosts) close() { _ = h.srv.Close() }

// sample is what one crawl cost.
type sample struct {
	cpu, wall     time.Duration
	allocs, bytes uint64
	pages         int
	conns         int64 // connections the crawl opened: dialling is a cost of its own, outside the pacer
}

// crawl fetches cfg.pages pages spread over the hosts with a new collector, bare or paced, and
// measures it: CPU from getrusage (the whole process, servers included), allocations from the
// runtime's metrics. Garbage from the run before is collected first, outside the measurement.
func crawl(ctx context.Context, cfg config, hs *hosts, paced bool) (sample, error) {
	bases := hs.bases
	urls := make([]string, cfg.pages)
	for i := range urls {
		urls[i] = bases[i%len(bases)] + "/p/" + strconv.Itoa(i)
	}
	tr := &http.Transport{MaxIdleConns: 64 * len(bases), MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, cfg.bound)
	defer cancel()
	c := colly.NewCollector(colly.Async(true), colly.StdlibContext(ctx))
	if paced {
		ext.AdaptivePacing(c, ext.WithBaseDelay(cfg.baseDelay), ext.WithoutRobots(), ext.WithJitter(0), ext.WithMaxInFlight(64), ext.WithTransport(tr))
	} else {
		c.WithTransport(tr)
	}
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 64}); err != nil {
		return sample{}, err
	}
	var pages atomic.Int64
	var firstErr atomic.Pointer[error]
	c.OnResponse(func(*colly.Response) { pages.Add(1) })
	c.OnError(func(_ *colly.Response, err error) { firstErr.CompareAndSwap(nil, &err) })

	runtime.GC()
	cpu0, wall0, mem0, conns0 := cpuTime(), time.Now(), allocs(), hs.conns.Load()
	for _, u := range urls {
		if err := c.Visit(u); err != nil {
			return sample{}, err
		}
	}
	c.Wait()
	mem1 := allocs()
	s := sample{cpu: cpuTime() - cpu0, wall: time.Since(wall0), pages: int(pages.Load()),
		allocs: mem1[0] - mem0[0], bytes: mem1[1] - mem0[1], conns: hs.conns.Load() - conns0}
	if s.pages != cfg.pages {
		if e := firstErr.Load(); e != nil {
			return s, fmt.Errorf("%d of %d pages fetched: %w", s.pages, cfg.pages, *e)
		}
		return s, fmt.Errorf("%d of %d pages fetched", s.pages, cfg.pages)
	}
	return s, nil
}

// cpuTime is the process's user + sys CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// allocs returns the heap allocations so far: objects and bytes.
func allocs() [2]uint64 {
	ms := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(ms)
	return [2]uint64{ms[0].Value.Uint64(), ms[1].Value.Uint64()}
}

// summary is the medians of one kind's runs, per request.
type summary struct {
	runs                int
	cpu, cpuMin, cpuMax time.Duration // per request
	wall                time.Duration // per crawl
	allocs, bytes       float64       // per request
	conns               float64       // per crawl
}

func summarize(ss []sample) summary {
	per := func(f func(sample) float64) []float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s) / float64(s.pages)
		}
		slices.Sort(v)
		return v
	}
	cpu := per(func(s sample) float64 { return float64(s.cpu) })
	wall := make([]float64, len(ss))
	for i, s := range ss {
		wall[i] = float64(s.wall)
	}
	slices.Sort(wall)
	conns := make([]float64, len(ss))
	for i, s := range ss {
		conns[i] = float64(s.conns)
	}
	slices.Sort(conns)
	return summary{
		runs:   len(ss),
		cpu:    time.Duration(median(cpu)),
		cpuMin: time.Duration(cpu[0]),
		cpuMax: time.Duration(cpu[len(cpu)-1]),
		wall:   time.Duration(median(wall)),
		allocs: median(per(func(s sample) float64 { return float64(s.allocs) })),
		bytes:  median(per(func(s sample) float64 { return float64(s.bytes) })),
		conns:  median(conns),
	}
}

// median of sorted values.
func median(v []float64) float64 {
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// pairedRatio is the median over the rounds of paced / bare CPU per request within each round (the two
// crawls of a round run back to back): a drift of the machine's speed across rounds cancels out.
func pairedRatio(bare, paced []sample) float64 {
	r := make([]float64, min(len(bare), len(paced)))
	for i := range r {
		r[i] = (float64(paced[i].cpu) / float64(paced[i].pages)) / (float64(bare[i].cpu) / float64(bare[i].pages))
	}
	slices.Sort(r)
	return median(r)
}
