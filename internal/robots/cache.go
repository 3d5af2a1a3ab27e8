// Package robots keeps the robots.txt of each origin a crawl paces (RFC 9309): one read per origin at
// a time, the rules kept for their TTL (24 h), what an unavailable robots.txt does meanwhile, the
// rules of evicted hosts kept within a bound, and a fleet's reads shared through its store.
//
// It knows origins, entries and instants, never the pacer's hosts: what a read's outcome does to a
// host (its Crawl-delay, its hold, its breaker) and the audit events it writes are the pacer's, behind
// Binding and Host. It imports nothing from the root package; robotstxt parses what it reads.
package robots

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/collypace/ext/internal/robotstxt"
)

// ErrUnreachable is why a request fails without leaving: its origin cannot be reached at all.
var ErrUnreachable = errors.New("ext: host cannot be reached")

// Cache holds one robots.txt per origin, read through the pacer and kept for the TTL (24 h).
//
// An unreachable one (5xx, 429, network error, timeout) means complete disallow for now (RFC 9309
// §2.3.1.4): when no earlier copy applies, the host's pages wait (in Get, holding no in-flight slot)
// while one of them reads it again after 1 s, 2 s, 4 s… up to the retry delay; after the unreachable
// limit the host's breaker opens (robots_unreachable), its pages are deferred, and the breaker's probe
// is the next read. When a copy was read before, it still applies meanwhile (§2.4). Call Init first.
type Cache struct {
	mu    sync.RWMutex // protects the fields below
	m     map[string]*Entry
	byKey map[string][]string // host key → the origins paced under it (a host key can join several)
	idle  []idleKey           // host keys evicted from memory, oldest first (evict.go)
	peak  int                 // the most origins m held at an eviction sweep
}

// Entry is one attempt at reading an origin's robots.txt.
type Entry struct {
	Key string // the host key of the origin, set at creation
	// wait is closed when the attempt ends, and dropped (nil): the fields below are then read-only. Not
	// kept once done, so that a cached entry does not hold a channel.
	wait      atomic.Pointer[chan struct{}]
	FetchedAt time.Time
	Info      robotstxt.Info
	Err       error
	*Outage

	// applied is the serial of the host state its rules were last applied to: idle eviction makes a
	// new one, which gets them again. A number, so that an evicted host's state does not stay in memory.
	applied atomic.Uint32
	Status  int16 // the HTTP status of the read (0: none); the small fields share one word
	// Unavailable: robots.txt was not read; *Outage says why and what applies meanwhile (set with it,
	// nil otherwise: most entries are read and need none of it).
	Unavailable bool
	// Void: nothing was learned (the host's breaker refused the fetch, or its caller gave up); the
	// entry it replaced is put back.
	Void bool
}

// Outage is what an unavailable robots.txt entry keeps (outage.go).
type Outage struct {
	Attempt     int       // failed attempts in a row, this one included
	Since       time.Time // when the first of them ended
	RetryAt     time.Time // when the next attempt is due (once the host's breaker lets it go)
	Cached      *Entry    // the last robots.txt read, which still applies; nil: none, pages wait
	Unreachable bool      // the origin cannot be reached at all (no such name, connection refused)
	Tripped     bool      // this failure opened the host's breaker (robots_unreachable)
}

// Init makes c ready.
func (c *Cache) Init() {
	c.m = make(map[string]*Entry)
	c.byKey = make(map[string][]string)
}

// newPending is an attempt under way for an origin under key.
func newPending(key string) *Entry {
	e := &Entry{Key: key}
	wait := make(chan struct{})
	e.wait.Store(&wait)
	return e
}

// Pending reports whether e's attempt is still under way.
func (e *Entry) Pending() bool {
	return e.wait.Load() != nil
}

// finish marks e's attempt ended and wakes the requests waiting on it.
func (e *Entry) finish() {
	if wait := e.wait.Swap(nil); wait != nil {
		close(*wait)
	}
}

// pendingWait is the channel to wait on for e's attempt, nil when there is no attempt under way.
func pendingWait(e *Entry) <-chan struct{} {
	if e == nil {
		return nil
	}
	if wait := e.wait.Load(); wait != nil {
		return *wait
	}
	return nil
}

// Rules returns the entry whose robots.txt applies: e when it was read, the earlier copy when it was
// unavailable, nil when none applies (the host's pages wait).
func (e *Entry) Rules() *Entry {
	switch {
	case e.Void:
		return nil
	case e.Unavailable:
		return e.Cached
	}
	return e
}

// Due reports whether robots.txt must be read again at now: its TTL is over, or, unavailable, its next
// try has come. e must be done.
func (e *Entry) Due(now time.Time, ttl time.Duration) bool {
	if e.Unavailable {
		return !now.Before(e.RetryAt)
	}
	return !now.Before(e.FetchedAt.Add(ttl))
}

// AppliedTo reports whether e's rules were last applied to the host state numbered serial.
func (e *Entry) AppliedTo(serial uint32) bool {
	return e.applied.Load() == serial
}

// MarkApplied records that e's rules were applied to the host state numbered serial.
func (e *Entry) MarkApplied(serial uint32) { e.applied.Store(serial) }

// ClaimApply reports whether e's rules must be applied to the host state numbered serial: they were
// last applied to another one (one made anew after idle eviction forgets the Crawl-delay the cache
// still knows), and this caller is the one to apply them.
func (e *Entry) ClaimApply(serial uint32) bool {
	old := e.applied.Load()
	return old != serial && e.applied.CompareAndSwap(old, serial)
}

// Lookup returns origin's entry (nil: none), done or under way.
func (c *Cache) Lookup(origin string) *Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[origin]
}

// Sizes returns how many origins, host keys and evicted host keys c holds.
func (c *Cache) Sizes() (origins, keys, idle int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m), len(c.byKey), len(c.idle)
}

// Binding is what the cache needs of the pacer: its clock, and the host an origin is paced under.
type Binding interface {
	Now() time.Time
	// SleepUntil waits until t or until ctx ends (its cause).
	SleepUntil(ctx context.Context, t time.Time) error
	// Host returns the host state under key now (one made anew if it was evicted).
	Host(key string) Host
}

// Host is the pacer's host an origin is paced under: what a read does to it is the pacer's.
type Host interface {
	// Key returns the host's key, the host state's own copy.
	Key() string
	// Parked returns the error of a request its breaker keeps from leaving at now, nil when none.
	Parked(now time.Time) error
	// Apply applies r, the rules that apply for e's origin, to the host when e was last applied to
	// another host state (ClaimApply).
	Apply(e, r *Entry)
	// Read makes one attempt at origin's robots.txt into e, which replaces prev (nil for the first),
	// and applies its outcome to the host; a read that learned nothing sets e.Void (Abandon). It
	// returns an error when the caller must give up (its deadline came before the read could leave).
	Read(ctx context.Context, e, prev *Entry, origin string) error
}

// Get makes sure the robots.txt of origin, paced under key, is known, reading it (once, through the
// pacer) when needed, and returns its entry. With wait, while it is unreachable and no earlier copy
// applies, it waits, until it is read, the host is parked (returned at once: the caller's breaker check
// defers the request), or ctx ends; without, it returns such an entry at once.
func (c *Cache) Get(ctx context.Context, b Binding, origin, key string, wait bool, ttl time.Duration) (*Entry, error) {
	for {
		h := b.Host(key)
		now := b.Now()
		c.mu.Lock()
		e := c.m[origin]
		if wait := pendingWait(e); wait != nil { // another request reads it: wait for its outcome
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("ext: waiting for robots.txt of %s: %w", origin, context.Cause(ctx))
			}
		}
		if e != nil && !e.Due(now, ttl) {
			c.mu.Unlock()
			if r := e.Rules(); r != nil {
				h.Apply(e, r)
				return e, nil
			}
			if !wait || h.Parked(now) != nil {
				return e, nil
			}
			if !e.Unavailable { // void: never left in the cache once its read ends; look again
				continue
			}
			if e.Unreachable { // nothing to wait for: its pages fail at once, with the network's error
				return nil, fmt.Errorf("%w: %s (robots.txt: %w)", ErrUnreachable, origin, e.Err)
			}
			if err := b.SleepUntil(ctx, e.RetryAt); err != nil { // held until the next try
				return nil, fmt.Errorf("ext: waiting for robots.txt of %s: %w", origin, err)
			}
			continue
		}
		c.mu.Unlock()
		// A read is due. A parked host is not asked (its breaker's probe will be the read): an
		// earlier copy still applies meanwhile, or its requests are deferred.
		if err := h.Parked(now); err != nil {
			if e != nil && e.Rules() != nil {
				h.Apply(e, e.Rules())
				return e, nil
			}
			return &Entry{Void: true, Err: err}, nil
		}
		c.mu.Lock()
		if c.m[origin] != e { // another request started a read meanwhile
			c.mu.Unlock()
			continue
		}
		hk := h.Key() // the host's own copy of the key: a URL's Host keeps its URL alive
		if !slices.Contains(c.byKey[hk], origin) {
			c.byKey[hk] = append(c.byKey[hk], origin)
		}
		ne := newPending(hk)
		c.m[origin] = ne
		c.mu.Unlock()
		giveUp := h.Read(ctx, ne, e, origin)
		ne.finish()
		if ne.Void {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("ext: reading robots.txt of %s: %w", origin, context.Cause(ctx))
			}
			if giveUp != nil {
				return nil, fmt.Errorf("ext: reading robots.txt of %s: %w", origin, giveUp)
			}
			if e != nil && e.Rules() != nil {
				return e, nil
			}
			return ne, nil // refused by the host's breaker: the caller's breaker check defers the request
		}
	}
}

// Abandon puts prev (nil: none) back in e's place for origin: e's read learned nothing.
func (c *Cache) Abandon(origin string, e, prev *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[origin] == e {
		if prev != nil {
			c.m[origin] = prev
		} else {
			delete(c.m, origin)
		}
	}
}

// KeyCrawlDelay returns the largest Crawl-delay, as honoured and as published, among the robots.txt
// of the origins sharing e's host key: r's (the rules that apply for e's origin), and the others' that
// apply. With the default host key that is r's alone; a key joining several origins
// (ByRegistrableDomain, ByIP) paces them by the strictest.
func (c *Cache) KeyCrawlDelay(e, r *Entry) (delay, published time.Duration) {
	delay, published = r.Info.CrawlDelay, r.Info.Published
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, origin := range c.byKey[e.Key] {
		o := c.m[origin]
		if o == nil || o == e || o.Pending() {
			continue
		}
		if or := o.Rules(); or != nil {
			delay, published = max(delay, or.Info.CrawlDelay), max(published, or.Info.Published)
		}
	}
	return delay, published
}
