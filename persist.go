package ext

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// defaultFlushInterval is how often changed host state is written behind to a durable store.
const defaultFlushInterval = time.Second

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

	// The pacer's session on a sessionStore (nil session: none). restartAt is when it began, when the
	// session before it ended without Close: every host counts a departure then (restartDeparture).
	session   sessionStore
	sessionID string
	restartAt time.Time

	// keyTTL is how long the shared store keeps a host's state after its last write (0: for ever), as
	// the store says (its HostTTL method): an unchanged state is written again before half of it.
	keyTTL time.Duration
	// atAdmission is the shared store's cheaper end of a departure that reached the wire at its
	// admission (nil: the store has none, Departed does it).
	atAdmission wireAtAdmissionStore

	health storeHealth
}

// startPersistence starts the write-behind loop when a durable store is configured, after beginning
// the pacer's session on a store that keeps them.
func (p *Pacer) startPersistence() {
	if p.cfg.store == nil {
		return
	}
	p.persist = &persistence{store: p.cfg.store, stop: make(chan struct{}), stopped: make(chan struct{})}
	if s, ok := p.cfg.store.(SharedStore); ok {
		p.persist.shared = s
		if t, ok := s.(interface{ HostTTL() time.Duration }); ok { // redisstore.WithTTL
			p.persist.keyTTL = max(t.HostTTL(), 0)
		}
		p.persist.atAdmission, _ = s.(wireAtAdmissionStore)
	} else if s, ok := p.cfg.store.(sessionStore); ok {
		p.beginSession(s)
	}
	go p.flushLoop()
}

// beginSession records the pacer's session on s. When the session before it ended without Close (its
// process was killed, or crashed), the departures it made in its last flush interval were never
// written: this pacer's start counts as a departure to every host (restartDeparture), so that none is
// sent to within its interval of one the dead process may have sent. A store that cannot say is
// taken to say so.
func (p *Pacer) beginSession(s sessionStore) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id, now := hex.EncodeToString(b[:]), p.now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	unclean, err := s.BeginSession(ctx, id, now)
	cancel()
	p.persist.session, p.persist.sessionID = s, id
	detail := "the pacer before this one on the store ended without Close (killed or crashed): the departures of its last " +
		p.cfg.flushInterval.String() + " may not be stored, so every host is held its interval from this start"
	if err != nil {
		p.storeFailed("", "write", err, now)
		unclean, detail = true, "the store's record of the pacers before this one could not be read ("+err.Error()+"): every host is held its interval from this start"
	}
	if !unclean {
		return
	}
	p.persist.restartAt = now
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, event: audit.EventRestartHeld, trigger: audit.TriggerStore, compliant: true, detail: detail})
}

// restartDeparture counts the pacer's start as a departure to h, restored from the store (or new to
// it), when the session before this one ended without Close: h departs no sooner than its interval
// after the start, unless the store holds a later departure. One interval a host, once, after a crash.
func (p *Pacer) restartDeparture(h *host) {
	if p.persist.restartAt.IsZero() {
		return
	}
	h.mu.Lock()
	h.lastDeparture = later(h.lastDeparture, p.persist.restartAt)
	h.mu.Unlock()
}

func (p *Pacer) flushLoop() {
	defer close(p.persist.stopped)
	t := time.NewTicker(p.cfg.flushInterval)
	defer t.Stop()
	var lost <-chan time.Time // a shared store is checked for a loss of its state
	if p.persist.shared != nil {
		lt := time.NewTicker(lostCheckInterval)
		defer lt.Stop()
		lost = lt.C
	}
	for {
		select {
		case <-lost:
			p.checkLost()
		case <-t.C:
			p.flush()
			p.touchSession()
		case <-p.persist.stop:
			p.persist.closeErr = p.flush()
			if p.persist.closeErr == nil {
				p.endSession() // every state written: the next pacer need not hold anything
			}
			return
		}
	}
}

// Close writes the state not yet written behind and stops the write-behind loop. It returns the error
// of that final write (the state it could not write is lost), and the same error if called again. It
// does not close the store, which belongs to the caller. Without a store it writes nothing. It also
// returns the failure of the audit writer, if any write failed (see WithAuditWriter).
func (p *Pacer) Close() error {
	auditErr := p.auditOut.failure()
	if p.persist == nil {
		return auditErr
	}
	p.persist.once.Do(func() { close(p.persist.stop) })
	<-p.persist.stopped
	if err := p.persist.closeErr; err != nil {
		return errors.Join(fmt.Errorf("ext: close: writing the pending state: %w", err), auditErr)
	}
	return auditErr
}

// touchSession records, on a sessionStore, that the pacer's session still runs.
func (p *Pacer) touchSession() {
	if p.persist.session == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = p.persist.session.TouchSession(ctx, p.persist.sessionID, p.now()) // a failing store is audited by the flush
}

// endSession removes the pacer's session from a sessionStore, once its last state is written.
func (p *Pacer) endSession() {
	if p.persist.session == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := p.persist.session.EndSession(ctx, p.persist.sessionID); err != nil {
		p.persist.closeErr = fmt.Errorf("ending its session (the next pacer holds every host its interval): %w", err)
	}
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

// flush writes every changed host in one batch, and returns the store's error. On a shared store it
// leaves out a host whose state is the one last written but for the next departure and the write's
// instant (unchangedLocked): the store's admission records every departure itself.
func (p *Pacer) flush() error {
	p.persist.mu.Lock()
	hosts := p.persist.dirty
	p.persist.dirty = nil
	p.persist.mu.Unlock()
	if len(hosts) == 0 {
		return nil
	}
	var w hostWrite
	now := p.now()
	for _, h := range hosts {
		h.dirty.Store(false)
		h.mu.Lock()
		st := h.snapshotLocked(now)
		if p.persist.shared != nil && h.unchangedLocked(st, now, p.persist.keyTTL) {
			h.mu.Unlock()
			continue
		}
		w.addLocked(h, st)
		h.mu.Unlock()
	}
	if len(w.states) == 0 {
		return nil
	}
	return p.writeHosts(&w, now)
}

// savedState is a host's state as last written to a shared store, and when: a flush need not write
// the same state again (unchangedLocked). It is known only after a write that no other write of the
// host's state overlapped (hostWrite): two writes on their way at once may reach the store in either
// order.
type savedState struct {
	st StoredHost
	at time.Time // when the write began, by the pacer's clock
}

// unchangedLocked reports whether st, h's state at now, is the one last written to the shared store but
// for what the store records itself: the next departure (it follows from the last departure, which the
// store's admission records) and the instant of the write. A store whose keys expire (keyTTL, from
// redisstore.WithTTL) is written again once half of it has passed since that write, so that a key never
// expires while its state is taken as held.
func (h *host) unchangedLocked(st StoredHost, now time.Time, keyTTL time.Duration) bool {
	s := h.saved
	if s == nil || keyTTL > 0 && now.Sub(s.at) >= keyTTL/2 {
		return false
	}
	return sameStoredState(s.st, st)
}

// sameStoredState reports whether a and b are the same state but for their next departure and their
// UpdatedAt. Every other field counts, a new one too; times compare as written (monotonic readings
// aside), so that two instants told apart only by their location count as a change (written again).
func sameStoredState(a, b StoredHost) bool {
	for _, s := range []*StoredHost{&a, &b} {
		s.NextDeparture, s.UpdatedAt = time.Time{}, time.Time{}
		s.HoldUntil, s.BreakerChanged = s.HoldUntil.Round(0), s.BreakerChanged.Round(0)
		s.ParkUntil, s.RateUntil = s.ParkUntil.Round(0), s.RateUntil.Round(0)
	}
	return a == b
}

// hostWrite is one write of host states, and what it learns of each host: every write of a host's
// state moves the host's saveGen when it begins and when it ends, so that a write whose host's saveGen
// did not move meanwhile knows the store holds its state (savedState); any other write forgets it.
type hostWrite struct {
	hosts  []*host // hosts[i] is states[i]'s (nil: not in the pacer's table)
	states []StoredHost
	gens   []uint32 // each host's saveGen once this write began
	record bool     // the flush's or persistNow's: the state held is recorded
}

// addLocked adds h's state st to the write, with h.mu held.
func (w *hostWrite) addLocked(h *host, st StoredHost) {
	h.saveGen++
	w.hosts, w.states, w.gens = append(w.hosts, h), append(w.states, st), append(w.gens, h.saveGen)
	w.record = true
}

// writeHosts writes w, and records what the store then holds of each host (savedState), or forgets it.
// On failure, each host is written again at the next flush.
func (p *Pacer) writeHosts(w *hostWrite, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	err := p.persist.store.SaveHosts(ctx, w.states)
	cancel()
	for i, h := range w.hosts {
		if h == nil { // not in the pacer's table (evicted)
			continue
		}
		h.mu.Lock()
		h.saved = nil
		if err == nil && w.record && p.persist.shared != nil && h.saveGen == w.gens[i] {
			h.saved = &savedState{st: w.states[i], at: now}
		}
		h.saveGen++
		h.mu.Unlock()
	}
	if err != nil {
		p.storeFailed(w.states[0].Host, "write", err, now)
		for _, h := range w.hosts { // written again at the next flush
			if h != nil {
				h.markDirty(p)
			}
		}
		return err
	}
	p.storeRecovered(w.states[0].Host, now)
	return nil
}

// persistNow writes h's state through, before its next departure: for what stops other processes
// (stopMark) and breaker transitions.
func (p *Pacer) persistNow(h *host) {
	if p.persist == nil {
		return
	}
	now := p.now()
	var w hostWrite
	h.mu.Lock()
	w.addLocked(h, h.snapshotLocked(now))
	h.mu.Unlock()
	p.writeHosts(&w, now)
}

// save writes states outside the flush and persistNow: written back, or repaired. What the store
// holds of each host is forgotten.
func (p *Pacer) save(states []StoredHost, now time.Time) error {
	w := hostWrite{states: states, hosts: make([]*host, len(states)), gens: make([]uint32, len(states))}
	for i, st := range states {
		if h, ok := p.hosts.Load(st.Host); ok {
			h.mu.Lock()
			h.saveGen++
			h.mu.Unlock()
			w.hosts[i] = h
		}
	}
	return p.writeHosts(&w, now)
}

// stopMark is what of a host's state stops other processes' departures: its hold, the adaptive delay
// and the rate-limit interval. A change that raises one is written through (persistNow), before the
// response's callbacks return, so that no other process departs on the old value.
type stopMark struct {
	holdUntil, parkUntil time.Time
	delay, rate          time.Duration
}

func (h *host) stopMarkLocked(now time.Time) stopMark {
	m := stopMark{holdUntil: h.holdUntil, parkUntil: h.brk.ParkEnd(), delay: h.delay.Delay()}
	if now.Before(h.rate.Until) {
		m.rate = h.rate.Interval
	}
	return m
}

// stopsMore reports whether m stops departures longer than before.
func (m stopMark) stopsMore(before stopMark) bool {
	return m.holdUntil.After(before.holdUntil) || m.parkUntil.After(before.parkUntil) || m.delay > before.delay || m.rate > before.rate
}

// snapshot returns what a store keeps of h.
func (h *host) snapshot(now time.Time) StoredHost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snapshotLocked(now)
}

// snapshotLocked is snapshot, with h.mu held.
func (h *host) snapshotLocked(now time.Time) StoredHost {
	hold, trigger := h.storedHoldLocked()
	next := hold // zero when the host never departed and is not held
	if !h.lastDeparture.IsZero() {
		iv, _ := h.intervalLocked(now)
		next = later(h.lastDeparture.Add(iv), hold)
	}
	return StoredHost{
		Host: h.key, Version: StateVersion,
		AdaptiveDelay: h.delay.Delay(), KnownLimit: h.delay.Good(), RefusedInterval: h.delay.Bad(), ModelVersion: h.delay.Version(),
		Noise:         h.delay.Verdict(),
		NextDeparture: next, HoldUntil: hold, HoldTrigger: trigger,
		CrawlDelay: h.crawlDelay, CrawlClamped: h.crawlClamped,
		Breaker: h.brk.State(), BreakerChanged: h.brk.Changed(), Failures: h.brk.Failures(),
		ParkUntil: h.brk.ParkEnd(), RateInterval: h.rate.Interval, RateUntil: h.rate.Until,
		UpdatedAt: now,
	}
}

// storedHoldLocked is the hold a store keeps of h: none for an unreachable host's, which is this
// process's own (nothing was learned of the host: a restart asks it again at once). The next departure
// stored beside it counts from the last admission, not from the wait for a departure's wire instant
// (up to maxWireWait), which dies with the process too.
func (h *host) storedHoldLocked() (time.Time, audit.Trigger) {
	if h.holdTrigger == audit.TriggerUnreachable {
		return time.Time{}, ""
	}
	return h.holdUntil, h.holdTrigger
}

// restoredHoldEvents names a hold restored from the store by its cause.
var restoredHoldEvents = map[audit.Trigger]audit.Event{
	audit.TriggerRetryAfter: audit.EventRetryAfterHonoured,
	audit.TriggerRateLimit:  audit.EventRateLimitApplied,
	audit.TriggerRobots:     audit.EventRobotsUnavailable,
}

// restore loads h's stored state, repairs what cannot be trusted, and applies it. It runs once, before
// anyone uses h.
func (p *Pacer) restore(h *host) {
	if p.persist == nil {
		return
	}
	defer close(h.ready)
	defer p.restartDeparture(h) // whatever the store says of h, before anyone uses it
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
	h.delay.Restore(st.AdaptiveDelay, st.KnownLimit, st.RefusedInterval, st.ModelVersion)
	noiseAdopted := h.delay.AdoptVerdict(st.Noise, h.policy.BaseDelay, h.policy.MaxDelay)
	h.holdUntil, h.holdTrigger = st.HoldUntil, st.HoldTrigger
	h.crawlDelay, h.crawlClamped = st.CrawlDelay, st.CrawlClamped
	var noiseEv auditEvent
	if noiseAdopted {
		noiseEv = h.adoptedNoiseEventLocked(st.Noise, "restored from the store", now)
	}
	iv, _ := h.intervalLocked(now)
	if st.NextDeparture.After(st.HoldUntil) { // else it is the hold's end (snapshot): the first departure is at it
		h.lastDeparture = st.NextDeparture.Add(-iv)
	}
	h.brk.Restore(st.Breaker, st.BreakerChanged, st.Failures, st.ParkUntil) // a half-open breaker's probe died with the process: it probes again
	if now.Before(st.RateUntil) && st.RateInterval > h.rate.Interval {
		h.rate.Interval, h.rate.Until = st.RateInterval, st.RateUntil
	}
	h.mu.Unlock()
	if len(fixes) > 0 { // overwrite what could not be trusted, so the next restart does not find it again
		fixed := h.snapshot(now)
		fixed.Replace = true
		p.save([]StoredHost{fixed}, now)
	}
	if noiseAdopted {
		p.audit.emit(zerolog.InfoLevel, noiseEv)
	}
	if now.Before(st.HoldUntil) {
		p.audit.emit(zerolog.InfoLevel, auditEvent{at: now, host: h.key, event: restoredHoldEvents[st.HoldTrigger], trigger: st.HoldTrigger,
			base: h.policy.BaseDelay, computed: st.HoldUntil.Sub(now), compliant: true,
			detail: fmt.Sprintf("%s hold restored from the store", st.HoldTrigger), windowStart: now, windowEnd: st.HoldUntil})
	}
}

func (p *Pacer) auditState(h *host, event audit.Event, detail string, now time.Time) {
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, host: h.key, event: event, trigger: audit.TriggerStore,
		base: h.policy.BaseDelay, compliant: true, detail: detail})
}
