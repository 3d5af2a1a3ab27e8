package ext

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fault is what the fault server does with one page request.
type fault int

const (
	faultNone             fault = iota // 200 and a small page
	faultHangAfterHeaders              // 200 headers, flushed, then no body until the client gives up
	faultReset                         // the connection is reset (RST) before any response byte
	faultSlow                          // no headers until the client gives up (slower than its timeout)
	faultCloseMidBody                  // half of the declared body, then the connection closes
	fault503                           // 503, no Retry-After
	fault429                           // 429, no Retry-After
)

func (f fault) String() string {
	return [...]string{"ok", "hang-after-headers", "reset", "slow", "close-mid-body", "503", "429"}[f]
}

// faultMaxHang bounds every hanging handler, so a client that never gives up cannot keep the server
// (and the test) alive.
const faultMaxHang = 5 * time.Second

// faultServer is a loopback HTTP server injecting faults into page requests: plan decides, from the
// 1-based number of the page request, what the server does with it. robots.txt is always a 404 and
// does not count as a page request.
type faultServer struct {
	srv   *httptest.Server
	plan  func(n int) fault
	pages atomic.Int64
	stop  chan struct{} // closed at teardown: every hanging handler returns

	mu     sync.Mutex // protects served
	served map[fault]int
}

// newFaultServer starts a fault server on 127.0.0.1 and stops it when the test ends (hanging
// handlers released first).
func newFaultServer(t *testing.T, plan func(n int) fault) *faultServer {
	t.Helper()
	s := &faultServer{plan: plan, stop: make(chan struct{}), served: map[fault]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.close)
	return s
}

// faultsFor returns a plan that applies f to the first n page requests, then answers normally.
func faultsFor(f fault, n int) func(int) fault {
	return func(i int) fault {
		if i <= n {
			return f
		}
		return faultNone
	}
}

func (s *faultServer) close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	s.srv.Close()
}

// count returns how many page requests met fault f.
func (s *faultServer) count(f fault) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[f]
}

// host is the server's host key (127.0.0.1:port).
func (s *faultServer) host() string { return strings.TrimPrefix(s.srv.URL, "http://") }

func (s *faultServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	f := s.plan(int(s.pages.Add(1)))
	s.mu.Lock()
	s.served[f]++
	s.mu.Unlock()
	rc := http.NewResponseController(w)
	switch f {
	case faultHangAfterHeaders:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		s.hang(r)
	case faultReset:
		conn, _, err := rc.Hijack()
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close sends RST, not FIN
		}
		_ = conn.Close()
	case faultSlow:
		s.hang(r)
	case faultCloseMidBody:
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", "2048")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "<html><body>"+strings.Repeat("x", 1000))
		_ = rc.Flush()
		panic(http.ErrAbortHandler) // the server closes the connection 1 KiB short
	case fault503:
		w.WriteHeader(http.StatusServiceUnavailable)
	case fault429:
		w.WriteHeader(http.StatusTooManyRequests)
	default:
		fmt.Fprint(w, "<html><body>ok</body></html>")
	}
}

// hang blocks until the client goes away, the server stops, or faultMaxHang passes.
func (s *faultServer) hang(r *http.Request) {
	t := time.NewTimer(faultMaxHang)
	defer t.Stop()
	select {
	case <-r.Context().Done():
	case <-s.stop:
	case <-t.C:
	}
}
