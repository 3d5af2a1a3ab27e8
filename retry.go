package ext

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// Retries of refused requests, and how a retry is told from a new request.
//
// A retry is identified by the request it copies, not by its method and URL: two requests to one
// URL (two POSTs with different bodies, a revisit) are two requests. What a copy carries is its header
// map. Request.Retry hands the request's own map to the copy it makes, while Visit, Post and Request
// give each new request a map of its own. The Context cannot tell them apart (a page's children share
// it), nor can the URL or the body. So the pacer keeps, for each header map it has seen refused, the
// fate of that attempt (tries), with its method and URL (Collector.Request may be given one map for
// several URLs: those are new requests), and a Retry of it is recognised when it reaches OnRequest:
//   - the pacer retries that attempt itself: the copy is a duplicate, dropped silently in OnRequest
//     (an aborted OnRequest never reaches OnError, so a callback that retries every error cannot loop);
//   - the pacer gave up on it (or was told not to retry): the copy is the user's own retry, and goes;
//   - the request was deferred: the copy is a duplicate of the stored one, dropped silently.
//
// Every attempt that goes counts once towards the request's 1 + MaxRetries, whoever sent it; the pacer
// never retries past that bound, and a user's retry after it gave up is the user's to bound.

// retriesCtxKey carries a request's retry count through a capture (deferral, the Queue), in its
// stored Context values: a request rebuilt from a capture has a header map of its own, so buildRequest
// takes the count out of the values (it never reaches a live Context, nor the request's children) and
// registers it for that map (tries.adopt).
const retriesCtxKey = "_collypace_retries"

// tryFate is what became of one attempt (one header map) of a request.
type tryFate uint8

const (
	trySent      tryFate = iota // on its way; no verdict on it yet
	tryRetried                  // the pacer sent a retry of it: another copy of it is a duplicate
	tryFinal                    // the pacer did not retry it: a Retry of it is the user's own
	tryDeferred                 // stored for later (its host is parked): another copy is a duplicate
	tryCancelled                // its wait ended with the crawl: a copy of it is a duplicate too
)

// tryRequest is one request across its attempts.
type tryRequest struct {
	retries int // attempts sent after the first, by the pacer or by a user's Retry
}

// tryEntry is one attempt: its header map (held, so that its address is not reused while it is a
// key), the request it belongs to and its fate.
type tryEntry struct {
	header http.Header
	target string // method and URL: a new request that shares a header map (Collector.Request with the
	// same map for several URLs) is not a copy of this attempt
	req  *tryRequest
	fate tryFate
	left bool      // it reached OnRequest: Retry's error, in sync mode, is then its outcome's, not "not sent"
	at   time.Time // last change, for expiry
}

// tries maps header-map identities to attempts. Only refused, deferred and retried attempts are in it:
// a request that succeeds first time costs one atomic load.
type tries struct {
	size atomic.Int32 // len(m), read without the lock on every request
	mu   sync.Mutex   // protects m
	m    map[uintptr]*tryEntry
}

// tryTTL is how long an attempt's fate is kept: long after the OnError callbacks that could copy it
// have run (in sync mode they run after the pacer's whole retry chain, Retry-After windows included).
const tryTTL = time.Hour

// target is what a copy of r repeats besides its header map: its method and URL.
func target(r *colly.Request) string {
	return r.Method + " " + r.URL.String()
}

// entry returns the attempt of header h, creating it (fate trySent, its own request) when absent or
// when the map now carries another request (target). Called with t.mu held.
func (t *tries) entry(h http.Header, target string, now time.Time) *tryEntry {
	id := headerID(h)
	if e, ok := t.m[id]; ok && e.target == target {
		return e
	}
	if t.m == nil {
		t.m = make(map[uintptr]*tryEntry)
	}
	if len(t.m) >= 1024 && len(t.m)%256 == 0 {
		for k, e := range t.m {
			if now.Sub(e.at) > tryTTL {
				delete(t.m, k)
			}
		}
	}
	e := &tryEntry{header: h, target: target, req: &tryRequest{}, at: now}
	t.m[id] = e
	t.size.Store(int32(len(t.m)))
	return e
}

// adopt registers the retry count of a request rebuilt from a capture, whose header map is h: its
// attempts go on counting from there. Its method and URL are taken when it reaches OnRequest (Colly
// normalizes the URL on the way).
func (t *tries) adopt(h http.Header, retries int, now time.Time) {
	t.follow(h, "", &tryRequest{retries: retries}, now)
}

// claim decides, in OnRequest, whether a request with header h may go. It returns false for a
// duplicate: a copy of an attempt the pacer retries itself, or of one deferred. A copy of an attempt
// the pacer gave up on is the user's retry: it goes, counted as one more attempt of that request.
func (t *tries) claim(r *colly.Request, now time.Time) bool {
	h := headerOf(r)
	if h == nil || t.size.Load() == 0 {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[headerID(h)]
	if ok && e.target == "" { // adopted: this is the rebuilt request
		e.target = target(r)
	}
	if !ok || e.target != target(r) {
		return true
	}
	e.left = true
	switch e.fate {
	case tryRetried, tryDeferred, tryCancelled:
		return false
	case tryFinal:
		e.req.retries++
		e.fate, e.at = trySent, now
	}
	return true
}

// decide records the pacer's decision on a refused attempt with header h, which its verdict says to
// retry: whether the pacer retries it (below the bound), and the retry's number. Once decided, a copy of h is a duplicate
// when the pacer retries, the user's retry when it does not.
func (t *tries) decide(r *colly.Request, maxRetries int, now time.Time) (*tryRequest, int, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(headerOf(r), target(r), now)
	e.at = now
	if e.fate != trySent { // decided already: another callback pass over the same response
		return e.req, e.req.retries, false
	}
	if e.req.retries >= maxRetries {
		e.fate = tryFinal
		return e.req, e.req.retries, false
	}
	e.req.retries++
	e.fate = tryRetried
	return e.req, e.req.retries, true
}

// follow registers the header map of the pacer's own copy of a retried attempt as the next attempt
// of the same request (target "": taken from the request that reaches OnRequest with it).
func (t *tries) follow(h http.Header, target string, req *tryRequest, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uintptr]*tryEntry)
	}
	t.m[headerID(h)] = &tryEntry{header: h, target: target, req: req, fate: trySent, at: now}
	t.size.Store(int32(len(t.m)))
}

// settle records the fate of an attempt that was not retried: deferred, cancelled, or sent for
// nothing (the retry could not be sent: a Retry of it is the user's).
func (t *tries) settle(r *colly.Request, fate tryFate, now time.Time) {
	h := headerOf(r)
	if h == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(h, target(r), now)
	e.fate, e.at = fate, now
}

// left reports whether the attempt with header h reached OnRequest.
func (t *tries) left(h http.Header) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[headerID(h)]
	return ok && e.left
}

// retriesOf returns the retry count of the request whose attempt has header h (0 when unknown).
func (t *tries) retriesOf(h http.Header) int {
	if h == nil || t.size.Load() == 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[headerID(h)]; ok {
		return e.req.retries
	}
	return 0
}

// forget drops an attempt that succeeded: nothing will copy it as a retry of a refusal.
func (t *tries) forget(h http.Header) {
	if h == nil || t.size.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, headerID(h))
	t.size.Store(int32(len(t.m)))
}

// headerOf is r's header map, nil when it has none.
func headerOf(r *colly.Request) http.Header {
	if r.Headers == nil {
		return nil
	}
	return *r.Headers
}

// onRequest drops, silently, a copy of an attempt that is already being retried or was deferred.
// It runs in OnRequest, where an Abort ends the request without OnError: a user's OnError that calls
// Retry on every failure cannot loop on the copies dropped here.
func (b *binding) onRequest(r *colly.Request) {
	p := b.p
	if p.tries.size.Load() == 0 {
		return // nothing refused, deferred or rebuilt: not a copy of anything (claim would say so, after a clock read)
	}
	now := p.now()
	if p.tries.claim(r, now) {
		return
	}
	if p.warn.first("retry_duplicate") {
		p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: p.cfg.hostKey(r.URL), event: audit.EventRetryDuplicate, trigger: audit.TriggerRefusal,
			url: r.URL, compliant: true,
			detail: "Retry was called for a refused request the pacer retries (or deferred) already: the copy is dropped before it leaves; " +
				"call Retry only when !pacer.Retrying(resp) && !pacer.Deferred(resp), or turn the pacer's retries off with WithMaxRetries(0)"})
	}
	r.Abort()
}

// retry sends a refused request again, tracked by c.Wait, unless its retries are spent; it departs
// once the host's window ends. observed is when the pacer read the refusal: retry_scheduled gives the
// hold from that instant, the number every event about the response carries (retry_after_honoured,
// retry_after_too_long).
func (b *binding) retry(resp *colly.Response, v Verdict, observed time.Time) {
	p := b.p
	r := resp.Request
	now := p.now()
	if r.Headers == nil {
		r.Headers = &http.Header{}
	}
	req, attempt, ok := p.tries.decide(r, p.cfg.maxRetries, now)
	h := p.host(p.cfg.hostKey(r.URL))
	ev := auditEvent{at: now, host: h.key, trigger: v.Trigger, base: h.policy.BaseDelay, compliant: true, status: resp.StatusCode, url: r.URL}
	if !ok {
		if attempt >= p.cfg.maxRetries {
			ev.event, ev.detail = audit.EventRetriesExhausted, fmt.Sprintf("gave up after %d retries", attempt)
			p.audit.emit(zerolog.WarnLevel, ev)
		}
		return
	}
	h.mu.Lock()
	h.retries++
	ev.computed = max(h.holdUntil.Sub(observed), 0)
	h.mu.Unlock()
	ev.event, ev.detail = audit.EventRetryScheduled, fmt.Sprintf("retry %d of %d", attempt, p.cfg.maxRetries)
	p.audit.emit(zerolog.InfoLevel, ev)
	p.retrying.mark(r, now)
	if q, ok := r.Ctx.GetAny(queueCtxKey).(*Queue); ok {
		q.requeue(r, attempt) // a queue's worker must not wait out the window: the queue holds the retry
		return
	}
	var own http.Header
	err := retryWithOwnHeaders(r, func(h http.Header) { own = h; p.tries.follow(h, target(r), req, now) })
	if err != nil && !p.tries.left(own) { // in sync mode, Retry returns the retry's own failure too
		p.retrying.unmark(r)
		p.tries.settle(r, tryFinal, now)
		ev.event, ev.detail = audit.EventRetriesExhausted, "retry not sent: "+err.Error()
		p.audit.emit(zerolog.WarnLevel, ev)
	}
}

// retryWithOwnHeaders sends r again with Request.Retry, giving the new request a copy of r's header
// map, registered with follow before it is sent: Colly's fetch writes to the map it is given
// (User-Agent), and an OnError callback after ours that calls Retry too reads r's map meanwhile.
func retryWithOwnHeaders(r *colly.Request, follow func(http.Header)) error {
	orig := r.Headers
	own := http.Header{}
	if orig != nil {
		own = orig.Clone()
	}
	follow(own)
	r.Headers = &own
	defer func() { r.Headers = orig }()
	return r.Retry()
}

// Retrying reports, inside an OnError callback, whether the pacer is retrying this refused request;
// the final failure of a request, when retries run out, reports false.
func (p *Pacer) Retrying(resp *colly.Response) bool {
	return p.retrying.marked(resp)
}

// responseMarks remembers responses whose request is being retried (or was deferred), for Retrying
// and Deferred. Marks expire after retryMarkTTL, long after the OnError callbacks that read them have run.
type responseMarks struct {
	mu sync.Mutex // protects m
	m  map[*colly.Request]time.Time
}

const retryMarkTTL = 10 * time.Minute

func (m *responseMarks) mark(r *colly.Request, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[*colly.Request]time.Time)
	}
	if len(m.m) >= 1024 {
		for r, at := range m.m {
			if now.Sub(at) > retryMarkTTL {
				delete(m.m, r)
			}
		}
	}
	m.m[r] = now
}

func (m *responseMarks) unmark(r *colly.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, r)
}

func (m *responseMarks) marked(resp *colly.Response) bool {
	if resp == nil || resp.Request == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.m[resp.Request]
	return ok
}
