package ext

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"reflect"
	"sync"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/robots"
)

// transport is the RoundTripper the pacer installs on collectors. Every request that reaches the
// network passes it, including redirect hops and robots.txt fetches, so it is where departures are
// paced and outcomes observed. A request Colly announced in OnRequestHeaders has already waited there
// (before http.Client's timeout starts): the transport recognises it by its *url.URL, which Colly's
// Request and the first hop's http.Request share (http.Client copies the request for userinfo
// credentials, but not its URL), and only observes it. http.Client's Timeout reaches it as the request
// context's deadline, which it waits on and passes to the inner transport; net/http also arms a timer of
// its own per request for a RoundTripper it does not know, such as this one (BENCHMARKS.md, issue 34).
type transport struct {
	p         *Pacer
	inner     http.RoundTripper
	announced flightTable[*url.URL] // a flight waiting for its first hop, by the URL the hop carries
	failing   sync.Map              // URL identity (uintptr) → error: a request that must fail without leaving
}

// failWith makes the first hop carrying u fail with err, without leaving: OnError then sees err.
func (t *transport) failWith(u *url.URL, err error) {
	t.failing.Store(urlID(u), err)
}

// announce registers a departed request whose first hop will carry u.
func (t *transport) announce(u *url.URL, f *flight) {
	t.announced.store(u, f)
}

// unannounce forgets a request the transport never carried.
func (t *transport) unannounce(u *url.URL) {
	t.announced.take(u)
}

// claim takes the flight announced for the hop carrying u, nil when there is none (a redirect hop, a
// robots.txt fetch, a request Colly did not announce).
func (t *transport) claim(u *url.URL) *flight {
	f := t.announced.take(u)
	if f != nil {
		f.claimed.Store(true)
	}
	return f
}

// urlID is the identity of a URL.
func urlID(u *url.URL) uintptr {
	return reflect.ValueOf(u).Pointer()
}

// headerID is the identity of a header map: a queued Colly request's Headers map is the one its
// OnRequestHeaders callback sees.
func headerID(h http.Header) uintptr {
	if h == nil {
		return 0
	}
	return reflect.ValueOf(h).Pointer()
}

// RoundTrip paces the request unless it was announced, sends it, and observes the outcome.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	p := t.p
	f := t.claim(req.URL)
	if f == nil {
		if err, ok := t.failing.LoadAndDelete(urlID(req.URL)); ok {
			return nil, err.(error)
		}
		if req.Context().Err() != nil { // a request whose wait the crawl's end cut short: it does not leave
			return nil, context.Cause(req.Context())
		}
		if p.cfg.robots && isRobotsRequest(req) && !robots.Fetching(req.Context()) {
			return p.serveRobots(req)
		}
		key := p.cfg.hostKey(req.URL)
		if p.cfg.robots && !robots.Fetching(req.Context()) {
			// A redirect hop to an origin not seen before: learn its Crawl-delay first.
			if _, err := p.ensureRobots(req.Context(), req.URL, key, req.Header.Get("User-Agent")); err != nil {
				return nil, err
			}
		}
		var err error
		now := p.now()
		if f, err = p.depart(req.Context(), p.hostAt(key, now), req.URL, now, true, true); err != nil {
			return nil, err
		}
		if robots.Departed(req.Context()) { // the hop departed: its network time counts from here
			f.res.robots = true
		}
	}
	if d := f.disp; d != nil && d.lease != nil {
		// A Queue's request under a lease: admitted while the lease held, it is sent only if it still
		// does, by this process's clock (a pause between the admission and here would send it after
		// the host passed to another member).
		if holds, why := d.lease.holds(p.now()); !holds {
			d.fenced.Store(true)
			f.finish(p, p.now()) // never on the wire: the store's pending departure ends with it
			return nil, errLeaseLostFor(d.lease, why)
		}
	}
	start := f.res.At // untraced, its admission stands for its wire instant, and its latency counts from it
	if f.res.traced { // the next departure counts from the wire: trace it
		start = p.now()
		trace := &httptrace.ClientTrace{WroteHeaders: func() { f.wire(p, p.now(), true) }}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	} else {
		f.wire(p, start, true)
	}
	resp, err := t.inner.RoundTrip(req)
	now := p.now()
	if err == nil {
		f.wire(p, start, true) // an inner transport that does not trace: it was sent when the round trip began
	}
	o := Outcome{Err: err, Latency: now.Sub(start)}
	if resp != nil {
		o.Status, o.Header = resp.StatusCode, resp.Header
	}
	if err != nil {
		if f.res.robots && !f.res.probe && robots.Unreachable(err) {
			// Nothing reached the host, nothing was learned of it: its schedule, its delay and its
			// breaker stay as they were, and robotsFailed makes its requests fail at once. (A probe's
			// failure still reopens the breaker.)
			f.res.h.unsent(f.res)
			t.record(f, o, Verdict{Trigger: audit.TriggerTransportError}, now, false)
		} else {
			t.observe(f, o, now)
		}
		f.finish(p, now)
		return nil, err
	}
	v := classify(o)
	f.body = flightBody{ReadCloser: resp.Body, t: t, f: f}
	if v != cleanVerdict {
		t.record(f, o, v, now, false)
	} else {
		// A clean status is only clean once the body has arrived: a host that hangs or breaks the
		// connection mid-body is failing, and must count as such.
		f.body.pending, f.body.unobserved = pendingOutcome{o.Status, o.Header, o.Latency}, true
	}
	resp.Body = &f.body
	return resp, nil
}

// observe classifies and records a flight's outcome; a failure after the collector's context ended
// is the crawl ending, not the host failing.
func (t *transport) observe(f *flight, o Outcome, now time.Time) {
	if o.Err != nil && f.parent != nil && f.parent.Err() != nil {
		o.Err = context.Canceled
	}
	t.record(f, o, classify(o), now, false)
}

// record hands a flight's outcome and its verdict to the pacer, and keeps the verdict on the flight
// for the binding. landing gives the flight's in-flight slot back with it (one host lock for both).
func (t *transport) record(f *flight, o Outcome, v Verdict, now time.Time, landing bool) {
	fv := &cleanOK
	if v != cleanOK.v || o.Status != cleanOK.status {
		fv = &flightVerdict{v: v, status: o.Status, at: now}
	}
	f.verdict.Store(fv)
	t.p.observe(f.res, o, v, now, landing, true)
}

// cleanOK is the verdict of most flights, shared (never written): a 200 whose body arrived.
var cleanOK = flightVerdict{v: cleanVerdict, status: http.StatusOK}

// flightBody ends the flight when the response body is closed. For a clean status it observes the
// outcome once the body is read: clean at its end (or when closed early by the reader), a transport
// error when reading it fails. It lives in its flight (one allocation a request).
type flightBody struct {
	io.ReadCloser
	t          *transport
	f          *flight
	pending    pendingOutcome // the clean outcome, while unobserved: its verdict is cleanVerdict
	unobserved bool
}

// pendingOutcome is a clean Outcome (no error) in 24 bytes rather than 40: the flight, allocated for
// every request, stays in the 256-byte size class.
type pendingOutcome struct {
	status  int
	header  http.Header
	latency time.Duration
}

func (o pendingOutcome) outcome() Outcome {
	return Outcome{Status: o.status, Header: o.header, Latency: o.latency}
}

// cleanVerdict is the verdict of a clean status.
var cleanVerdict = Verdict{Trigger: audit.TriggerClean}

func (b *flightBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.unobserved {
		o := b.pending.outcome()
		b.unobserved = false
		now := b.t.p.now()
		if err != io.EOF {
			o.Status, o.Header, o.Err = 0, nil, err
			b.t.observe(b.f, o, now) // another outcome: a transport error
		} else {
			// Read to its end: the flight ends here, and lands with its outcome, under one host lock.
			landing := b.f.end(b.t.p, now) && b.f.res.inFlight > 0
			b.t.record(b.f, o, cleanVerdict, now, landing)
		}
	}
	return n, err
}

func (b *flightBody) Close() error {
	err := b.ReadCloser.Close()
	if b.f.finished.Load() && !b.unobserved { // ended when read to its end (Colly reads it whole)
		return err
	}
	now := b.t.p.now()
	if b.unobserved {
		b.t.record(b.f, b.pending.outcome(), cleanVerdict, now, false)
		b.unobserved = false
	}
	b.f.finish(b.t.p, now)
	return err
}

func isRobotsRequest(req *http.Request) bool {
	return req.Method == http.MethodGet && req.URL.Path == "/robots.txt" && req.Response == nil
}
