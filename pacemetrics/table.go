package pacemetrics

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/collypace/ext"
)

// Refusal triggers with a counter of their own; any other trigger string counts under "other".
const (
	trigRefusal = iota
	trigServerError
	trigTransportError
	trigOther
	numTriggers
)

var triggerNames = [numTriggers]string{ext.TriggerRefusal, ext.TriggerServerError, ext.TriggerTransportError, OtherHost}

func triggerIndex(trigger string) int {
	switch trigger {
	case ext.TriggerRefusal:
		return trigRefusal
	case ext.TriggerServerError:
		return trigServerError
	case ext.TriggerTransportError:
		return trigTransportError
	}
	return trigOther
}

// numStates is the number of breaker states; ext.BreakerState values are 0 … numStates-1.
const numStates = int(ext.BreakerHalfOpen) + 1

var stateNames = [numStates]string{
	ext.BreakerClosed.String(), ext.BreakerOpen.String(), ext.BreakerHalfOpen.String(),
}

// hostStats is what the Collector counts for one host (or, as Collector.other, for the hosts
// without series of their own). The Observer methods update its atomic counters with no lock; the
// fields after them belong to the scrape and are protected by Collector.mu. 144 bytes.
type hostStats struct {
	key         string
	member      atomic.Bool  // the host has series of its own (top-N)
	breaker     atomic.Int32 // the last ext.BreakerState reported
	departures  atomic.Uint64
	waitNanos   atomic.Int64 // total waited before departures
	refusals    [numTriggers]atomic.Uint64
	retryWaits  atomic.Uint64
	retryNanos  atomic.Int64 // total Retry-After holds
	transitions [numStates]atomic.Uint64

	score          float64 // departures, decayed with a half-life of activityHalfLife
	prevDepartures uint64  // departures at the previous scrape
	prevEvents     uint64  // events at the previous scrape
	lastActive     int64   // Unix nanoseconds of the first scrape that saw the events change
}

// events is the number of events counted for the host, to tell an idle host.
func (s *hostStats) events() uint64 {
	n := s.departures.Load() + s.retryWaits.Load()
	for i := range s.refusals {
		n += s.refusals[i].Load()
	}
	for i := range s.transitions {
		n += s.transitions[i].Load()
	}
	return n
}

// table is a sharded map of host keys to their stats: a lookup takes a read lock on one shard and
// allocates nothing.
type table struct {
	seed   maphash.Seed
	shards [64]shard
}

type shard struct {
	mu sync.RWMutex // protects m
	m  map[string]*hostStats
}

func (t *table) init() {
	t.seed = maphash.MakeSeed()
	for i := range t.shards {
		t.shards[i].m = make(map[string]*hostStats)
	}
}

func (t *table) shard(key string) *shard {
	return &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

// get returns the stats of key, creating them on first use.
func (t *table) get(key string) *hostStats {
	sh := t.shard(key)
	sh.mu.RLock()
	s := sh.m[key]
	sh.mu.RUnlock()
	if s != nil {
		return s
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s := sh.m[key]; s != nil {
		return s
	}
	s = &hostStats{key: key}
	sh.m[key] = s
	return s
}

// remove forgets s, unless its key has been given new stats meanwhile.
func (t *table) remove(s *hostStats) {
	sh := t.shard(s.key)
	sh.mu.Lock()
	if sh.m[s.key] == s {
		delete(sh.m, s.key)
	}
	sh.mu.Unlock()
}

// each calls f on every host's stats, holding one shard's read lock at a time: f must not use t.
func (t *table) each(f func(*hostStats)) {
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		for _, s := range sh.m {
			f(s)
		}
		sh.mu.RUnlock()
	}
}

// len returns the number of hosts in t.
func (t *table) len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}
