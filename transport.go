package ext

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
)

// flight is one departure between its wait and the end of its response.
type flight struct {
	h        *host
	res      Reservation
	departed time.Time
	parent   context.Context // the collector's context, for a departure Colly announced
	claimed  atomic.Bool     // the pacing transport carried it
	finished atomic.Bool
}

// finish gives the in-flight slot back, once.
func (f *flight) finish(now time.Time) {
	if f.finished.CompareAndSwap(false, true) {
		f.h.lastBodyDone.Store(now.UnixNano())
		f.h.release()
	}
}

// depart waits for an in-flight slot and a departure slot on h.
func (p *Pacer) depart(ctx context.Context, h *host) (*flight, error) {
	if err := h.acquire(ctx); err != nil {
		p.auditAbandoned(h, err)
		return nil, err
	}
	res, err := p.waitDeparture(ctx, h)
	if err != nil {
		h.release()
		p.auditAbandoned(h, err)
		return nil, err
	}
	p.auditDeparture(h, res)
	return &flight{h: h, res: res, departed: p.now()}, nil
}

// transport is the RoundTripper the pacer installs on collectors. Every request that reaches the
// network passes it, including redirect hops and robots.txt fetches, so it is where departures are
// paced and outcomes observed. A request Colly announced in OnRequestHeaders has already waited there
// (before http.Client's timeout starts): the transport recognises it by its header map and only
// observes it.
type transport struct {
	p         *Pacer
	inner     http.RoundTripper
	announced sync.Map // header map identity (uintptr) → *flight waiting for its first hop
}

// announce registers a departed request whose first hop will carry header.
func (t *transport) announce(header http.Header, f *flight) {
	t.announced.Store(headerID(header), f)
}

// unannounce forgets a request the transport never carried.
func (t *transport) unannounce(header http.Header) {
	t.announced.Delete(headerID(header))
}

func (t *transport) claim(header http.Header) *flight {
	v, ok := t.announced.LoadAndDelete(headerID(header))
	if !ok {
		return nil
	}
	f := v.(*flight)
	f.claimed.Store(true)
	return f
}

// headerID is the identity of a header map: Colly's Request.Headers and the first hop's
// http.Request.Header are the same map.
func headerID(h http.Header) uintptr {
	if h == nil {
		return 0
	}
	return reflect.ValueOf(h).Pointer()
}

type robotsFetchKey struct{}

// RoundTrip paces the request unless it was announced, sends it, and observes the outcome.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.p
	f := t.claim(req.Header)
	if f == nil {
		if p.cfg.robots && isRobotsRequest(req) && req.Context().Value(robotsFetchKey{}) == nil {
			return p.serveRobots(req)
		}
		if p.cfg.robots && req.Context().Value(robotsFetchKey{}) == nil {
			// A redirect hop to an origin not seen before: learn its Crawl-delay first.
			if _, err := p.ensureRobots(req.Context(), req.URL, req.Header.Get("User-Agent")); err != nil {
				return nil, err
			}
		}
		var err error
		if f, err = p.depart(req.Context(), p.host(p.cfg.hostKey(req.URL))); err != nil {
			return nil, err
		}
	}
	start := p.now()
	resp, err := t.inner.RoundTrip(req)
	now := p.now()
	o := Outcome{Err: err, Latency: now.Sub(start)}
	if resp != nil {
		o.Status, o.Header = resp.StatusCode, resp.Header
	}
	if err != nil || classify(o).Trigger != TriggerClean {
		t.observe(f, o, now)
		if err != nil {
			f.finish(now)
			return nil, err
		}
		resp.Body = &flightBody{ReadCloser: resp.Body, t: t, f: f}
		return resp, nil
	}
	// A clean status is only clean once the body has arrived: a host that hangs or breaks the
	// connection mid-body is failing, and must count as such.
	resp.Body = &flightBody{ReadCloser: resp.Body, t: t, f: f, pending: &o}
	return resp, nil
}

// observe records a flight's outcome; a failure after the collector's context ended is the crawl
// ending, not the host failing.
func (t *transport) observe(f *flight, o Outcome, now time.Time) {
	if o.Err != nil && f.parent != nil && f.parent.Err() != nil {
		o.Err = context.Canceled
	}
	t.p.ObserveAt(f.res, o, now)
}

// flightBody ends the flight when the response body is closed. For a clean status it observes the
// outcome once the body is read: clean at its end (or when closed early by the reader), a transport
// error when reading it fails.
type flightBody struct {
	io.ReadCloser
	t       *transport
	f       *flight
	pending *Outcome // the clean outcome not yet observed
}

func (b *flightBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.pending != nil {
		o := *b.pending
		b.pending = nil
		if err != io.EOF {
			o.Status, o.Header, o.Err = 0, nil, err
		}
		b.t.observe(b.f, o, b.t.p.now())
	}
	return n, err
}

func (b *flightBody) Close() error {
	err := b.ReadCloser.Close()
	now := b.t.p.now()
	if b.pending != nil {
		b.t.observe(b.f, *b.pending, now)
		b.pending = nil
	}
	b.f.finish(now)
	return err
}

func isRobotsRequest(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Path == "/robots.txt" && req.Response == nil
}
