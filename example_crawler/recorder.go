package main

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// recorder is the transport the pacer wraps: it notes when each request leaves for the network,
// per host, so start-to-start gaps can be measured at the client when the server's own log is out
// of reach (-url). robots.txt fetches are not noted.
type recorder struct {
	inner http.RoundTripper

	mu  sync.Mutex             // protects out
	out map[string][]time.Time // URL.Host → departures
}

func newRecorder(inner http.RoundTripper) *recorder {
	return &recorder{inner: inner, out: map[string][]time.Time{}}
}

// RoundTrip notes the departure and sends the request.
func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path != "/robots.txt" {
		now := time.Now()
		r.mu.Lock()
		r.out[req.URL.Host] = append(r.out[req.URL.Host], now)
		r.mu.Unlock()
	}
	return r.inner.RoundTrip(req)
}

// departures returns a copy of the departures to host.
func (r *recorder) departures(host string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.out[host])
}
