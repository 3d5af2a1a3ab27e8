package ext

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/gocolly/colly/v2"
	"github.com/rs/zerolog"
)

// parked reports whether h's breaker is open and cooling down (or parked until a later time) at now.
func (h *host) parked(now time.Time, b BreakerPolicy) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.parkedLocked(now, b)
}

// parkedLocked reports whether h's breaker is open and cooling down (or parked until a later time) at
// now: its requests are deferred without waiting (waitDeparture returns ErrBreakerOpen itself).
func (h *host) parkedLocked(now time.Time, b BreakerPolicy) bool {
	return h.brk.State() == audit.BreakerOpen && now.Before(h.brk.ReopensAt(b.Cooldown))
}

// deferRequest stores r, with what is needed to send it again, instead of sending it, and aborts it.
// Colly then calls OnError with ErrAbortedBeforeRequest; Pacer.Deferred tells it apart.
func (b *binding) deferRequest(r *colly.Request, h *host, cause error) {
	p := b.p
	now := p.now()
	d, err := captureRequest(r, h.key, false) // not sent yet: its body is whole
	if err != nil {
		d.Body, d.BodyLost = nil, true
	}
	d.DeferredAt, d.Reason = now, cause.Error()
	if n := p.tries.retriesOf(headerOf(r)); n > 0 {
		d.Ctx[retriesCtxKey] = strconv.Itoa(n) // its retries so far count when it is sent again
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	id, err := p.deferStore.AddDeferred(ctx, p.storable(d))
	if err != nil && p.deferStore != Store(p.fallback) {
		// Never lose a URL: keep it in memory and say so.
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: h.key, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore,
			compliant: true, detail: "deferring to memory: " + err.Error()})
		id, err = p.fallback.AddDeferred(ctx, d) // memory: nothing leaves the process
	}
	detail := fmt.Sprintf("deferred %s %s (id %d): %v", d.Method, p.auditRawURL(d.URL), id, cause)
	if d.BodyLost {
		detail += "; its body could not be re-read and is not kept"
	}
	if err != nil {
		detail = "deferral failed: " + err.Error()
	}
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: audit.EventRequestDeferred, trigger: audit.TriggerBreaker, url: r.URL,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
	p.deferred.mark(r, now)
	p.tries.settle(r, tryDeferred, now) // a user's Retry of it would send it twice
	r.Abort()
}

// Deferred reports, inside an OnError callback, whether the request was deferred (its host's breaker
// is open) rather than failed: Drain sends it again later. It also reports true for a request of a
// fleet's Queue not sent because its lease of the host no longer held (an error wrapping
// ErrLeaseLost): the frontier hands it to the host's next holder.
func (p *Pacer) Deferred(resp *colly.Response) bool {
	return p.deferred.marked(resp)
}

// DeferredRequests returns the requests deferred so far, oldest first; host "" means every host.
// With a store that holds rows it cannot decode, it returns the others with the error.
func (p *Pacer) DeferredRequests(ctx context.Context, host string) ([]DeferredRequest, error) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	out, err := listDeferred(ctx, p.deferStore, host)
	if p.deferStore != Store(p.fallback) {
		more, _ := listDeferred(ctx, p.fallback, host)
		out = append(out, more...)
	}
	return out, err
}

// listDeferred returns the requests a breaker deferred in q. A store returns the rows it could decode
// with ErrCorruptState for the others: they are not lost for that.
func listDeferred(ctx context.Context, q Store, host string) ([]DeferredRequest, error) {
	all, err := q.ListDeferred(ctx, host, 0)
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return nil, err
	}
	return all, err
}

// takeDeferred removes and returns the requests the breaker deferred for host in the pacer's store
// (those it could decode), for a Queue taking its parked host's requests back. The take is atomic:
// two Queues on one shared store never both take a request.
func (p *Pacer) takeDeferred(host string) ([]DeferredRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	got, err := p.deferStore.TakeDeferred(ctx, host, 0)
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return nil, err
	}
	return got, err
}

// Drain hands deferred requests back to c (for a later, low-priority pass) and removes them from the
// store: every host's, or only those of the given hosts. Each store call ends within 2 s, or when ctx
// does. Each request is taken from the store
// atomically before it is sent, so processes draining one shared store at once send each request
// once. Requests of a host still parked, and those that cannot be sent, are stored again (with new
// IDs, after the others). A drained request bypasses Colly's revisit check (its URL was marked
// visited when first requested) and is tracked by c.Wait. It returns how many were handed back.
func (p *Pacer) Drain(ctx context.Context, c *colly.Collector, hosts ...string) (int, error) {
	if len(hosts) == 0 {
		hosts = []string{""}
	}
	now := p.now()
	drained := 0
	queues := []Store{p.deferStore}
	if p.deferStore != Store(p.fallback) {
		queues = append(queues, p.fallback)
	}
	for _, q := range queues {
		for _, host := range hosts {
			tctx, cancel := context.WithTimeout(ctx, storeTimeout)
			reqs, err := q.TakeDeferred(tctx, host, 0)
			cancel()
			if errors.Is(err, ErrCorruptState) {
				p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: host, event: audit.EventStateCorrupt, trigger: audit.TriggerStore,
					compliant: true, detail: "deferred requests that cannot be decoded are left in the store: " + err.Error()})
			} else if err != nil {
				return drained, fmt.Errorf("ext: taking deferred requests: %w", err)
			}
			var keep []DeferredRequest
			sent := 0
			for _, d := range reqs {
				if p.host(d.Host).parked(now, p.cfg.breaker) {
					keep = append(keep, d)
					continue
				}
				if err := p.resend(c, d); err != nil {
					p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: d.Host, event: audit.EventDeferredDrained, trigger: audit.TriggerBreaker,
						compliant: true, detail: fmt.Sprintf("could not resend %s: %v (kept)", p.auditRawURL(d.URL), err)})
					keep = append(keep, d)
					continue
				}
				sent++
			}
			pctx, cancel := context.WithTimeout(ctx, storeTimeout)
			err = p.putBackDeferred(pctx, q, keep)
			cancel()
			if err != nil {
				return drained + sent, fmt.Errorf("ext: storing back the requests not drained: %w", err)
			}
			if sent > 0 {
				drained += sent
				p.audit.emit(zerolog.InfoLevel, auditEvent{at: now, host: host, event: audit.EventDeferredDrained, trigger: audit.TriggerBreaker,
					compliant: true, detail: fmt.Sprintf("%d deferred requests handed back", sent)})
			}
		}
	}
	return drained, nil
}

// putBackDeferred stores again the taken requests Drain did not send, in q or, when q fails, in
// memory: a URL is never lost.
func (p *Pacer) putBackDeferred(ctx context.Context, q Store, reqs []DeferredRequest) error {
	var firstErr error
	for _, d := range reqs {
		if _, err := q.AddDeferred(ctx, d); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			_, _ = p.fallback.AddDeferred(ctx, d) // memory: nothing leaves the process
		}
	}
	return firstErr
}

// credentialHeaders are the request headers a store does not keep unless WithStoredCredentials(true).
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// storable returns d as it is written to the store set with WithStore: without its credentials
// (credentialHeaders and the URL's userinfo) unless WithStoredCredentials(true). Without a store, or in
// memory, requests are kept whole. d itself is not changed.
func (p *Pacer) storable(d DeferredRequest) DeferredRequest {
	if p.cfg.store == nil || p.cfg.storeCredentials {
		return d
	}
	d.Header = d.Header.Clone()
	for _, k := range credentialHeaders {
		d.Header.Del(k)
	}
	if u, err := url.Parse(d.URL); err == nil && u.User != nil {
		u.User = nil
		d.URL = u.String()
	}
	return d
}

// errBodyGone is returned by captureRequest for a sent request whose body cannot seek: it was read
// to the end on its way out, and a copy without it would be a different request.
var errBodyGone = errors.New("ext: the request body was sent and cannot be read again (not an io.ReadSeeker)")

// captureRequest returns what is needed to send r again, for key's host: its method, URL, depth,
// headers, body and the string values of its context. It is the one capture of a request, for
// deferral and for the Queue (queueing and requeueing a refused request). A body that can seek is
// read from its start and put back where it was, so the capture holds all of it even after r was
// sent; one that cannot seek is read as it is, unless r was sent (then it is gone: errBodyGone).
func captureRequest(r *colly.Request, key string, sent bool) (DeferredRequest, error) {
	d := DeferredRequest{Host: key, Method: r.Method, URL: r.URL.String(), Depth: r.Depth,
		Header: http.Header{}, Ctx: stringValues(r.Ctx)}
	if d.Ctx == nil {
		d.Ctx = map[string]string{}
	}
	if r.Headers != nil {
		d.Header = r.Headers.Clone()
	}
	if r.Body == nil {
		return d, nil
	}
	s, ok := r.Body.(io.ReadSeeker)
	if !ok {
		if sent {
			return d, errBodyGone
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return d, fmt.Errorf("ext: reading the request body: %w", err)
		}
		d.Body = body
		return d, nil
	}
	pos, err := s.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = s.Seek(0, io.SeekStart)
	}
	if err != nil {
		return d, fmt.Errorf("ext: rewinding the request body: %w", err)
	}
	body, err := io.ReadAll(s)
	_, _ = s.Seek(pos, io.SeekStart)
	if err != nil {
		return d, fmt.Errorf("ext: reading the request body: %w", err)
	}
	d.Body = body
	return d, nil
}

// resend issues a deferred request on c, bypassing the revisit check (Request.Retry).
func (p *Pacer) resend(c *colly.Collector, d DeferredRequest) error {
	r, err := p.buildRequest(c, d)
	if err != nil {
		return err
	}
	return r.Retry()
}

// buildRequest makes a Colly request of d through Colly's own serialized form, so its depth, headers,
// body and context come back. Its Headers map is never nil: it is the map its OnRequestHeaders sees.
// The retry count d carries is registered for that map, not put in the request's Context.
func (p *Pacer) buildRequest(c *colly.Collector, d DeferredRequest) (*colly.Request, error) {
	retries := -1
	ctx := make(map[string]any, len(d.Ctx))
	for k, v := range d.Ctx {
		if k == retriesCtxKey {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				retries = n
			}
			continue
		}
		ctx[k] = v
	}
	if d.Header == nil {
		d.Header = http.Header{}
	}
	raw, err := json.Marshal(map[string]any{"URL": d.URL, "Method": d.Method, "Depth": d.Depth, "Body": d.Body, "Ctx": ctx, "Headers": d.Header})
	if err != nil {
		return nil, err
	}
	r, err := c.UnmarshalRequest(raw)
	if err == nil && retries >= 0 && r.Headers != nil {
		p.tries.adopt(*r.Headers, retries, p.now())
	}
	return r, err
}

// stringValues returns the string values of a colly.Context.
func stringValues(ctx *colly.Context) map[string]string {
	if ctx == nil {
		return nil
	}
	out := map[string]string{}
	ctx.ForEach(func(k string, v any) any {
		if s, ok := v.(string); ok {
			out[k] = s
		}
		return nil
	})
	return out
}
