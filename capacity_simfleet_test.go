package ext

import (
	"context"
	"net/http"
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
	// The pooled refusals (refusalPool): the departure numbers of the last two backoff marks, the
	// count before the last and its refusals, and the refusals reported after it.
	mark, markBefore                    uint64
	before, beforeRefused, afterRefused uint32
}

// simSharedView is one pacer's handle on a simShared. Each of its calls takes the member's own
// offset (simMemberOffset) before it reaches the shared state, as each of a fleet's round trips to
// Redis takes time.
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

// simMemberOffset is how long each call of the token-th member of a fleet to what the fleet shares
// (the store, the network) takes before it reaches it: distinct primes of nanoseconds. It makes a
// fleet's run a function of its seed alone. The members' pacers wake at the same virtual instant
// whenever their waits end at an instant they share (the crawl's start, a hold or an admission the
// store computed, the same poll interval), and goroutines runnable at one instant run in the order the
// Go scheduler picks, which differs from one binary to another (a -race build). Offset by distinct
// primes, members that call at one instant reach the shared state at distinct instants, in an order
// that depends on the token alone; a member's calls one after another cannot meet another's either,
// short of a thousand of them at one instant (no multiple of one prime below 1009 is a multiple of another).
func simMemberOffset(token int) time.Duration {
	primes := [...]time.Duration{1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049}
	return primes[(token-1)%len(primes)]
}

// enter is the member's way to the shared state: it sleeps its offset.
func (v *simSharedView) enter() { time.Sleep(simMemberOffset(v.token)) }

// LoadHost implements Store, after the member's offset (enter), as every method of the view does.
func (v *simSharedView) LoadHost(ctx context.Context, host string) (StoredHost, bool, error) {
	v.enter()
	return v.memoryStore.LoadHost(ctx, host)
}

func (v *simSharedView) SaveHosts(ctx context.Context, states []StoredHost) error {
	v.enter()
	return v.simShared.SaveHosts(ctx, states)
}

func (v *simSharedView) AddDeferred(ctx context.Context, r DeferredRequest) (int64, error) {
	v.enter()
	return v.memoryStore.AddDeferred(ctx, r)
}

func (v *simSharedView) ListDeferred(ctx context.Context, host string, limit int) ([]DeferredRequest, error) {
	v.enter()
	return v.memoryStore.ListDeferred(ctx, host, limit)
}

func (v *simSharedView) DeleteDeferred(ctx context.Context, ids []int64) error {
	v.enter()
	return v.memoryStore.DeleteDeferred(ctx, ids)
}

func (v *simSharedView) TakeDeferred(ctx context.Context, host string, limit int) ([]DeferredRequest, error) {
	v.enter()
	return v.memoryStore.TakeDeferred(ctx, host, limit)
}

func (v *simSharedView) SpillRequests(ctx context.Context, host string, reqs []DeferredRequest) error {
	v.enter()
	return v.memoryStore.SpillRequests(ctx, host, reqs)
}

func (v *simSharedView) TakeSpilled(ctx context.Context, host string, limit int) ([]DeferredRequest, error) {
	v.enter()
	return v.memoryStore.TakeSpilled(ctx, host, limit)
}

func (v *simSharedView) SpilledHosts(ctx context.Context) (map[string]int, error) {
	v.enter()
	return v.memoryStore.SpilledHosts(ctx)
}

func (v *simSharedView) LoadRobots(ctx context.Context, origin string) (int, []byte, time.Time, error) {
	v.enter()
	return v.memoryStore.LoadRobots(ctx, origin)
}

func (v *simSharedView) SaveRobots(ctx context.Context, origin string, status int, body []byte, fetchedAt time.Time, ttl time.Duration) error {
	v.enter()
	return v.memoryStore.SaveRobots(ctx, origin, status, body, fetchedAt, ttl)
}

func (v *simSharedView) ClaimRobots(ctx context.Context, origin, token string, ttl time.Duration) (bool, error) {
	v.enter()
	return v.memoryStore.ClaimRobots(ctx, origin, token, ttl)
}

func (v *simSharedView) ReleaseRobots(ctx context.Context, origin, token string) error {
	v.enter()
	return v.memoryStore.ReleaseRobots(ctx, origin, token)
}

// simMemberNet is a fleet member's way to the shared network: each request takes the member's
// offset (simMemberOffset) before it is written.
type simMemberNet struct {
	*simNet
	token int
}

func (n simMemberNet) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sleepCtx(req.Context(), simMemberOffset(n.token)) {
		return nil, context.Cause(req.Context())
	}
	return n.simNet.RoundTrip(req)
}

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
	v.enter()
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
	a.PoolMark, a.PoolBefore, a.PoolBeforeRefused, a.PoolAfterRefused = f.mark, f.before, f.beforeRefused, f.afterRefused
	f.last, f.pending, f.pendingBy = now, now.Add(simPendingBound), v.token
	a.OK = true
	return a, nil
}

// Refused implements SharedStore as refusedScript does: the latest departure reported refused.
func (v *simSharedView) Refused(_ context.Context, host string, seq uint64) error {
	v.enter()
	v.mu.Lock()
	defer v.mu.Unlock()
	if f := v.fleet[host]; f != nil && seq > f.refused {
		f.refused = seq
	}
	return nil
}

// PoolRefused implements refusalPool as refusedScript does with a refusal: Refused, and the refusal
// counted on its side of the last mark.
func (v *simSharedView) PoolRefused(ctx context.Context, host string, seq uint64) error {
	if err := v.Refused(ctx, host, seq); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.fleet[host]
	switch {
	case f == nil || seq > f.seq:
	case seq > f.mark:
		f.afterRefused++
	case seq > f.markBefore:
		f.beforeRefused++
	}
	return nil
}

// PoolBackoff implements refusalPool as poolBackoffScript does: the departures since the last mark
// become the count before (added to it when paced or fewer than 3), halved past 64.
func (v *simSharedView) PoolBackoff(_ context.Context, host string, paced bool) error {
	v.enter()
	v.mu.Lock()
	defer v.mu.Unlock()
	f := v.fleet[host]
	if f == nil || f.seq == 0 {
		return nil
	}
	n := uint32(f.seq - f.mark)
	if paced || n < 3 {
		f.before, f.beforeRefused = f.before+n, f.beforeRefused+f.afterRefused
	} else {
		f.before, f.beforeRefused = n, f.afterRefused
	}
	for f.before >= 64 {
		f.before, f.beforeRefused = f.before/2, f.beforeRefused/2
	}
	f.beforeRefused = min(f.beforeRefused, f.before)
	f.markBefore, f.mark, f.afterRefused = f.mark, f.seq, 0
	return nil
}

var _ refusalPool = (*simSharedView)(nil)

// Departed implements SharedStore: the last departure becomes at least ago before now, and the
// pending departure ends.
func (v *simSharedView) Departed(_ context.Context, host string, ago time.Duration) error {
	v.enter()
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
