package robots

import (
	"maps"
	"time"
)

// Which robots.txt rules stay in memory once their hosts are evicted: those of the last IdleHosts
// evicted hosts, and none that are due to be read again.

// IdleHosts is how many evicted hosts keep their robots.txt rules in the cache. Within it, a host
// that comes back gets its Crawl-delay again without reading robots.txt before its TTL (idle
// eviction); beyond it, the oldest evicted host's rules leave memory, and its next request reads
// robots.txt again (with a store, its Crawl-delay is restored from the store meanwhile). So the cache
// holds the origins of the hosts in memory and at most this many others, however many hosts a crawl
// has seen.
const IdleHosts = 1024

// idleKey is a host key whose host state was evicted from memory.
type idleKey struct {
	key string
	at  time.Time // when it was evicted
}

// HostsEvicted records that the hosts of keys left memory at now, and forgets the robots.txt rules of
// the oldest evicted hosts beyond IdleHosts, and of any whose rules are due to be read again (ttl):
// those of a host that came back meanwhile (back reports it), and reads under way, stay.
func (c *Cache) HostsEvicted(keys []string, now time.Time, ttl time.Duration, back func(key string) bool) {
	if len(keys) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.peak = max(c.peak, len(c.m))
	for _, k := range keys {
		c.idle = append(c.idle, idleKey{key: k, at: now})
	}
	n := 0
	for n < len(c.idle) && (len(c.idle)-n > IdleHosts || c.allDueLocked(c.idle[n].key, now, ttl)) {
		k := c.idle[n].key
		n++
		if !back(k) {
			c.forgetLocked(k)
		}
	}
	if n > 0 {
		clear(c.idle[:n])
		c.idle = append(c.idle[:0], c.idle[n:]...)
	}
	if c.peak >= 64 && len(c.m) < c.peak/4 { // a Go map keeps the room of its peak: made anew, memory follows
		c.m, c.byKey, c.peak = sizedCopy(c.m), sizedCopy(c.byKey), len(c.m)
	}
}

// sizedCopy copies m into a map sized for what it holds (maps.Clone keeps the room of m).
func sizedCopy[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	maps.Copy(c, m)
	return c
}

// allDueLocked reports whether the rules of every origin under key are due to be read again at now.
func (c *Cache) allDueLocked(key string, now time.Time, ttl time.Duration) bool {
	for _, origin := range c.byKey[key] {
		if e := c.m[origin]; e != nil && (e.Pending() || !e.Due(now, ttl)) {
			return false
		}
	}
	return true
}

// forgetLocked drops the robots.txt entries of the origins under key, but for reads under way.
func (c *Cache) forgetLocked(key string) {
	kept := c.byKey[key][:0]
	for _, origin := range c.byKey[key] {
		if e := c.m[origin]; e != nil && e.Pending() {
			kept = append(kept, origin)
			continue
		}
		delete(c.m, origin)
	}
	if len(kept) == 0 {
		delete(c.byKey, key)
		return
	}
	c.byKey[key] = kept
}
