package hostkey

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bounds of ByIP's lookups and cache.
const (
	ipKeyTTL         = 10 * time.Minute // a resolved key is kept this long, then refreshed
	ipKeyFailTTL     = time.Minute      // a failed lookup is not retried before this
	ipLookupTimeout  = 2 * time.Second  // one lookup, waiting for a slot included
	ipLookupsAtOnce  = 8                // lookups in flight at once
	ipKeyCacheLimit  = 10000            // names kept; expired ones go first when it is full
	ipKeyNetworkType = "ip"
)

// ByIP returns a WithHostKey function pacing every name that resolves to one address as one schedule,
// whatever the scheme or port: names served by one machine share it. resolver nil means
// net.DefaultResolver.
//
// The host key must not change under a request, so the lookups are made robust: each name is looked
// up once per 10 minutes (at most 8 lookups at a time, 2 s each; callers asking for a name being
// looked up wait for that lookup, or get the last key while it is refreshed), the key is the lowest
// address and stays the same across refreshes while the name still resolves to it (round-robin DNS
// does not split the schedule), a failed refresh keeps the last key (retried after a minute), and a
// name never resolved keys by Default (retried after a minute). IP
// literals key by Default. At most 10000 names are cached. robots.txt stays per origin; the
// shared schedule keeps the largest Crawl-delay among them.
func ByIP(resolver *net.Resolver) func(*url.URL) string {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	k := newIPKeyer(func(ctx context.Context, host string) ([]netip.Addr, error) {
		return resolver.LookupNetIP(ctx, ipKeyNetworkType, host)
	}, time.Now)
	return k.key
}

// ipKeyer caches the address each name is paced by.
type ipKeyer struct {
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	now    func() time.Time
	slots  chan struct{} // lookups in flight

	mu sync.Mutex // protects m
	m  map[string]*ipEntry
}

// ipEntry is a name's key. Its fields are written before done is closed and never after.
type ipEntry struct {
	done    chan struct{} // closed when its lookup ends
	stale   string        // the key before this refresh: answered while the lookup runs
	key     string        // the address, bracketed if IPv6; "" if the name never resolved
	expires time.Time
}

func newIPKeyer(lookup func(context.Context, string) ([]netip.Addr, error), now func() time.Time) *ipKeyer {
	return &ipKeyer{lookup: lookup, now: now, slots: make(chan struct{}, ipLookupsAtOnce), m: map[string]*ipEntry{}}
}

func (k *ipKeyer) key(u *url.URL) string {
	host, _ := HostAndPort(u)
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return Default(u)
	}
	now := k.now()
	k.mu.Lock()
	e := k.m[host]
	if e != nil {
		select {
		case <-e.done:
			if now.Before(e.expires) {
				k.mu.Unlock()
				return orDefault(e.key, u)
			}
		default: // being looked up
			k.mu.Unlock()
			if e.stale != "" {
				return e.stale
			}
			<-e.done // bounded by ipLookupTimeout
			return orDefault(e.key, u)
		}
	}
	var last string
	if e != nil {
		last = e.key
	}
	next := &ipEntry{done: make(chan struct{}), stale: last}
	k.evictLocked(now)
	k.m[host] = next
	k.mu.Unlock()

	key, ok := k.resolve(host, last)
	next.key, next.expires = key, k.now().Add(ipKeyTTL)
	if !ok {
		next.expires = k.now().Add(ipKeyFailTTL)
	}
	close(next.done)
	return orDefault(next.key, u)
}

// resolve looks host up and returns its key: last while host still resolves to it, else its lowest
// address. When the lookup fails it returns last (maybe "") and false.
func (k *ipKeyer) resolve(host, last string) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), ipLookupTimeout)
	defer cancel()
	select {
	case k.slots <- struct{}{}:
	case <-ctx.Done():
		return last, false
	}
	addrs, err := k.lookup(ctx, host)
	<-k.slots
	if err != nil || len(addrs) == 0 {
		return last, false
	}
	keys := make([]string, len(addrs))
	for i, a := range addrs {
		a = a.Unmap().WithZone("")
		keys[i] = a.String()
		if a.Is6() {
			keys[i] = "[" + keys[i] + "]"
		}
	}
	if last != "" && slices.Contains(keys, last) {
		return last, true
	}
	return slices.MinFunc(keys, func(a, b string) int {
		return netip.MustParseAddr(strings.Trim(a, "[]")).Compare(netip.MustParseAddr(strings.Trim(b, "[]")))
	}), true
}

// evictLocked makes room for one more name: expired names first, then any.
func (k *ipKeyer) evictLocked(now time.Time) {
	if len(k.m) < ipKeyCacheLimit {
		return
	}
	for name, e := range k.m {
		select {
		case <-e.done:
			if !now.Before(e.expires) {
				delete(k.m, name)
			}
		default:
		}
	}
	for name, e := range k.m {
		if len(k.m) < ipKeyCacheLimit {
			return
		}
		select {
		case <-e.done:
			delete(k.m, name)
		default:
		}
	}
}

func orDefault(key string, u *url.URL) string {
	if key == "" {
		return Default(u)
	}
	return key
}
