package ext

import (
	"context"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/shardmap"
)

// defaultIdleEviction is how long a host goes unused before its state leaves memory.
const defaultIdleEviction = 30 * time.Minute

// evictEvery is how many new hosts make one eviction sweep of one shard: crawls of many hosts
// sweep as they grow, and a crawl of a few hosts never pays for it.
const evictEvery = 64

// WithIdleEviction sets how long a host goes unused (no request waiting or in flight, no hold, breaker
// closed) before its state leaves memory (default 30 min; ≤ 0 keeps every host). With a store, the
// state is written first and restored on the host's next use; without one, the host starts afresh,
// except for its Crawl-delay (and clamp): the robots cache still knows them, for the last 1024 hosts
// evicted, and applies them again before its next request departs (robots.txt itself is read again on
// its own TTL); a host evicted longer ago reads robots.txt again. So memory stays bounded however many
// hosts a crawl sees.
func WithIdleEviction(d time.Duration) Option {
	return func(c *config) { c.idleEviction = d }
}

// maybeEvict sweeps one shard for idle hosts every evictEvery new hosts.
func (p *Pacer) maybeEvict(now time.Time) {
	if p.cfg.idleEviction <= 0 {
		return
	}
	n := p.hostsCreated.Add(1)
	if n%evictEvery != 0 {
		return
	}
	p.evictShard(int(n/evictEvery), now)
}

// evictIdleAt removes from memory every host idle at now (see WithIdleEviction), writing its state to
// the store first. It returns how many hosts were evicted.
func (p *Pacer) evictIdleAt(now time.Time) int {
	n := 0
	for i := range shardmap.Shards {
		n += p.evictShard(i, now)
	}
	return n
}

func (p *Pacer) evictShard(shard int, now time.Time) int {
	var idle []*host
	p.hosts.RangeShard(shard, func(h *host) {
		if h.idleAt(now, p.cfg.idleEviction) {
			idle = append(idle, h)
		}
	})
	if len(idle) == 0 {
		return 0
	}
	if p.persist != nil { // write before forgetting, so the next use restores it
		states := make([]StoredHost, len(idle))
		for i, h := range idle {
			states[i] = h.snapshot(now)
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		err := p.persist.store.SaveHosts(ctx, states)
		cancel()
		if err != nil {
			p.storeFailed(idle[0].key, "write", err, now)
			return 0
		}
	}
	var evicted []string
	stillIdle := func(h *host) bool { return h.idleAt(now, p.cfg.idleEviction) }
	for _, h := range idle {
		if p.hosts.DeleteIf(h.key, h, stillIdle) {
			evicted = append(evicted, h.key)
		}
	}
	p.robots.HostsEvicted(evicted, now, p.cfg.robotsTTL, func(key string) bool {
		_, back := p.hosts.Load(key)
		return back
	})
	return len(evicted)
}

// idleAt reports whether h can leave memory at now: unused for idle, nothing waiting or in flight,
// no hold pending, breaker closed.
func (h *host) idleAt(now time.Time, idle time.Duration) bool {
	if now.Sub(time.Unix(0, h.lastUse.Load())) < idle {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inFlight == 0 && len(h.waiters) == 0 && !now.Before(h.holdUntil) && h.brk.State() == audit.BreakerClosed
}
