package ext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/collypace/ext/internal/scenario"
)

// simNet is an in-memory network of modelled hosts (scenario.Model) for crawls in virtual time
// (testing/synctest): a RoundTripper that carries each request to its host's model without sockets,
// so a 10-minute crawl costs what its requests cost, not 10 minutes.
//
// In virtual time every gap is exact, and a pacer cruising at exactly a limiter's interval would never
// meet the refusals that timing noise causes on a real network. simNet adds that noise: each request
// reaches its host after a one-way delay drawn uniformly from [minOneWay, maxOneWay], and its response
// reaches the client after another. The draws are a hash of the seed, the host and how many requests
// were sent to it before: a pacer sends to a host one request after another, so the n-th departure
// meets the same noise whichever URL it carries.
type simNet struct {
	seed                 uint64
	minOneWay, maxOneWay time.Duration

	mu    sync.Mutex // protects hosts (their models) and sends
	hosts map[string]*scenario.Model
	sends map[string]uint64 // requests sent to each host so far
}

// errSimDropped is a timeout's end: the modelled host dropped the connection without answering.
var errSimDropped = errors.New("simnet: connection dropped by the host")

func newSimNet(seed uint64, minOneWay, maxOneWay time.Duration) *simNet {
	return &simNet{seed: seed, minOneWay: minOneWay, maxOneWay: maxOneWay, hosts: map[string]*scenario.Model{}, sends: map[string]uint64{}}
}

// add serves host (a URL.Host such as "h0.test") from a model of cfg.
func (n *simNet) add(host string, cfg scenario.HostConfig) (*scenario.Model, error) {
	m, err := scenario.NewModel(cfg)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.hosts[host] = m
	n.mu.Unlock()
	return m, nil
}

// logs returns a host's arrivals and Retry-After windows.
func (n *simNet) logs(host string) ([]scenario.Arrival, []scenario.Window) {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := n.hosts[host]
	return m.Arrivals(), m.Windows()
}

// RoundTrip carries req to its host's model: it is written at once (WroteHeaders, the instant the
// pacer counts its departure from), reaches the host a one-way delay later, waits there as the model
// decides (a worker's queue, the service time, a timeout's hold), and its response comes back after
// another one-way delay.
func (n *simNet) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	sent := time.Now()
	host := req.URL.Host
	n.mu.Lock()
	m := n.hosts[host]
	k := n.sends[host]
	n.sends[host]++
	n.mu.Unlock()
	if m == nil {
		return nil, fmt.Errorf("simnet: no such host %q", req.URL.Host)
	}
	if !sleepCtx(ctx, n.oneWay(host, k, 0)) {
		return nil, context.Cause(ctx)
	}
	n.mu.Lock()
	d := m.DecideAt(time.Now(), req.URL.Path, sent)
	n.mu.Unlock()
	abandon := func() {
		n.mu.Lock()
		m.Abandon(d.Arrival)
		n.mu.Unlock()
	}
	if d.Hang > 0 {
		abandon()
		if !sleepCtx(ctx, d.Hang) {
			return nil, context.Cause(ctx)
		}
		return nil, errSimDropped
	}
	if !sleepCtx(ctx, d.QueueWait+d.Latency+n.oneWay(host, k, 1)) {
		abandon()
		return nil, context.Cause(ctx)
	}
	if d.Window >= 0 {
		n.mu.Lock()
		m.AnsweredAt(d.Window, time.Now())
		n.mu.Unlock()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", d.Status, http.StatusText(d.Status)),
		StatusCode:    d.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        d.Header,
		Body:          io.NopCloser(bytes.NewReader(d.Body)),
		ContentLength: int64(len(d.Body)),
		Request:       req,
	}, nil
}

// oneWay is the network delay of the k-th send to host, leg 0 to the host and 1 back.
func (n *simNet) oneWay(host string, k, leg uint64) time.Duration {
	if n.maxOneWay <= n.minOneWay {
		return n.minOneWay
	}
	h := simMix(n.seed ^ simMix(simHash(host)^simMix(k<<1|leg)))
	return n.minOneWay + time.Duration(h%uint64(n.maxOneWay-n.minOneWay+1))
}

// sleepCtx sleeps d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// simHash is FNV-1a over s.
func simHash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// simMix is splitmix64's finalizer.
func simMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
