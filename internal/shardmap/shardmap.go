// Package shardmap is a map of string keys spread over shards, each behind its own read-write lock:
// a lookup takes one shard's read lock and allocates nothing, so many goroutines can look up many
// keys at once. The pacer keeps its hosts in one, pacemetrics its per-host counters.
package shardmap

import (
	"hash/maphash"
	"maps"
	"sync"
)

// Shards is the number of shards.
const Shards = 64

// Map maps strings to values of a pointer-like type V. The zero Map is not ready: call Init.
type Map[V comparable] struct {
	seed   maphash.Seed
	shards [Shards]shard[V]
}

type shard[V comparable] struct {
	mu   sync.RWMutex // protects m and peak
	m    map[string]V
	peak int // the most keys m held since it was made: a Go map keeps the room of its peak
}

// shrinkBelow is the share of its peak under which a shard's map is made anew, so that memory
// follows the keys down (after an idle-eviction sweep) as well as up; minShrink is the smallest
// peak worth it.
const (
	shrinkBelow = 4
	minShrink   = 64
)

// Init makes m ready for use.
func (m *Map[V]) Init() {
	m.seed = maphash.MakeSeed()
	for i := range m.shards {
		m.shards[i].m = make(map[string]V)
	}
}

func (m *Map[V]) shard(key string) *shard[V] {
	return &m.shards[maphash.String(m.seed, key)%Shards]
}

// Load returns the value of key.
func (m *Map[V]) Load(key string) (V, bool) {
	s := m.shard(key)
	s.mu.RLock()
	v, ok := s.m[key]
	s.mu.RUnlock()
	return v, ok
}

// LoadOrCreate returns the value of key, storing create() first when there is none; created reports
// that it did. create runs under the shard's lock: keep it short.
func (m *Map[V]) LoadOrCreate(key string, create func() V) (v V, created bool) {
	if v, ok := m.Load(key); ok {
		return v, false
	}
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[key]; ok {
		return v, false
	}
	v = create()
	s.m[key] = v
	s.peak = max(s.peak, len(s.m))
	return v, true
}

// DeleteIf removes key if it still maps to v and cond(v) holds, both checked under the shard's lock.
func (m *Map[V]) DeleteIf(key string, v V, cond func(V) bool) bool {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[key]; !ok || cur != v || !cond(v) {
		return false
	}
	delete(s.m, key)
	if s.peak >= minShrink && len(s.m) < s.peak/shrinkBelow {
		m := make(map[string]V, len(s.m)) // sized for what it holds now (maps.Clone keeps the room)
		maps.Copy(m, s.m)
		s.m, s.peak = m, len(m)
	}
	return true
}

// Range calls f on every value, shard by shard, with no lock held (on a copy of each shard's values).
func (m *Map[V]) Range(f func(V)) {
	for i := range Shards {
		m.RangeShard(i, f)
	}
}

// RangeShard calls f on the values of shard i, with no lock held: for sweeps a shard at a time.
func (m *Map[V]) RangeShard(i int, f func(V)) {
	s := &m.shards[i%Shards]
	s.mu.RLock()
	vs := make([]V, 0, len(s.m))
	for _, v := range s.m {
		vs = append(vs, v)
	}
	s.mu.RUnlock()
	for _, v := range vs {
		f(v)
	}
}

// Len returns the number of keys.
func (m *Map[V]) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
