package ext

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/hostkey"
	"github.com/collypace/ext/internal/robots"
	"github.com/collypace/ext/internal/shardmap"
)

// Pacer paces requests per host. It is safe for concurrent use; AdaptivePacing installs one on a
// collector, and the same Pacer can serve several collectors (Install) so they share each host's schedule.
type Pacer struct {
	cfg        config
	audit      auditLog
	now        func() time.Time
	hosts      shardmap.Map[*host]
	robots     robots.Cache
	rt         *transport // the pacing RoundTripper installed on collectors
	warn       warnOnce
	retrying   responseMarks
	tries      tries // each refused attempt's fate: tells a user's Retry from a duplicate (retry.go)
	deferred   responseMarks
	persist    *persistence // nil without a store
	deferStore Store        // where deferred and spilled requests go: the store, or memory
	fallback   *memoryStore // where they go when the store fails (never lose a URL)
	auditOut   *auditWriter // the watched audit writer (WithAuditWriter); nil without one

	hostsCreated atomic.Uint64 // paces idle-eviction sweeps
	hostSerial   atomic.Uint32 // the last host state's serial
	installed    sync.Map      // *colly.Collector → true: Install binds each collector once
	dispatched   sync.Map      // header map identity (uintptr) → *atomic.Bool: a Queue's request, true once departed
	dispatching  atomic.Int32  // entries in dispatched
}

// NewPacer builds a Pacer without installing it on a collector: for use with Install, or with
// Wait and Observe around any HTTP client. Invalid option values are replaced by the defaults and
// reported (see Option); NewPacerErr returns them as an error instead.
func NewPacer(opts ...Option) *Pacer {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.checkConsistency()
	p := &Pacer{
		cfg:   cfg,
		audit: auditLog{logger: cfg.logger, pipelineID: cfg.pipelineID, auditQuery: cfg.auditQuery},
		now:   time.Now,
	}
	p.watchAudit()
	p.hosts.Init()
	p.robots.Init()
	p.rt = &transport{p: p, inner: cfg.transport}
	p.rt.announced.index = byURL
	p.fallback = newMemoryStore()
	p.deferStore = cfg.store
	if p.deferStore == nil {
		p.deferStore = p.fallback
	}
	p.startPersistence()
	p.reportInvalidOptions()
	return p
}

// host returns the state of a host key, creating it (and restoring its stored state) on first use.
func (p *Pacer) host(key string) *host {
	return p.hostAt(key, p.now())
}

// hostAt is host with the time of use given.
func (p *Pacer) hostAt(key string, now time.Time) *host {
	h, found := p.hosts.Load(key)
	created := false
	if !found {
		key = strings.Clone(key) // kept with the host: not a part of a longer string (a URL's Host is)
		h, created = p.hosts.LoadOrCreate(key, func() *host {
			h := newHost(key, p.cfg.policyFor(key))
			h.serial = p.hostSerial.Add(1)
			h.lastUse.Store(now.UnixNano()) // before it is visible: a sweep must not take it for idle
			if p.persist != nil {
				h.ready = make(chan struct{}) // closed once its stored state is restored
			}
			return h
		})
	}
	if t := now.UnixNano(); t-h.lastUse.Load() >= int64(p.cfg.idleEviction>>lastUseCoarseness) {
		h.lastUse.Store(t) // not on every request: a write each time would pass the host's cache line between cores
	}
	if created {
		p.restore(h)
		p.maybeEvict(now)
	}
	select {
	case <-h.ready: // restored: a closed channel answers a select without taking its lock
	default:
		<-h.ready
	}
	return h
}

// lastUseCoarseness makes a host's last use exact to idleEviction/64 (28 s by default): idle eviction
// may come that much early.
const lastUseCoarseness = 6

// Wait blocks until a request to hostKey may depart: an in-flight slot is free and its departure slot
// has come. The returned release function must be called when the response is done. hostKey is what the
// pacer's host key function returns for the request's URL (DefaultHostKey(u) by default); this method,
// AdmitAt, ReserveAt and HostAt normalize it as DefaultHostKey does a host (case, trailing dot, punycode),
// but take its port as given: "example.com", not "example.com:443", for https://example.com/.
// While the host is parked by its breaker, Wait returns ErrBreakerOpen at once.
func (p *Pacer) Wait(ctx context.Context, hostKey string) (Reservation, func(), error) {
	now := p.now()
	f, err := p.depart(ctx, p.hostAt(hostkey.Normalize(hostKey), now), nil, now, false, false)
	if err != nil {
		return Reservation{}, nil, err
	}
	return f.res, func() { f.finish(p, p.now()) }, nil
}

// HostSnapshot is a snapshot of one host's pacing state.
type HostSnapshot struct {
	Host              string
	Interval          time.Duration // current interval before jitter: max(base, Crawl-delay, rate limit, adaptive)
	Trigger           audit.Trigger // what sets it: base, crawl_delay, rate_limit, adaptive, or retry_after/rate_limit while held
	BaseDelay         time.Duration
	AdaptiveDelay     time.Duration
	Noise             audit.NoiseVerdict // whether the host's refusals were found not to depend on the pace
	CrawlDelay        time.Duration
	RateLimitInterval time.Duration
	NextDeparture     time.Time
	RetryAfterUntil   time.Time // end of the current hold (Retry-After or exhausted rate limit), zero when none
	InFlight          int
	Breaker           audit.BreakerState
	Departures        int64
	Refusals          int64
	Retries           int64
}

// Host returns the state of one host at the current time.
func (p *Pacer) Host(hostKey string) (HostSnapshot, bool) {
	return p.HostAt(hostKey, p.now())
}

// HostAt returns the state of one host at now.
func (p *Pacer) HostAt(hostKey string, now time.Time) (HostSnapshot, bool) {
	h, ok := p.hosts.Load(hostkey.Normalize(hostKey))
	if !ok {
		return HostSnapshot{}, false
	}
	return h.statusAt(now), true
}

// Hosts returns the state of every host seen so far, sorted by host.
func (p *Pacer) Hosts() []HostSnapshot {
	now := p.now()
	var out []HostSnapshot
	p.hosts.Range(func(h *host) { out = append(out, h.statusAt(now)) })
	slices.SortFunc(out, func(a, b HostSnapshot) int { return strings.Compare(a.Host, b.Host) })
	return out
}

func (h *host) statusAt(now time.Time) HostSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	iv, why := h.intervalLocked(now)
	s := HostSnapshot{
		Host:          h.key,
		Interval:      iv,
		Trigger:       why,
		BaseDelay:     h.policy.BaseDelay,
		AdaptiveDelay: h.delay.Delay(),
		Noise:         h.delay.Verdict(),
		CrawlDelay:    h.crawlDelay,
		NextDeparture: h.nextLocked(now),
		InFlight:      int(h.inFlight),
		Breaker:       h.brk.State(),
		Departures:    h.departures,
		Refusals:      int64(h.refusals),
		Retries:       int64(h.retries),
	}
	if now.Before(h.rate.Until) {
		s.RateLimitInterval = h.rate.Interval
	}
	if now.Before(h.holdUntil) {
		s.RetryAfterUntil, s.Trigger = h.holdUntil, h.holdTrigger
	}
	if s.NextDeparture.Before(now) {
		s.NextDeparture = now
	}
	return s
}

// warnOnce remembers which one-time warnings were emitted.
type warnOnce struct {
	mu   sync.Mutex // protects seen
	seen map[string]bool
}

// first reports whether key is seen for the first time.
func (w *warnOnce) first(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[key] {
		return false
	}
	if w.seen == nil {
		w.seen = make(map[string]bool)
	}
	w.seen[key] = true
	return true
}
