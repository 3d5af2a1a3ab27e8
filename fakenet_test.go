package ext

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeNet is an in-memory network of HTTP servers for tests inside a testing/synctest bubble, where
// loopback sockets would keep the bubble from going idle and time from advancing. Each host name maps
// to an http.Server reached through net.Pipe.
type fakeNet struct {
	t     *testing.T
	mu    sync.Mutex
	hosts map[string]*fakeHost
	tr    *http.Transport
}

// fakeHost is one server of a fakeNet with its arrival log, measured at the server.
type fakeHost struct {
	name     string
	srv      *http.Server
	conns    chan net.Conn
	done     chan struct{}
	mu       sync.Mutex
	arrivals []arrival
	inFlight int
	maxIn    int
}

type arrival struct {
	at   time.Time
	path string
}

func newFakeNet(t *testing.T) *fakeNet {
	n := &fakeNet{t: t, hosts: map[string]*fakeHost{}}
	n.tr = &http.Transport{
		DialContext: n.dial,
		// One connection per request keeps each request's timing independent.
		DisableKeepAlives: true,
	}
	t.Cleanup(n.close)
	return n
}

// host starts a server named name (such as "a.test") running handler and returns its base URL.
func (n *fakeNet) host(name string, handler http.HandlerFunc) (*fakeHost, string) {
	h := &fakeHost{name: name, conns: make(chan net.Conn), done: make(chan struct{})}
	h.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.arrivals = append(h.arrivals, arrival{at: time.Now(), path: r.URL.Path})
		h.inFlight++
		h.maxIn = max(h.maxIn, h.inFlight)
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.inFlight--
			h.mu.Unlock()
		}()
		handler(w, r)
	})}
	n.mu.Lock()
	n.hosts[name+":80"] = h
	n.mu.Unlock()
	go func() { _ = h.srv.Serve(h) }()
	return h, "http://" + name
}

func (n *fakeNet) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	h := n.hosts[addr]
	n.mu.Unlock()
	if h == nil {
		return nil, errors.New("fakenet: no such host " + addr)
	}
	cli, srv := net.Pipe()
	select {
	case h.conns <- srv:
		return cli, nil
	case <-h.done:
		return nil, errors.New("fakenet: host closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (n *fakeNet) close() {
	n.tr.CloseIdleConnections()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.hosts {
		_ = h.srv.Close()
	}
}

// net.Listener for the server side.
func (h *fakeHost) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *fakeHost) Close() error {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	return nil
}

func (h *fakeHost) Addr() net.Addr { return fakeAddr(h.name) }

type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }

// log returns the arrivals so far, in order.
func (h *fakeHost) log() []arrival {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := append([]arrival(nil), h.arrivals...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// gaps returns the start-to-start gaps between arrivals whose path has the prefix.
func (h *fakeHost) gaps(prefix string) []time.Duration {
	var last time.Time
	var out []time.Duration
	for _, a := range h.log() {
		if !strings.HasPrefix(a.path, prefix) {
			continue
		}
		if !last.IsZero() {
			out = append(out, a.at.Sub(last))
		}
		last = a.at
	}
	return out
}

func (h *fakeHost) maxInFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.maxIn
}
