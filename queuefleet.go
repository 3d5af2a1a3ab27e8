package ext

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// A Queue on a shared store that implements Frontier crawls the fleet's frontier: every request it is
// given goes to the frontier (deduplicated there by its key), and its workers crawl the hosts it
// leases, one owner per host at a time. Each leased host's requests are taken in batches into its
// local FIFO and dispatched by the pacer's schedule as any other; each is marked done once sent; the
// leases are renewed while the Queue runs and given back when Run returns. A lease lost (not renewed
// in time) drops the host's local requests: the next owner is handed them. Each lease is fenced: every
// departure taken under it presents its token and its end to the store's admission (FrontierAdmit),
// which refuses it once the lease has passed to another member or run out, so that a member paused
// past its lease (a process cannot see its own pause) sends nothing more to the host.

// fleetTakeBatch is how many requests a Queue takes from a leased host's queue at a time.
const fleetTakeBatch = 16

// fleetAskPoll bounds how long a Queue with idle workers waits before asking the frontier for hosts
// again when none could be leased (the others hold them, or none is due yet).
const fleetAskPoll = 100 * time.Millisecond

// A member that holds its share of the fleet's hosts and was granted none at its last ask (the others
// hold theirs) asks again no sooner than the frontier's next host is due (a host whose lease runs out
// unrenewed: its member died) or one heartbeat later (which tells it its share), instead of every
// fleetAskPoll: a lease ask is a script that reads the schedule and the members. It asks at once when it
// holds fewer than its share: a heartbeat found its share grown, or a host of its own ended.

// fleetLoadShare is the share of its workers' time a Queue commits to the hosts it leases: it leases
// another host only while the estimated load of those it holds (time a request takes ÷ interval,
// summed) stays under it, so that the hosts of an overcommitted process do not fall behind while
// others idle.
const fleetLoadShare = 0.75

// queueFrontierReason marks, in a Queue's FIFO, a request taken from the frontier: done once sent.
const queueFrontierReason = "frontier"

// frontierRedelivered is the Reason a Frontier gives a request it hands out again (see Frontier).
const frontierRedelivered = "redelivered"

// queueFleet is a Queue's part of a fleet's frontier. Its fields are protected by the Queue's lock.
type queueFleet struct {
	f        Frontier
	owner    string                   // names this Queue's leases and heartbeat
	ttl      time.Duration            // a lease's length
	leased   map[string]*fleetLease   // hosts held → their lease
	acks     map[string][]int64       // done requests whose FrontierDone failed: sent again
	asking   bool                     // a worker asks the frontier for hosts
	askAt    time.Time                // no ask before
	quietTo  time.Time                // holding its share, no ask before (see askAtLocked)
	left     int                      // the fleet's requests left, at the last ask
	looked   bool                     // the last ask started after the last local change
	cost     map[string]time.Duration // hosts held → a request's time, smoothed
	share    int                      // this member's share of the hosts, at the last heartbeat (0: none yet)
	stats    audit.FleetStats         // what this member leased, gave up, lost, took over and was handed again
	notes    []auditEvent             // fleet events to emit at info level once the lock is released
	warnings []auditEvent             // fleet events to emit at warn level (a lease lost)
}

// fleetFigures is a member's figures, as the audit trail writes them.
type fleetFigures = audit.FleetStats

// fleetObserver is an Observer that is also told a fleet member's figures (pacemetrics' Collector is):
// at each heartbeat of the member's Queue, and when its Run ends.
type fleetObserver interface {
	FleetChanged(audit.FleetStats)
}

// fleetStats returns the Queue's figures as a member of a fleet; ok is false for a Queue that is not
// on a fleet's frontier.
func (q *Queue) fleetStats() (st audit.FleetStats, ok bool) {
	if q.fleet == nil {
		return audit.FleetStats{}, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	st = q.fleet.stats
	st.Member, st.Held, st.Share = q.fleet.owner, len(q.fleet.leased), q.fleet.share
	return st, true
}

// reportFleet tells the pacer's Observer the member's figures, when it listens (fleetObserver).
func (q *Queue) reportFleet() {
	if o, ok := q.p.cfg.observer.(fleetObserver); ok {
		st, _ := q.fleetStats()
		o.FleetChanged(st)
	}
}

// fleetFallbackTTL is the lease length a Queue assumes of a Frontier whose FrontierTTL is not positive.
const fleetFallbackTTL = 2 * time.Second

func newQueueFleet(f Frontier) *queueFleet {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ttl := f.FrontierTTL()
	if ttl <= 0 {
		ttl = fleetFallbackTTL
	}
	return &queueFleet{f: f, owner: hex.EncodeToString(b[:]), ttl: ttl, leased: map[string]*fleetLease{},
		acks: map[string][]int64{}, cost: map[string]time.Duration{}}
}

// frontierKey is the key by which the frontier deduplicates d: its URL for a GET without a body; the
// method, URL and the body's SHA-256 otherwise.
func frontierKey(d DeferredRequest) string {
	if (d.Method == "" || d.Method == http.MethodGet) && len(d.Body) == 0 {
		return d.URL
	}
	sum := sha256.Sum256(d.Body)
	return d.Method + " " + d.URL + " " + hex.EncodeToString(sum[:])
}

// fleetAdd queues d in the frontier, and reports whether it was new there; a retry (queueRetryKey) is
// queued even though its key was.
func (q *Queue) fleetAdd(d DeferredRequest) (bool, error) {
	force := d.Ctx[queueRetryKey] != ""
	d.DeferredAt = q.p.now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	n, err := q.fleet.f.FrontierAdd(ctx, d.Host, []DeferredRequest{q.p.storable(d)}, []string{frontierKey(d)}, force)
	if err == nil {
		q.mu.Lock()
		q.fleet.looked = false
		q.fleet.quietTo = time.Time{} // its share may have grown
		q.signalLocked()              // an idle worker may ask for the host
		q.mu.Unlock()
	}
	return n > 0, err
}

// fleetDoneLocked reports whether the fleet's frontier was found empty, with nothing held here, since
// the last local change (a Queue without a fleet: true).
func (q *Queue) fleetDoneLocked() bool {
	f := q.fleet
	return f == nil || len(f.leased) == 0 && f.left == 0 && f.looked && !f.asking
}

// fleetMayAskLocked reports whether an idle worker may ask the frontier for hosts, once askAt has
// come: nobody asks, and the hosts held leave room (fleetLoadShare).
func (q *Queue) fleetMayAskLocked() bool {
	f := q.fleet
	if f == nil || f.asking {
		return false
	}
	var load float64
	for key := range f.leased {
		if qh := q.hosts[key]; qh != nil && qh.iv > 0 {
			load += float64(f.cost[key]) / float64(qh.iv)
		}
	}
	return load < fleetLoadShare*float64(q.workers)
}

// askAtLocked is when an idle worker may next ask the frontier for hosts: askAt, or, while the member
// holds its share (by its last heartbeat), quietTo when later.
func (f *queueFleet) askAtLocked() time.Time {
	if f.share > 0 && len(f.leased) >= f.share && f.quietTo.After(f.askAt) {
		return f.quietTo
	}
	return f.askAt
}

// fleetAskLocked asks the frontier for hosts, with the lock released meanwhile, and puts those leased
// among the hosts to schedule. When none is leased, the next ask waits for the next host's time, at
// most fleetAskPoll.
func (q *Queue) fleetAskLocked(now time.Time) {
	f := q.fleet
	f.asking = true
	f.looked = true
	want := max(q.workers-q.active, 1)
	held := make([]string, 0, len(f.leased))
	for key := range f.leased {
		held = append(held, key)
	}
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	leases, takenOver, left, next, err := f.f.FrontierLease(ctx, f.owner, want, held)
	cancel()
	q.mu.Lock()
	f.asking = false
	if err != nil {
		f.looked = false
		f.askAt = now.Add(fleetAskPoll)
		q.notes = append(q.notes, auditEvent{at: now, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore, compliant: true,
			detail: "queue: the fleet's frontier could not be asked for hosts: " + err.Error()})
		return
	}
	f.left = left
	if len(leases) == 0 {
		f.askAt = now.Add(min(max(next, time.Millisecond), fleetAskPoll))
		if f.share > 0 && len(f.leased) >= f.share {
			f.quietTo = now.Add(min(max(next, time.Millisecond), max(f.ttl/fleetBeats, fleetAskPoll)))
		}
	}
	for _, l := range leases {
		if old := f.leased[l.Host]; old != nil { // granted anew: the old token no longer holds
			old.markLost("the host was leased to this member again")
		}
		f.leased[l.Host] = newFleetLease(l, now, f.ttl)
		qh := q.hostLocked(l.Host)
		qh.leased, qh.drained = true, false
		qh.readyAt = time.Time{}
		q.placeLocked(qh)
	}
	f.stats.Leased += int64(len(leases))
	f.stats.TakenOver += int64(len(takenOver))
	for _, key := range takenOver {
		f.notes = append(f.notes, auditEvent{at: now, host: key, event: audit.EventFleetHostTakenOver, trigger: audit.TriggerFleet, compliant: true,
			detail: "queue: member " + f.owner + " took the host over: its previous lease ran out unrenewed (its member died or lost the store)"})
	}
	q.signalLocked()
}

// fleetTakeLocked takes a batch of qh's requests from the frontier, with the lock released meanwhile.
// With none taken while the lease holds, qh waits for its requests being sent (drained); a lease the
// frontier ended (nothing left) or lost is dropped here.
func (q *Queue) fleetTakeLocked(qh *queueHost, now time.Time) {
	f := q.fleet
	want := min(fleetTakeBatch, max(q.maxMem-q.inMem, 1))
	var got []DeferredRequest
	var held bool
	var err error
	q.released(qh, func() {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		got, held, err = f.f.FrontierTake(ctx, f.owner, qh.key, want)
		cancel()
	})
	if errors.Is(err, ErrLeaseLost) { // the lease passed to another member, or ran out
		if l := f.leased[qh.key]; l != nil {
			l.markLost("the frontier says this member no longer holds it (a take)")
			q.leaseLostLocked(qh, l, now)
		}
		return
	}
	if err != nil && len(got) == 0 && !held {
		if _, still := f.leased[qh.key]; still { // the store failed: ask again later, not at once
			q.notes = append(q.notes, auditEvent{at: now, host: qh.key, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore,
				compliant: true, detail: "queue: taking the host's requests from the fleet's frontier failed: " + err.Error()})
			qh.readyAt = now.Add(queuePoll)
			q.placeLocked(qh)
			return
		}
	}
	for i := range got {
		if got[i].Reason == frontierRedelivered {
			f.stats.Resent++ // its first taker may have sent it: Colly marked it visited
			got[i].Ctx = maps.Clone(got[i].Ctx)
			if got[i].Ctx == nil {
				got[i].Ctx = map[string]string{}
			}
			got[i].Ctx[queueRetryKey] = "1"
		}
		got[i].Reason = queueFrontierReason
	}
	if _, still := f.leased[qh.key]; !still { // lost meanwhile (renewal): they are the next owner's
		return
	}
	qh.fifo = append(qh.fifo, got...)
	q.inMem += len(got)
	if !held {
		q.dropLeaseLocked(qh)
		return
	}
	if len(got) == 0 && qh.sending == 0 {
		// Nothing queued, nothing being sent here, yet requests handed out and not done (a mark that
		// failed, a take whose reply was lost): given back, for whoever leases the host next.
		ids := f.acks[qh.key]
		delete(f.acks, qh.key)
		q.released(qh, func() {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			defer cancel()
			_ = f.f.FrontierDone(ctx, qh.key, ids)
			_ = f.f.FrontierRelease(ctx, f.owner, qh.key, 0)
		})
		q.dropLeaseLocked(qh)
		return
	}
	qh.drained = len(got) == 0
	q.placeLocked(qh)
}

// dropLeaseLocked forgets qh's lease here (nothing more departs under it): its requests taken from the
// frontier leave its FIFO (the frontier hands them to the next owner, or holds them for this one's
// release). It returns how many left.
func (q *Queue) dropLeaseLocked(qh *queueHost) int {
	if l := q.fleet.leased[qh.key]; l != nil {
		l.markLost("given up by this member")
	}
	delete(q.fleet.leased, qh.key)
	delete(q.fleet.cost, qh.key)
	qh.leased, qh.drained = false, false
	kept := qh.fifo[:0]
	for _, d := range qh.fifo {
		if d.Reason == queueFrontierReason {
			q.inMem--
			continue
		}
		kept = append(kept, d)
	}
	clear(qh.fifo[len(kept):])
	back := len(qh.fifo) - len(kept)
	qh.fifo = kept
	q.fleet.looked = false
	if len(qh.fifo)+qh.spilled == 0 && qh.heap != nil {
		qh.heap.remove(qh)
	}
	return back
}

// leaseLostLocked drops qh's lease l, which no longer holds (l says why), when it is still the one
// held here, and notes fleet_lease_lost: the host, the token, why, and what went back to the frontier
// for the host's next holder (the requests taken and not sent; those on their way go out only if
// their admission came before the loss, and are refused there otherwise).
func (q *Queue) leaseLostLocked(qh *queueHost, l *fleetLease, now time.Time) {
	f := q.fleet
	if f.leased[qh.key] != l {
		return // dropped already, and said so
	}
	why := "lost"
	if w := l.lost.Load(); w != nil {
		why = *w
	}
	sending := qh.sending
	back := q.dropLeaseLocked(qh)
	f.stats.Lost++
	f.warnings = append(f.warnings, auditEvent{at: now, host: qh.key, event: audit.EventFleetLeaseLost, trigger: audit.TriggerFleet, compliant: true,
		givenBack: back, detail: fmt.Sprintf("queue: member %s lost its lease of the host (token %d): %s; it sends nothing more there: %d requests it had taken go back to the frontier for the next holder, %d on their way are sent only if admitted before the loss",
			f.owner, l.token, why, back, sending)})
}

// fleetSent marks d, taken from the frontier, done (or keeps it for the next try when the store
// fails), and notes how long its request took, for the load estimate.
func (q *Queue) fleetSent(d DeferredRequest, took time.Duration) {
	f := q.fleet
	q.mu.Lock()
	ids := append(f.acks[d.Host], d.ID)
	delete(f.acks, d.Host)
	if f.leased[d.Host] != nil {
		if c := f.cost[d.Host]; c > 0 {
			f.cost[d.Host] = (3*c + took) / 4
		} else {
			f.cost[d.Host] = took
		}
	}
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	err := f.f.FrontierDone(ctx, d.Host, ids)
	cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	f.looked = false
	if err != nil {
		f.acks[d.Host] = append(f.acks[d.Host], ids...)
		q.notes = append(q.notes, auditEvent{at: q.p.now(), host: d.Host, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore, compliant: true,
			detail: fmt.Sprintf("queue: marking %d requests done in the fleet's frontier failed (tried again with the next): %v", len(ids), err)})
	}
}

// fleetSize is the fleet's count of requests queued or handed out, with those this Queue holds outside
// the frontier; the local count when the store does not answer.
func (q *Queue) fleetSize() int {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	n, err := q.fleet.f.FrontierSize(ctx)
	cancel()
	q.mu.Lock()
	defer q.mu.Unlock()
	local := q.spilled
	for _, qh := range q.hosts {
		for _, d := range qh.fifo {
			if d.Reason != queueFrontierReason {
				local++
			}
		}
	}
	if err != nil {
		return q.inMem + q.spilled
	}
	return n + local
}

// queueNotes are the audit events a Queue noted under its lock, by level, for emitNotes.
type queueNotes struct{ errs, warns, infos []auditEvent }

// takeNotesLocked takes the audit events noted under the lock: failures, and the fleet's events.
func (q *Queue) takeNotesLocked() queueNotes {
	var n queueNotes
	n.errs, q.notes = q.notes, nil
	if q.fleet != nil {
		n.warns, q.fleet.warnings = q.fleet.warnings, nil
		n.infos, q.fleet.notes = q.fleet.notes, nil
	}
	return n
}

// emitNotes writes what takeNotesLocked took, with the lock released.
func (q *Queue) emitNotes(n queueNotes) {
	for _, e := range n.errs {
		q.p.audit.emit(zerolog.ErrorLevel, e)
	}
	for _, e := range n.warns {
		q.p.audit.emit(zerolog.WarnLevel, e)
	}
	for _, e := range n.infos {
		q.p.audit.emit(zerolog.InfoLevel, e)
	}
}
