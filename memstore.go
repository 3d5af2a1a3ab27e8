package ext

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"
)

// memoryStore is a Store that lives in the process: the default, for the deferred queue of a single
// crawl. Nothing survives a restart; use sqlitestore for that.
type memoryStore struct {
	mu       sync.Mutex // protects the fields below
	hosts    map[string]StoredHost
	deferred []DeferredRequest // by ascending ID
	nextID   int64
	spilled  map[string][]DeferredRequest // a Queue's spilled requests by host, oldest first
	robots   map[string]storedRobots      // shared robots.txt reads by origin (robotsStore); nil until the first
	claims   map[string]robotsClaim       // claimed robots.txt reads by origin; nil until the first
}

// storedRobots is a shared robots.txt read (SaveRobots).
type storedRobots struct {
	status    int
	body      []byte
	fetchedAt time.Time
	expires   time.Time
}

// robotsClaim is a claim on an origin's robots.txt read (ClaimRobots).
type robotsClaim struct {
	token string
	until time.Time
}

// newMemoryStore returns an empty memoryStore.
func newMemoryStore() *memoryStore {
	return &memoryStore{hosts: make(map[string]StoredHost), spilled: make(map[string][]DeferredRequest)}
}

// LoadHost implements Store.
func (m *memoryStore) LoadHost(_ context.Context, host string) (StoredHost, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.hosts[host]
	return st, ok, nil
}

// SaveHosts implements Store.
func (m *memoryStore) SaveHosts(_ context.Context, states []StoredHost) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range states {
		if old, ok := m.hosts[st.Host]; ok && !st.Replace {
			st = mergeState(old, st)
		}
		st.Replace = false
		m.hosts[st.Host] = st
	}
	return nil
}

// mergeState applies SaveHosts' merge rule: the later NextDeparture, HoldUntil and RateUntil win.
func mergeState(old, st StoredHost) StoredHost {
	if old.RateUntil.After(st.RateUntil) {
		st.RateUntil, st.RateInterval = old.RateUntil, old.RateInterval
	}
	if old.NextDeparture.After(st.NextDeparture) {
		st.NextDeparture = old.NextDeparture
	}
	if old.HoldUntil.After(st.HoldUntil) {
		st.HoldUntil, st.HoldTrigger = old.HoldUntil, old.HoldTrigger
	}
	return st
}

// AddDeferred implements Store.
func (m *memoryStore) AddDeferred(_ context.Context, r DeferredRequest) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nextID++
	r.ID = m.nextID
	m.deferred = append(m.deferred, cloneRequest(r))
	return r.ID, nil
}

// cloneRequest returns r with its own header, body and context, so the store shares nothing with
// its caller.
func cloneRequest(r DeferredRequest) DeferredRequest {
	r.Header = r.Header.Clone()
	r.Body = slices.Clone(r.Body)
	r.Ctx = maps.Clone(r.Ctx)
	return r
}

// ListDeferred implements Store.
func (m *memoryStore) ListDeferred(_ context.Context, host string, limit int) ([]DeferredRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeferredRequest
	for _, r := range m.deferred {
		if limit > 0 && len(out) >= limit {
			break
		}
		if host == "" || r.Host == host {
			r.Header = http.Header(r.Header).Clone()
			out = append(out, r)
		}
	}
	return out, nil
}

// DeleteDeferred implements Store.
func (m *memoryStore) DeleteDeferred(_ context.Context, ids []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deferred = slices.DeleteFunc(m.deferred, func(r DeferredRequest) bool { return slices.Contains(ids, r.ID) })
	return nil
}

// TakeDeferred implements Store.
func (m *memoryStore) TakeDeferred(_ context.Context, host string, limit int) ([]DeferredRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []DeferredRequest
	m.deferred = slices.DeleteFunc(m.deferred, func(r DeferredRequest) bool {
		if (limit > 0 && len(out) >= limit) || (host != "" && r.Host != host) {
			return false
		}
		out = append(out, r)
		return true
	})
	return out, nil
}

// SpillRequests implements Store.
func (m *memoryStore) SpillRequests(_ context.Context, host string, reqs []DeferredRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range reqs {
		r = cloneRequest(r)
		r.ID, r.Host = 0, host
		m.spilled[host] = append(m.spilled[host], r)
	}
	return nil
}

// TakeSpilled implements Store.
func (m *memoryStore) TakeSpilled(_ context.Context, host string, limit int) ([]DeferredRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.spilled[host]
	if limit <= 0 || limit > len(all) {
		limit = len(all)
	}
	got := slices.Clone(all[:limit])
	clear(all[:limit]) // the array stays until an append outgrows it: it must not keep the taken alive
	if limit == len(all) {
		delete(m.spilled, host)
	} else {
		m.spilled[host] = all[limit:]
	}
	return got, nil
}

// SpilledHosts implements Store.
func (m *memoryStore) SpilledHosts(context.Context) (map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.spilled))
	for h, rs := range m.spilled {
		out[h] = len(rs)
	}
	return out, nil
}

// LoadRobots implements robotsStore.
func (m *memoryStore) LoadRobots(_ context.Context, origin string) (int, []byte, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.robots[origin]
	if !ok || !time.Now().Before(r.expires) {
		return 0, nil, time.Time{}, nil
	}
	return r.status, slices.Clone(r.body), r.fetchedAt, nil
}

// SaveRobots implements robotsStore.
func (m *memoryStore) SaveRobots(_ context.Context, origin string, status int, body []byte, fetchedAt time.Time, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, origin)
	if ttl <= 0 {
		delete(m.robots, origin)
		return nil
	}
	if m.robots == nil {
		m.robots = make(map[string]storedRobots)
	}
	m.robots[origin] = storedRobots{status: status, body: slices.Clone(body), fetchedAt: fetchedAt, expires: time.Now().Add(ttl)}
	return nil
}

// ClaimRobots implements robotsStore.
func (m *memoryStore) ClaimRobots(_ context.Context, origin, token string, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if c, ok := m.claims[origin]; ok && now.Before(c.until) {
		return false, nil
	}
	if m.claims == nil {
		m.claims = make(map[string]robotsClaim)
	}
	m.claims[origin] = robotsClaim{token: token, until: now.Add(ttl)}
	return true, nil
}

// ReleaseRobots implements robotsStore.
func (m *memoryStore) ReleaseRobots(_ context.Context, origin, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.claims[origin]; ok && c.token == token {
		delete(m.claims, origin)
	}
	return nil
}

// Close implements Store.
func (m *memoryStore) Close() error { return nil }
