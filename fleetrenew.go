package ext

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// This file is a Queue's heartbeat as a fleet member: renewing its leases, dropping those not
// renewed in time, shedding the hosts it holds beyond its share, and giving back what it took.

// fleetBeats is how many heartbeats a Queue sends per lease length: renewal well inside the lease, so
// that one late or lost heartbeat does not lose it.
const fleetBeats = 4

// renewLeases is the Queue's heartbeat: at once, then every quarter of the lease length until done is
// closed, it renews the Queue's leases and learns its share of the fleet's hosts. It drops the leases
// the frontier says are lost, and those not renewed for 7/12 of their length (before they run out on
// the store, so that this Queue stops sending before a next owner starts); it gives up the hosts it
// holds beyond its share (shedLocked), for the members under theirs to lease.
func (q *Queue) renewLeases(done <-chan struct{}) {
	f := q.fleet
	beat := max(f.ttl/fleetBeats, time.Millisecond)
	t := time.NewTimer(beat)
	defer t.Stop()
	for {
		q.mu.Lock()
		hosts := make([]string, 0, len(f.leased))
		for key := range f.leased {
			hosts = append(hosts, key)
		}
		q.mu.Unlock()
		start := q.p.now()
		// Bounded by a third of the lease, so that a hung store cannot keep this loop from dropping
		// the leases before they run out.
		ctx, cancel := context.WithTimeout(context.Background(), min(storeTimeout, max(f.ttl/3, time.Millisecond)))
		lost, until, share, err := f.f.FrontierRenew(ctx, f.owner, hosts)
		cancel()
		q.mu.Lock()
		now := q.p.now()
		if err == nil {
			f.share = share
			renewed := map[string]bool{}
			for _, key := range hosts {
				renewed[key] = true
			}
			for _, key := range lost {
				delete(renewed, key)
				if l, qh := f.leased[key], q.hosts[key]; l != nil && qh != nil {
					l.markLost("the frontier says this member no longer holds it (a renewal): it ran out, and may be another's")
					q.leaseLostLocked(qh, l, now)
				}
			}
			for key := range renewed {
				if l := f.leased[key]; l != nil {
					l.renewed(until, start, f.ttl)
				}
			}
		}
		q.dropUnrenewedLocked(now)
		var shed []*queueHost
		var acks map[string][]int64
		if err == nil {
			shed, acks = q.shedLocked(now)
		}
		wait := beat
		for _, l := range f.leased { // wake up in time to drop a lease not renewed
			wait = min(wait, max(time.Unix(0, l.end.Load()).Add(-f.ttl*5/12).Sub(now), 0)+time.Millisecond)
		}
		q.signalLocked()
		q.mu.Unlock()
		q.giveBack(shed, acks, now)
		q.reportFleet()
		t.Reset(wait)
		select {
		case <-done:
			return
		case <-t.C:
		}
		q.mu.Lock()
		q.dropUnrenewedLocked(q.p.now())
		q.mu.Unlock()
	}
}

// dropUnrenewedLocked drops the leases not renewed for 7/12 of their length, before they run out on
// the store: their next owner may send.
func (q *Queue) dropUnrenewedLocked(now time.Time) {
	f := q.fleet
	for key, l := range f.leased {
		if now.After(time.Unix(0, l.end.Load()).Add(-f.ttl * 5 / 12)) {
			if qh := q.hosts[key]; qh != nil {
				l.markLost("not renewed for 7/12 of its length: dropped before it runs out on the store")
				q.leaseLostLocked(qh, l, now)
			}
		}
	}
}

// shedLocked gives up, locally, the hosts this Queue holds beyond its share, among those with requests
// taken and nothing being sent (a departure on its way stays with its sender; a host whose taken
// requests are all sent may have nothing left, and is about to end its lease by itself): the ones with
// the fewest requests taken first, so that little goes back. It returns them, and the
// acknowledgements their requests still owe, for giveBack.
func (q *Queue) shedLocked(now time.Time) ([]*queueHost, map[string][]int64) {
	f := q.fleet
	excess := fleetExcess(len(f.leased), f.share)
	if excess == 0 {
		return nil, nil
	}
	var idle []*queueHost
	for key := range f.leased {
		if qh := q.hosts[key]; qh != nil && qh.sending == 0 && !qh.busy && len(qh.fifo) > 0 {
			idle = append(idle, qh)
		}
	}
	slices.SortFunc(idle, func(a, b *queueHost) int {
		return cmp.Or(cmp.Compare(len(a.fifo), len(b.fifo)), strings.Compare(a.key, b.key))
	})
	idle = idle[:min(excess, len(idle))]
	held := len(f.leased)
	acks := map[string][]int64{}
	for _, qh := range idle {
		if ids := f.acks[qh.key]; len(ids) > 0 {
			acks[qh.key] = ids
			delete(f.acks, qh.key)
		}
		q.dropLeaseLocked(qh)
		f.stats.Stolen++
		f.notes = append(f.notes, auditEvent{at: now, host: qh.key, event: audit.EventFleetHostStolen, trigger: audit.TriggerFleet, compliant: true,
			detail: fmt.Sprintf("queue: member %s gave the host up for a member under its share: it held %d hosts, its share %d", f.owner, held, f.share)})
	}
	return idle, acks
}

// fleetExcess is how many of held hosts a member gives up with the given share: those beyond it (none
// before its first heartbeat told it a share).
func fleetExcess(held, share int) int {
	if share <= 0 {
		return 0
	}
	return max(held-share, 0)
}

// giveBack marks acks done and releases hosts, each due again at its next departure by this pacer's
// schedule (the fleet's pacing holds across the handover), and emits the Queue's pending audit notes.
func (q *Queue) giveBack(hosts []*queueHost, acks map[string][]int64, now time.Time) {
	f := q.fleet
	q.mu.Lock()
	notes := q.takeNotesLocked()
	q.mu.Unlock()
	q.emitNotes(notes)
	if len(hosts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	for host, ids := range acks {
		_ = f.f.FrontierDone(ctx, host, ids)
	}
	for _, qh := range hosts {
		after := time.Duration(0)
		if h := q.p.residentHost(qh.key); h != nil {
			if at, _, _ := q.p.readyAt(h, now); at.After(now) {
				after = at.Sub(now)
			}
		}
		if err := f.f.FrontierRelease(ctx, f.owner, qh.key, after); err != nil {
			q.p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, host: qh.key, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore,
				compliant: true, detail: "queue: the host's lease could not be given back (the fleet takes it over when it runs out): " + err.Error()})
		}
	}
}

// releaseLeases gives every lease back when Run ends, and ends the Queue's heartbeat: the requests
// taken and not sent go back to the head of their host's queue in the frontier, and each host may be
// leased again at its next departure by this pacer's schedule. The member's figures go to the audit
// trail (fleet_member).
func (q *Queue) releaseLeases() {
	f := q.fleet
	q.mu.Lock()
	var hosts []*queueHost
	for key := range f.leased {
		if qh := q.hosts[key]; qh != nil {
			hosts = append(hosts, qh)
			q.dropLeaseLocked(qh)
		}
	}
	acks := f.acks
	f.acks = map[string][]int64{}
	q.mu.Unlock()
	now := q.p.now()
	q.giveBack(hosts, acks, now)
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = f.f.FrontierLeave(ctx, f.owner)
	q.reportFleet()
	st, _ := q.fleetStats()
	q.p.audit.emit(zerolog.InfoLevel, auditEvent{at: now, event: audit.EventFleetMember, trigger: audit.TriggerFleet, compliant: true, fleet: &st,
		detail: fmt.Sprintf("queue: member %s leased %d hosts, gave up %d over its share, took over %d, was handed %d requests again", st.Member, st.Leased, st.Stolen, st.TakenOver, st.Resent)})
}
