package ext

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// This file is a fleet member's lease of a host: what it holds (token, ends by both clocks), whether
// a departure may still go under it, and how it travels with the request to its admission.

// fleetLease is a Queue's lease of one host of the fleet's frontier. Every request taken under it
// carries it to its admission, which presents it to the store (FrontierAdmit) and refuses the request
// once the lease no longer holds, by the store's word or by this process's clock. Its fields are
// atomics: the pacer reads them without the Queue's lock; a renewal moves its ends.
type fleetLease struct {
	host  string
	token int64
	until atomic.Int64           // when it runs out unrenewed by the frontier's clock (unix ns), as last granted or renewed
	end   atomic.Int64           // the same by this process's clock, never later: the grant's or renewal's start + the lease length
	lost  atomic.Pointer[string] // why it no longer holds here (nil: it holds): nothing more departs under it
}

// newFleetLease is l, granted or renewed by a call that started at start (this process's clock).
func newFleetLease(l Lease, start time.Time, ttl time.Duration) *fleetLease {
	fl := &fleetLease{host: l.Host, token: l.Token}
	fl.renewed(l.Until, start, ttl)
	return fl
}

// renewed moves the lease's ends: until by the frontier's clock, start + ttl by this one.
func (l *fleetLease) renewed(until, start time.Time, ttl time.Duration) {
	l.until.Store(until.UnixNano())
	l.end.Store(start.Add(ttl).UnixNano())
}

// lease is what FrontierAdmit is given.
func (l *fleetLease) lease() Lease {
	return Lease{Host: l.host, Token: l.token, Until: time.Unix(0, l.until.Load())}
}

// holds reports whether a departure may still be taken under the lease at now (this process's clock):
// it was not dropped, and has not run out. When it does not, it returns why.
func (l *fleetLease) holds(now time.Time) (bool, string) {
	if why := l.lost.Load(); why != nil {
		return false, *why
	}
	if now.UnixNano() >= l.end.Load() {
		l.markLost("it ran out unrenewed, by this process's clock (a pause past it, or a store that did not answer)")
		return false, *l.lost.Load()
	}
	return true, ""
}

// markLost records that the lease no longer holds, and why (the first reason given stays).
func (l *fleetLease) markLost(why string) {
	l.lost.CompareAndSwap(nil, &why)
}

// errLeaseLostFor is the error of a departure refused because l no longer holds, why.
func errLeaseLostFor(l *fleetLease, why string) error {
	return fmt.Errorf("%w: %s (token %d): %s", ErrLeaseLost, l.host, l.token, why)
}

// leaseCtxKey carries, in the context given to the pacer's admission, the lease a Queue's request
// was taken under (*fleetLease).
type leaseCtxKey struct{}

// leaseFrom returns the lease ctx carries, nil when none.
func leaseFrom(ctx context.Context) *fleetLease {
	l, _ := ctx.Value(leaseCtxKey{}).(*fleetLease)
	return l
}
