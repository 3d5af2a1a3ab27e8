package ext

import (
	"context"
	"time"
)

// simShared is a SharedStore in memory, for a fleet of pacers in one process (the virtual-time grid's
// fleet cell): redisstore's scripts (admitScript, departedScript, saveScript's model rule) on the
// process's clock, which in a synctest bubble is the fleet's one clock as Redis's TIME is. Each pacer
// takes its own view, as each redisstore.Store has its own token. The store never loses its state.
type simShared struct {
	*memoryStore // the saved host states (LoadHost, and SaveHosts below), deferred and spilled requests

	// fleet is the admission state, apart from the saved state (a host only ever admitted has none);
	// protected by memoryStore.mu, so that Admit reads both at once.
	fleet map[string]*simFleetHost
}

// simFleetHost is what Admit and Departed keep of a host.
type simFleetHost struct {
	last      time.Time // the fleet's last departure
	seq       uint64    // the fleet's departures, numbered
	refused   uint64    // the number of the latest departure reported refused
	pending   time.Time // an admitted departure not yet on the wire holds the host until then (zero: none)
	pendingBy int       // the view that admitted it
}

// simSharedView is one pacer's handle on a simShared.
type simSharedView struct {
	*simShared
	token int
}

// simPendingBound and simPendingPoll are redisstore's pendingBound and pendingPollNS.
const (
	simPendingBound = 30 * time.Second
	simPendingPoll  = 5 * time.Millisecond
)

func newSimShared() *simShared {
	return &simShared{memoryStore: newMemoryStore(), fleet: map[string]*simFleetHost{}}
}

// view returns the handle of the token-th pacer of the fleet (tokens distinct, from 1).
func (s *simShared) view(token int) *simSharedView { return &simSharedView{simShared: s, token: token} }

// SaveHosts implements Store with the shared store's merge rule: memoryStore's (later departure, hold
// and rate limit win), the newest capacity model of the fleet kept, and the greater noise verdict.
func (s *simShared) SaveHosts(_ context.Context, states []StoredHost) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range states {
		if old, ok := s.hosts[st.Host]; ok && !st.Replace {
			st = mergeState(old, st)
			if old.ModelVersion > st.ModelVersion {
				st.AdaptiveDelay, st.KnownLimit, st.RefusedInterval, st.ModelVersion = old.AdaptiveDelay, old.KnownLimit, old.RefusedInterval, old.ModelVersion
			}
			st.Noise = max(st.Noise, old.Noise)
		}
		st.Replace = false
		s.hosts[st.Host] = st
	}
	return nil
}

// Admit implements SharedStore as admitScript does: the departure may go when now is at or after the
// last departure + the longest of gap, the stored adaptive delay, Crawl-delay and rate-limit interval,
// and the stored hold, and no departure another view admitted is pending.
func (v *simSharedView) Admit(_ context.Context, host string, gap time.Duration) (Admission, error) {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	st, saved := v.hosts[host]
	f := v.fleet[host]
	if f == nil {
		f = &simFleetHost{}
		v.fleet[host] = f
	}
	a := Admission{}
	gap = max(gap, 0)
	if saved {
		a.AdaptiveDelay, a.KnownLimit, a.RefusedInterval, a.ModelVersion, a.Noise = st.AdaptiveDelay, st.KnownLimit, st.RefusedInterval, st.ModelVersion, st.Noise
		gap = max(gap, st.AdaptiveDelay, st.CrawlDelay)
		if now.Before(st.RateUntil) {
			gap = max(gap, st.RateInterval)
		}
	}
	var allow time.Time
	if !f.last.IsZero() {
		allow = f.last.Add(gap)
	}
	if saved && st.HoldUntil.After(allow) {
		allow = st.HoldUntil
	}
	if !now.Before(allow) && !f.pending.IsZero() && f.pendingBy != v.token && now.Before(f.pending) {
		a.Pending = true
		allow = now.Add(simPendingPoll)
		if f.pending.Before(allow) {
			allow = f.pending
		}
	}
	if now.Before(allow) {
		a.Wait = allow.Sub(now)
		return a, nil
	}
	a.Pending = false
	if !f.last.IsZero() {
		a.Since = now.Sub(f.last)
	}
	f.seq++
	a.Seq, a.RefusedSeq = f.seq, f.refused
	f.last, f.pending, f.pendingBy = now, now.Add(simPendingBound), v.token
	a.OK = true
	return a, nil
}

// Refused implements SharedStore as refusedScript does: the latest departure reported refused.
func (v *simSharedView) Refused(_ context.Context, host string, seq uint64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.fleet[host]; f != nil && seq > f.refused {
		f.refused = seq
	}
	return nil
}

// Departed implements SharedStore: the last departure becomes at least ago before now, and the
// pending departure ends.
func (v *simSharedView) Departed(_ context.Context, host string, ago time.Duration) error {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.fleet[host]
	if f == nil {
		f = &simFleetHost{}
		v.fleet[host] = f
	}
	if at := now.Add(-max(ago, 0)); f.last.Before(at) {
		f.last = at
	}
	f.pending, f.pendingBy = time.Time{}, 0
	return nil
}

// CheckLost implements SharedStore: memory is never lost.
func (v *simSharedView) CheckLost(context.Context) (bool, error) { return false, nil }

var _ SharedStore = (*simSharedView)(nil)
