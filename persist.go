package ext

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// defaultFlushInterval is how often changed host state is written behind to a durable store.
const defaultFlushInterval = time.Second

// storeRetryDelay is how long the pacer paces locally after a shared store failed before trying it again.
const storeRetryDelay = 5 * time.Second

// storeTimeout bounds one store call made on the departure path.
const storeTimeout = 2 * time.Second

// persistence writes host state to a durable store: behind, in batches, for what losing the last
// second of is harmless (the adaptive delay, the next departure), and through, before the next
// departure, for holds and breaker transitions.
type persistence struct {
	store  Store
	shared SharedStore // non-nil when the store books departures for a fleet

	mu    sync.Mutex // protects dirty
	dirty []*host

	stop     chan struct{}
	stopped  chan struct{}
	once     sync.Once
	closeErr error // the final flush's, written before stopped is closed

	sharedDownUntil atomic.Int64 // unix nanos: pace locally until then
	sharedDown      atomic.Bool
}

// startPersistence starts the write-behind loop when a durable store is configured.
func (p *Pacer) startPersistence() {
	if p.cfg.store == nil {
		return
	}
	p.persist = &persistence{store: p.cfg.store, stop: make(chan struct{}), stopped: make(chan struct{})}
	if s, ok := p.cfg.store.(SharedStore); ok {
		p.persist.shared = s
	}
	go p.flushLoop()
}

func (p *Pacer) flushLoop() {
	defer close(p.persist.stopped)
	t := time.NewTicker(p.cfg.flushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.flush()
		case <-p.persist.stop:
			p.persist.closeErr = p.flush()
			return
		}
	}
}

// Close writes the state not yet written behind and stops the write-behind loop. It returns the error
// of that final write (the state it could not write is lost), and the same error if called again. It
// does not close the store, which belongs to the caller. Without a store it does nothing.
func (p *Pacer) Close() error {
	if p.persist == nil {
		return nil
	}
	p.persist.once.Do(func() { close(p.persist.stop) })
	<-p.persist.stopped
	if err := p.persist.closeErr; err != nil {
		return fmt.Errorf("ext: close: writing the pending state: %w", err)
	}
	return nil
}

// markDirty queues h for the next write-behind flush.
func (h *host) markDirty(p *Pacer) {
	if p.persist == nil || h.dirty.Swap(true) {
		return
	}
	p.persist.mu.Lock()
	p.persist.dirty = append(p.persist.dirty, h)
	p.persist.mu.Unlock()
}

// flush writes every changed host in one batch, and returns the store's error.
func (p *Pacer) flush() error {
	p.persist.mu.Lock()
	hosts := p.persist.dirty
	p.persist.dirty = nil
	p.persist.mu.Unlock()
	if len(hosts) == 0 {
		return nil
	}
	states := make([]StoredHost, len(hosts))
	now := p.now()
	for i, h := range hosts {
		h.dirty.Store(false)
		states[i] = h.snapshot(now)
	}
	return p.save(states, now)
}

// persistNow writes h's state through, before its next departure: for holds and breaker transitions.
func (p *Pacer) persistNow(h *host) {
	if p.persist == nil {
		return
	}
	now := p.now()
	p.save([]StoredHost{h.snapshot(now)}, now)
}

func (p *Pacer) save(states []StoredHost, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := p.persist.store.SaveHosts(ctx, states)
	if err != nil {
		p.storeFailed(states[0].Host, "write", err, now)
		for _, st := range states { // written again at the next flush
			if h, ok := p.hosts.Load(st.Host); ok {
				h.markDirty(p)
			}
		}
		return err
	}
	p.storeRecovered(states[0].Host, now)
	return nil
}

// snapshot returns what a store keeps of h.
func (h *host) snapshot(now time.Time) StoredHost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return StoredHost{
		Host: h.key, Version: StateVersion,
		AdaptiveDelay: h.delay.delay, KnownLimit: h.delay.limit,
		NextDeparture: h.nextLocked(now), HoldUntil: h.holdUntil, HoldTrigger: h.holdTrigger,
		CrawlDelay: h.crawlDelay, CrawlClamped: h.crawlClamped,
		Breaker: h.brk.state, BreakerChanged: h.brk.changed, Failures: h.brk.failures,
		UpdatedAt: now,
	}
}

// restore loads h's stored state, repairs what cannot be trusted, and applies it. It runs once, before
// anyone uses h.
func (p *Pacer) restore(h *host) {
	if p.persist == nil {
		return
	}
	defer close(h.ready)
	now := p.now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	st, ok, err := p.persist.store.LoadHost(ctx, h.key)
	switch {
	case errors.Is(err, ErrCorruptState):
		p.auditState(h, audit.EventStateCorrupt, err.Error(), now)
		return
	case err != nil:
		p.storeFailed(h.key, "read", err, now)
		return
	case !ok:
		return
	}
	st, fixes := st.repair(repairLimits{
		floor: h.policy.BaseDelay, ceiling: h.policy.MaxDelay,
		maxHold:       p.cfg.maxHold(),
		maxCrawlDelay: p.cfg.maxCrawlDelay,
	}, now)
	for _, f := range fixes {
		p.auditState(h, audit.EventStateRepaired, f, now)
	}
	h.mu.Lock()
	h.delay.delay, h.delay.limit = st.AdaptiveDelay, st.KnownLimit
	h.holdUntil, h.holdTrigger = st.HoldUntil, st.HoldTrigger
	h.crawlDelay, h.crawlClamped = st.CrawlDelay, st.CrawlClamped
	iv, _ := h.intervalLocked(now)
	if !st.NextDeparture.IsZero() {
		h.lastDeparture = st.NextDeparture.Add(-iv)
	}
	h.brk.state, h.brk.changed, h.brk.failures = st.Breaker, st.BreakerChanged, st.Failures
	if h.brk.state == BreakerHalfOpen { // the probe died with the process: probe again
		h.brk.state = BreakerOpen
	}
	h.mu.Unlock()
	if len(fixes) > 0 { // overwrite what could not be trusted, so the next restart does not find it again
		fixed := h.snapshot(now)
		fixed.Replace = true
		p.save([]StoredHost{fixed}, now)
	}
	if now.Before(st.HoldUntil) {
		p.audit.emit(zerolog.InfoLevel, auditEvent{at: now, host: h.key, event: audit.EventRetryAfterHonoured, trigger: st.HoldTrigger,
			base: h.policy.BaseDelay, computed: st.HoldUntil.Sub(now), compliant: true, detail: "restored from the store",
			windowStart: now, windowEnd: st.HoldUntil})
	}
}

// fleetActive reports whether departures are admitted by a shared store at now (it is configured and
// not down).
func (p *Pacer) fleetActive(now time.Time) bool {
	return p.persist != nil && p.persist.shared != nil && now.UnixNano() >= p.persist.sharedDownUntil.Load()
}

// fleetReaskJitter spreads the re-asks of processes told to wait until the same instant, to save round
// trips: each asks up to this much after the store's answer, never before.
const fleetReaskJitter = 2 * time.Millisecond

// fleetAdmit asks the shared store whether a departure to h, spaced by gap from the fleet's previous
// one, may go now (by the store's clock). Without a shared store, or while it is down, the local rule
// alone decides: ok. Otherwise it returns ok, or how long to wait before asking again.
func (p *Pacer) fleetAdmit(ctx context.Context, h *host, gap time.Duration, now time.Time) (time.Duration, bool) {
	if !p.fleetActive(now) {
		return 0, true
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	a, err := p.persist.shared.Admit(sctx, h.key, gap)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false // the wait ends on ctx: the caller sees it
		}
		p.storeFailed(h.key, "admit", err, now)
		return 0, true
	}
	p.storeRecovered(h.key, now)
	h.mu.Lock()
	h.delay.adopt(a.AdaptiveDelay, a.KnownLimit, h.policy.BaseDelay, h.policy.MaxDelay)
	h.mu.Unlock()
	if a.OK {
		return 0, true
	}
	return a.Wait + time.Duration(p.cfg.random()*float64(fleetReaskJitter)), false
}

// fleetWireSlack is how much later than its admission a fleet departure may reach the wire before the
// shared store is told: a request's headers are normally written within microseconds, and a second
// round trip per departure would double the store's load for nothing; a dial or a stall is told.
const fleetWireSlack = time.Millisecond

// fleetWired tells the shared store that a departure of h reached the wire at at, later than the store
// admitted it, so that no process departs within an interval of the wire instant. It runs in the
// background: the store's answer does not hold up the request.
func (p *Pacer) fleetWired(h *host, at time.Time) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		if err := p.persist.shared.Departed(ctx, h.key, p.now().Sub(at)); err != nil {
			p.storeFailed(h.key, "departed", err, p.now())
		}
	}()
}

// storeFailed paces locally for a while and raises an alert the first time.
func (p *Pacer) storeFailed(host, op string, err error, now time.Time) {
	p.persist.sharedDownUntil.Store(now.Add(storeRetryDelay).UnixNano())
	if p.persist.sharedDown.Swap(true) {
		return
	}
	detail := fmt.Sprintf("store %s failed: %v; pacing locally, retrying in %v", op, err, storeRetryDelay)
	p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: host, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore, compliant: true, detail: detail})
	p.alert(Alert{At: now, Host: host, Event: audit.EventStoreUnavailable, Detail: detail})
}

// storeRecovered notes that the store answers again.
func (p *Pacer) storeRecovered(host string, now time.Time) {
	if !p.persist.sharedDown.Swap(false) {
		return
	}
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: host, event: audit.EventStoreRecovered, trigger: audit.TriggerStore, compliant: true,
		detail: "store answers again: sharing resumed"})
}

func (p *Pacer) auditState(h *host, event audit.Event, detail string, now time.Time) {
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: event, trigger: audit.TriggerStore,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
}
