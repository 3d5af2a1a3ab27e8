package ext

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/capacity"
	"github.com/rs/zerolog"
)

// This file is the pacer's side of a shared store: the fleet admits each departure (fencing a
// leased host's), learns the fleet's facts for the model, hears of the wire instant, and writes back
// what a store that lost its data no longer holds.

// fleetActive reports whether departures are admitted by a shared store. While it does not answer,
// departures wait for it (see fleetAdmit): they are never paced by one process alone.
func (p *Pacer) fleetActive() bool {
	return p.persist != nil && p.persist.shared != nil
}

// fleetReaskJitter spreads the re-asks of processes told to wait until the same instant, to save round
// trips: each asks up to this much after the store's answer, never before.
const fleetReaskJitter = 2 * time.Millisecond

// storeStallBound is how long admission may wait on a store that fails or answers slowly before the
// stall is named in the audit trail (store_unavailable, store_slow) and raised through WithAlert.
const storeStallBound = time.Second

// storeSlow is how long one admission may take before it counts as slow.
const storeSlow = 500 * time.Millisecond

// storeRetryFirst and storeRetryMax bound the backoff between the asks of a store that fails.
const (
	storeRetryFirst = 20 * time.Millisecond
	storeRetryMax   = 500 * time.Millisecond
)

// fleetFacts is what a shared store's admission says of the fleet's departures to a host (see
// Admission): this departure's number, the gap since the fleet's previous departure, and the number of
// the latest one reported as not an accepted page (refused, or a robots.txt read: fleetUncounted).
type fleetFacts struct {
	seq   uint64
	since time.Duration
	// span is how many of the fleet's departures this one stands for, itself included: those since this
	// process's previous departure to the host, when both were made in the same generation of the model
	// (the others' were paced by the model this one was) and none of them was reported refused (nor a
	// robots.txt read), up to maxFleetSpan; 1 otherwise. A clean
	// response counts as that many towards confirming the model's step, so a fleet confirms as fast as
	// one process would, not a member's share of its departures at a time (departLocked).
	span uint8
	// refusedSeq is the number of the fleet's latest departure reported refused or a robots.txt read
	// (0: none): a span holding it is 1, since such a departure confirms nothing.
	refusedSeq uint64
	pool       capacity.Pool // a pooling store's count of the fleet's refusals (refusalPool; Mark 0: none)
}

// afterUncounted reports whether the fleet's departure before this one was reported as not an accepted
// page: the gap since it is then not the gap since the host's last accepted request.
func (f fleetFacts) afterUncounted() bool { return f.seq > 1 && f.refusedSeq+1 == f.seq }

// maxFleetSpan bounds a fleet departure's span: the others' departures in it were paced by the same
// model but are not all answered yet, and a member that changed its model last paced its first one by
// the model before, so the span is a fleet's count of a few, not of any size.
const maxFleetSpan = 4

// fleetUncounted reports the fleet's departure res to the shared store as one the host did not count as
// an accepted page: a refusal, or a robots.txt read (whether the host's limiter counts it is unknown).
// The next admission then knows that the gap since the departure before it is not the gap since the
// host's last accepted request, only a lower bound of it. A store that fails is audited as any stall.
func (p *Pacer) fleetUncounted(h *host, res Reservation) {
	if !p.fleetActive() || res.facts.seq == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	start := p.now()
	var err error
	if pool, ok := p.persist.shared.(refusalPool); ok && !res.robots {
		err = pool.PoolRefused(ctx, h.key, res.facts.seq)
	} else {
		err = p.persist.shared.Refused(ctx, h.key, res.facts.seq)
	}
	if err != nil {
		p.storeStalled(h.key, "refused", err, start, p.now())
	}
}

// fleetAdmit asks the shared store whether a departure to h, spaced by gap from the fleet's previous
// one, may go now (by the store's clock). Without a shared store the local rule alone decides: ok.
// Otherwise it returns ok, or how long to wait before asking again and whether that wait is for
// another process's departure on its way to the wire (pending).
//
// A store that does not answer stops the fleet's departures until it does, rather than letting each
// process pace alone: N processes pacing alone would send N times the rate the host asked for, and a
// hold one of them learned would stop none of the others. The stall is audited (store_unavailable)
// and alerted once it lasts storeStallBound, and its end audited (store_recovered). An error about one
// host's record (ErrCorruptState: a key of another type, a field that does not parse) concerns that
// host only: the record is overwritten with this process's state, and the host asked again.
//
// A Queue's request taken from a fleet's frontier carries its lease in ctx (leaseFrom): the store
// admits it only while the lease holds (FrontierAdmit), and a lease found over, by the store or by
// this process's clock (before the ask, or once the answer is in: a pause meanwhile), refuses it with
// an error wrapping ErrLeaseLost (lost). Nothing departs under a lease that has passed to another
// member or run out.
func (p *Pacer) fleetAdmit(ctx context.Context, h *host, gap time.Duration, now time.Time) (wait time.Duration, ok, pending bool, facts fleetFacts, lost error) {
	if !p.fleetActive() {
		return 0, true, false, facts, nil
	}
	l := leaseFrom(ctx)
	frontier, fenced := p.persist.shared.(Frontier)
	if !fenced {
		l = nil // a lease from a frontier that does not admit: nothing to present it to
	}
	if l != nil {
		if holds, why := l.holds(now); !holds {
			return 0, false, false, facts, errLeaseLostFor(l, why)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	start := p.now()
	var a Admission
	var err error
	if l != nil {
		a, err = frontier.FrontierAdmit(sctx, l.lease(), gap)
	} else {
		a, err = p.persist.shared.Admit(sctx, h.key, gap)
	}
	end := p.now()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return 0, false, false, facts, nil // the wait ends on ctx: the caller sees it
	case errors.Is(err, ErrCorruptState):
		p.repairShared(h, err, end)
		return storeRetryFirst, false, false, facts, nil
	default:
		return p.storeStalled(h.key, "admit", err, start, end), false, false, facts, nil
	}
	if a.LeaseLost {
		why := fmt.Sprintf("the store refused a departure under it: it ran out unrenewed (the host's fence %d)", a.Fence)
		if a.Fence > l.token {
			why = fmt.Sprintf("the store refused a departure under it: the host was leased to another member since (the host's fence %d)", a.Fence)
		}
		l.markLost(why)
		_, why = l.holds(end)
		return 0, false, false, facts, errLeaseLostFor(l, why)
	}
	if end.Sub(start) > storeSlow {
		p.storeStalled(h.key, "admit", nil, start, end)
	} else {
		p.storeRecovered(h.key, end)
	}
	if a.Lost {
		p.writeBack(end)
	}
	h.mu.Lock()
	// The store keeps the newest model it was given, and an adaptive delay once given one: with an
	// older model, or none, it no longer holds the state last written (its key expired, was evicted or
	// deleted), which the next flush writes again.
	forgotten := h.saved != nil && (a.ModelVersion < h.saved.st.ModelVersion || a.AdaptiveDelay == 0 && h.saved.st.AdaptiveDelay > 0)
	if forgotten {
		h.saved = nil
	}
	if a.ModelVersion > h.delay.Version() {
		h.delay.Adopt(a.AdaptiveDelay, a.KnownLimit, a.RefusedInterval, a.ModelVersion, h.policy.BaseDelay, h.policy.MaxDelay)
	}
	var noiseEv auditEvent
	model := h.delay.Bounds()
	noiseAdopted := h.delay.AdoptVerdict(a.Noise, h.policy.BaseDelay, h.policy.MaxDelay)
	moved := h.delay.Bounds() != model
	if moved {
		// Noise mode brought the delay down: a change of the fleet's model, written through (the
		// fleet's stored delay spaces every process's departures).
		h.delay.Stamp(end)
	}
	if noiseAdopted {
		noiseEv = h.adoptedNoiseEventLocked(a.Noise, "another process of the fleet", end)
	}
	h.mu.Unlock()
	if forgotten {
		h.markDirty(p)
	}
	if moved {
		p.persistNow(h)
	}
	if noiseAdopted {
		p.audit.emit(zerolog.InfoLevel, noiseEv)
	}
	if a.OK && l != nil {
		if holds, why := l.holds(p.now()); !holds { // over while the answer was on its way (a pause)
			p.fleetWired(h, now, now) // not a departure: the store must not hold the fleet for it
			return 0, false, false, facts, errLeaseLostFor(l, why)
		}
	}
	if a.OK {
		return 0, true, false, fleetFacts{seq: a.Seq, since: a.Since, refusedSeq: a.RefusedSeq, pool: poolOf(a)}, nil
	}
	return a.Wait + time.Duration(p.cfg.random()*float64(fleetReaskJitter)), false, a.Pending, facts, nil
}

// auditWireWait names, in the audit trail, a departure that waited for another process's departure
// to reach the wire (a slow dial, a stall, or a process that died on its way: then up to 30 s).
func (p *Pacer) auditWireWait(h *host, waited time.Duration, now time.Time) {
	p.audit.emit(zerolog.InfoLevel, auditEvent{at: now, host: h.key, event: audit.EventFleetWireWait, trigger: audit.TriggerStore,
		base: h.policy.BaseDelay, computed: waited, compliant: true,
		detail: fmt.Sprintf("waited %v for another process's departure to reach the wire", waited)})
}

// repairShared overwrites h's record in the shared store, which could not be read (err), with this
// process's state: the fleet's other hosts are not concerned.
func (p *Pacer) repairShared(h *host, err error, now time.Time) {
	p.auditState(h, audit.EventStateCorrupt, "admission: "+err.Error()+"; the host's record is overwritten with this process's state", now)
	st := h.snapshot(now)
	st.Replace = true
	p.save([]StoredHost{st}, now)
}

// writeBack writes every host state this process knows to the store, which came back empty (a
// server restarted without its data): the holds and intervals it learned stop the other processes
// again.
func (p *Pacer) writeBack(now time.Time) {
	var states []StoredHost
	p.hosts.Range(func(h *host) {
		select {
		case <-h.ready:
			states = append(states, h.snapshot(now))
		default: // still being restored: it has nothing to write back yet
		}
	})
	detail := fmt.Sprintf("the store lost its state (a server restarted empty): %d host states written back", len(states))
	if len(states) > 0 {
		if err := p.save(states, now); err != nil {
			detail += " failed: " + err.Error() + " (written again at the next flush)"
		}
	}
	p.audit.emit(zerolog.WarnLevel, auditEvent{at: now, event: audit.EventStoreRecovered, trigger: audit.TriggerStore, compliant: true, detail: detail})
}

// lostCheckInterval is how often a pacer on a shared store checks whether the store lost its state,
// so that a process that departs nowhere (all its hosts held) writes its holds back too. The store
// admits nothing for several times this long after it finds itself empty (see SharedStore.CheckLost).
const lostCheckInterval = 200 * time.Millisecond

// checkLost writes every state back when the shared store lost what it held.
func (p *Pacer) checkLost() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if lost, err := p.persist.shared.CheckLost(ctx); err == nil && lost {
		p.writeBack(p.now())
	}
}

// fleetWireSlack is how much later than its admission a fleet departure may reach the wire before the
// shared store is told the wire instant: a request's headers are normally written within microseconds.
const fleetWireSlack = time.Millisecond

// wireAtAdmissionStore is a SharedStore that ends a pending departure whose wire instant is its
// admission's at less cost than Departed (redisstore: plain commands, no script). Unexported, as
// sessionStore: a store implements its method, no user calls it.
type wireAtAdmissionStore interface {
	SharedStore
	// DepartedAtAdmission is Departed with the ago of the departure's admission: it ends host's pending
	// departure, and the last departure stays the admitted one.
	DepartedAtAdmission(ctx context.Context, host string) error
}

// fleetWired ends the pending departure of h the store admitted at admitted: it reached the wire at at
// (or never will: at is then admitted), so that no process departs within an interval of the wire
// instant. It runs in the background: the store's answer does not hold up the request, and the other
// processes wait meanwhile (the departure is pending). A store that fails is asked again, for as long
// as the departure would stay pending, so that an outage does not leave the host held after it.
func (p *Pacer) fleetWired(h *host, admitted, at time.Time) {
	if at.Sub(admitted) <= fleetWireSlack {
		at = admitted
	}
	atAdmission := p.persist.atAdmission
	if !at.Equal(admitted) {
		atAdmission = nil
	}
	go func() {
		for backoff := storeRetryFirst; ; backoff = min(2*backoff, storeRetryMax) {
			ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
			start := p.now()
			var err error
			if atAdmission != nil {
				err = atAdmission.DepartedAtAdmission(ctx, h.key)
			} else {
				err = p.persist.shared.Departed(ctx, h.key, start.Sub(at))
			}
			cancel()
			if err == nil {
				return
			}
			now := p.now()
			p.storeStalled(h.key, "departed", err, start, now)
			if now.Sub(admitted) > maxWireWait {
				return // the store no longer holds it pending
			}
			select {
			case <-time.After(backoff):
			case <-p.persist.stop:
				return
			}
		}
	}()
}
