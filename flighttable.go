package ext

import (
	"net/url"
	"sync"
	"unsafe"
)

// flightTable maps a request's identity (a Colly request ID, or the *url.URL its first hop carries) to
// its flight from departure to the callback that ends it. Every request stores and takes one entry
// from two tables, from whichever core runs it: one lock and one map would be a cache line that both
// cores fight over on every request, so the table is spread over shards of a cache line each.
type flightTable[K comparable] struct {
	shards [flightShards]flightShard[K]
	index  func(K) uint // spreads keys over the shards
}

const flightShards = 32

type flightShard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*flight
	_  [64 - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof(map[int]int(nil))]byte // a cache line to itself
}

func (t *flightTable[K]) shard(k K) *flightShard[K] {
	return &t.shards[t.index(k)%flightShards]
}

// store sets k's flight.
func (t *flightTable[K]) store(k K, f *flight) {
	s := t.shard(k)
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[K]*flight)
	}
	s.m[k] = f
	s.mu.Unlock()
}

// take removes k's flight and returns it; nil when there is none.
func (t *flightTable[K]) take(k K) *flight {
	s := t.shard(k)
	s.mu.Lock()
	f, ok := s.m[k]
	if ok {
		delete(s.m, k)
	}
	s.mu.Unlock()
	return f
}

// byRequestID spreads Colly request IDs, which rise by one per request, over the shards in turn.
func byRequestID(id uint32) uint { return uint(id) }

// byURL spreads URLs by their address (a URL is 144 bytes, so neighbours differ above the low bits).
func byURL(u *url.URL) uint { return uint(uintptr(unsafe.Pointer(u)) >> 4) }
