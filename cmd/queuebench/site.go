package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// site is one loopback server playing every host of the crawl: hosts h0000.test… by Host header, the
// first cfg.slow of them with a robots.txt Crawl-delay, the next cfg.refusing answering their first
// page request 429 with Retry-After: 1.
type site struct {
	srv     *httptest.Server
	cfg     config
	pages   atomic.Int64 // pages served with 200
	refused atomic.Int64 // pages answered 429
	last    atomic.Int64 // unix nanos of the last page served

	mu      sync.Mutex      // protects visited
	visited map[string]bool // refusing hosts that had their first request
}

func startSite(cfg config) *site {
	s := &site{cfg: cfg, visited: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func hostName(i int) string { return fmt.Sprintf("h%04d.test", i) }

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	host := strings.TrimSuffix(r.Host, ":80")
	i := -1
	if _, err := fmt.Sscanf(host, "h%d.test", &i); err != nil {
		i = -1
	}
	if r.URL.Path == "/robots.txt" {
		if i >= 0 && i < s.cfg.slow {
			fmt.Fprintf(w, "User-agent: *\nCrawl-delay: %g\n", s.cfg.crawlDelay.Seconds())
			return
		}
		http.NotFound(w, r)
		return
	}
	if i >= s.cfg.slow && i < s.cfg.slow+s.cfg.refusing && s.firstVisit(host) {
		s.refused.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	fmt.Fprint(w, "<html><body>page</body></html>")
	s.pages.Add(1)
	s.last.Store(time.Now().UnixNano())
}

// firstVisit reports whether this is the first page request to host.
func (s *site) firstVisit(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := !s.visited[host]
	s.visited[host] = true
	return first
}

// transport sends every host's requests to the one server.
func (s *site) transport() *http.Transport {
	addr := s.srv.Listener.Addr().String()
	var d net.Dialer
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}
}

// urls lists every URL, host by host in turns (page 0 of every host, then page 1…), the order most
// favourable to a FIFO queue.
func (s *site) urls() []string {
	var out []string
	for p := range s.cfg.pages {
		for h := range s.cfg.hosts {
			out = append(out, fmt.Sprintf("http://%s/p/%d", hostName(h), p))
		}
	}
	return out
}
