package ext

import (
	"context"
	"net/url"
	"time"

	"github.com/gocolly/colly/v2"
)

// This file is the Queue's scheduler: a worker's next task is the host that can depart soonest
// (robots.txt first for a host not seen yet), waiting for it without holding the lock.

// task is a worker's next job: a request whose host can depart now, or first the robots.txt of a
// host not seen yet (its Crawl-delay must be known before its schedule can be read).
type task struct {
	d      DeferredRequest
	robots bool
	lease  *fleetLease // the lease a request taken from the fleet's frontier departs under (nil: none)
}

// next blocks until a host is ready and returns its oldest request;
// ok is false when the queue is done. Among the hosts that can depart now, the one with the longest
// remaining schedule goes first: the slowest hosts set the crawl's end, the fast ones fill the gaps.
func (q *Queue) next(ctx context.Context) (task, bool) {
	q.mu.Lock()
	t, ok := q.nextLocked(ctx)
	notes := q.takeNotesLocked()
	q.mu.Unlock()
	q.emitNotes(notes)
	return t, ok
}

// nextLocked is next with the lock held. Whatever needs the store (a refill, requests deferred while
// the host was parked, its stored pacing state) is done with the lock released (released).
func (q *Queue) nextLocked(ctx context.Context) (task, bool) {
	for {
		if q.stopped || ctx.Err() != nil || q.inMem+q.spilled == 0 && q.active == 0 && q.fleetDoneLocked() {
			q.signalLocked() // the other workers are done too
			return task{}, false
		}
		now := q.p.now()
		q.promoteLocked(now)
		if q.ready.Len() == 0 {
			mayAsk := q.fleetMayAskLocked()
			if mayAsk && !now.Before(q.fleet.askAtLocked()) { // an idle worker: lease another host of the fleet
				q.fleetAskLocked(now)
				continue
			}
			at := time.Time{}
			if q.waiting.Len() > 0 {
				at = q.waiting.hosts[0].readyAt
			}
			if mayAsk {
				if askAt := q.fleet.askAtLocked(); at.IsZero() || askAt.Before(at) {
					at = askAt
				}
			}
			q.waitLocked(ctx, at)
			continue
		}
		qh := q.ready.pop()
		if len(qh.fifo) == 0 && qh.spilled == 0 && qh.leased { // its requests are in the fleet's frontier
			q.fleetTakeLocked(qh, now)
			continue
		}
		if len(qh.fifo) == 0 { // its requests are in the store
			q.refillLocked(qh, now)
			continue
		}
		h := q.p.residentHost(qh.key)
		if h == nil { // evicted since it was promoted
			q.restoreLocked(qh)
			continue
		}
		if q.p.cfg.robots && !q.p.robotsKnown(qh.fifo[0].URL, now) {
			qh.busy = true // no other worker takes this host until its robots.txt is read
			q.active++
			return task{d: qh.fifo[0], robots: true}, true
		}
		d := qh.fifo[0]
		qh.fifo[0] = DeferredRequest{}
		qh.fifo = qh.fifo[1:]
		q.inMem--
		var lease *fleetLease
		if d.Reason == queueFrontierReason {
			lease = q.fleet.leased[qh.key] // in the FIFO, so held: dropping the lease takes them out
		}
		// Its departure is admitted when it leaves (OnRequestHeaders); the host's next request cannot
		// go before an interval after it, so the host waits that long before it is read again.
		_, _, iv := q.p.readyAt(h, now)
		qh.readyAt, qh.iv = now.Add(iv), iv
		q.placeLocked(qh)
		q.active++
		qh.sending++
		return task{d: d, lease: lease}, true
	}
}

// promoteLocked moves the hosts whose time has come from the waiting heap to the ready one, after
// checking with the pacer that they can depart now.
func (q *Queue) promoteLocked(now time.Time) {
	for q.waiting.Len() > 0 && !q.waiting.hosts[0].readyAt.After(now) {
		qh := q.waiting.hosts[0]
		h := q.p.residentHost(qh.key)
		if h == nil { // not in memory: its stored state is read first
			q.waiting.pop()
			q.restoreLocked(qh)
			continue
		}
		at, parked, iv := q.p.readyAt(h, now)
		if qh.parked && !parked {
			q.waiting.pop()
			q.absorbDeferredLocked(qh, now) // requests the pacer deferred while it was parked
			continue
		}
		qh.parked = parked
		if at.After(now) {
			qh.readyAt = at
			q.waiting.fix(qh)
			continue
		}
		q.waiting.pop()
		qh.work = time.Duration(len(qh.fifo)+qh.spilled) * max(iv, time.Millisecond)
		q.ready.push(qh)
	}
}

// fetchRobots reads the robots.txt of d's origin, through the pacer, with the collector's User-Agent.
func (q *Queue) fetchRobots(c *colly.Collector, d DeferredRequest) {
	u, err := url.Parse(d.URL)
	if err != nil {
		return
	}
	agent := d.Header.Get("User-Agent")
	if agent == "" {
		agent = c.UserAgent
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	_, _ = q.p.tryRobots(ctx, u, agent) // unreachable: the host is held until the next try, so this does not spin
}

// waitLocked releases the lock until something changes in the queue, until at (if not zero), or
// until ctx ends.
func (q *Queue) waitLocked(ctx context.Context, at time.Time) {
	wake := q.wake
	q.mu.Unlock()
	defer q.mu.Lock()
	var timer <-chan time.Time
	if !at.IsZero() {
		t := time.NewTimer(at.Sub(q.p.now()))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-wake:
	case <-timer:
	case <-ctx.Done():
	}
}
