package ext

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
)

// The whole path a page takes through Colly, bare and paced, on local hosts that answer at once: the
// pacer's own cost per request is the difference. cmd/costbench runs the same crawl as a program
// (alternating runs, medians) for BENCHMARKS.md; these benchmarks are for profiling:
//
//	go test -run '^$' -bench CollyPath -benchtime 20000x -cpuprofile /tmp/cpu.out .
//
// Each reports cpu-ns/req, the process's user + sys CPU time per page (servers included), beside
// Go's ns/op (wall), B/op and allocs/op, all per page.

// costHosts is how many local hosts the crawl spreads over, each a listener of its own (a host key).
const costHosts = 100

// startCostHosts serves n loopback hosts answering every request at once with a short page, and
// returns their base URLs; they close when b ends.
func startCostHosts(b *testing.B, n int) []string {
	b.Helper()
	page := []byte("<html><body>ok</body></html>")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(page)
	}), ReadHeaderTimeout: 10 * time.Second}
	bases := make([]string, n)
	for i := range bases {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
		bases[i] = "http://" + ln.Addr().String()
	}
	b.Cleanup(func() { _ = srv.Close() })
	return bases
}

// costTransport keeps enough idle connections per host for 64 requests in flight, so neither crawl
// spends its CPU dialling.
func costTransport() *http.Transport {
	return &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
}

// cpuTime is the process's user + sys CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkCollyPath(b *testing.B) {
	for _, paced := range []bool{false, true} {
		name := "bare"
		if paced {
			name = "paced"
		}
		b.Run(name, func(b *testing.B) {
			bases := startCostHosts(b, costHosts)
			tr := costTransport()
			defer tr.CloseIdleConnections()
			urls := make([]string, b.N)
			for i := range urls {
				urls[i] = bases[i%len(bases)] + "/p/" + strconv.Itoa(i)
			}
			c := colly.NewCollector(colly.Async(true))
			if paced {
				AdaptivePacing(c, WithBaseDelay(0), WithoutRobots(), WithJitter(0), WithMaxInFlight(64), WithTransport(tr))
			} else {
				c.WithTransport(tr)
			}
			if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 64}); err != nil {
				b.Fatal(err)
			}
			var pages, failed atomic.Int64
			c.OnResponse(func(*colly.Response) { pages.Add(1) })
			c.OnError(func(*colly.Response, error) { failed.Add(1) })
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for _, u := range urls {
				if err := c.Visit(u); err != nil {
					b.Fatal(err)
				}
			}
			c.Wait()
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/req")
			b.StopTimer()
			if pages.Load() != int64(b.N) {
				b.Fatalf("%d pages, %d failed, want %d pages", pages.Load(), failed.Load(), b.N)
			}
		})
	}
}

// cannedTransport answers every request at once with the same 200 response, reused: what it
// allocates is not the pacer's.
type cannedTransport struct {
	resp http.Response
	body strings.Reader
}

func (c *cannedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	c.body.Reset("<html><body>ok</body></html>")
	c.resp.Body = io.NopCloser(&c.body)
	return &c.resp, nil
}

// BenchmarkPacerRequestPath is the pacer's own work for one page, without Colly or a network: the
// binding's OnRequestHeaders (host key, host, departure, announcement), the transport's round trip
// (claim, trace hook, outcome when the body ends, flight's end) and OnResponse, over 100 hosts. Its
// ns/op is the pacer's own CPU per request; BenchmarkCollyPath adds what it costs around it (Colly's
// callbacks, net/http's trace hooks, the garbage collector).
func BenchmarkPacerRequestPath(b *testing.B) {
	b.Run("without-robots", func(b *testing.B) { benchPacerRequestPath(b, WithoutRobots()) })
	b.Run("robots", func(b *testing.B) { benchPacerRequestPath(b) }) // robots.txt read once per host first
}

func benchPacerRequestPath(b *testing.B, opts ...Option) {
	inner := &cannedTransport{resp: http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/html"}}}}
	c := colly.NewCollector(colly.Async(true))
	p := AdaptivePacing(c, append([]Option{WithBaseDelay(0), WithJitter(0), WithMaxInFlight(64), WithTransport(inner)}, opts...)...)
	bd := newBinding(p, c)
	reqs := make([]*http.Request, costHosts)
	for i := range reqs {
		u, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(20000+i) + "/p")
		reqs[i] = (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}).WithContext(context.Background())
	}
	buf := make([]byte, 512)
	page := func(i int) {
		req := reqs[i%len(reqs)]
		r := &colly.Request{URL: req.URL, Headers: &req.Header, ID: uint32(i), Method: http.MethodGet}
		bd.onRequestHeaders(r)
		resp, err := p.rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		_ = resp.Body.Close()
		bd.onResponse(&colly.Response{StatusCode: resp.StatusCode, Headers: &resp.Header, Request: r})
	}
	for i := range reqs {
		page(i) // every host known, its robots.txt read
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		page(i)
	}
}
