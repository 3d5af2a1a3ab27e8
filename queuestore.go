package ext

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// The Queue's store I/O: spilled requests taken back, and requests the breaker deferred absorbed,
// always with the Queue's lock released.

// released runs do with the lock released, qh busy meanwhile (in no heap: no other worker takes it).
// The Queue's store I/O runs here, never under the lock.
func (q *Queue) released(qh *queueHost, do func()) {
	qh.busy = true
	q.mu.Unlock()
	do()
	q.mu.Lock()
	qh.busy = false
}

// restoreLocked brings qh's host into the pacer's memory (reading its stored state), then puts qh
// back among the hosts to schedule.
func (q *Queue) restoreLocked(qh *queueHost) {
	q.released(qh, func() { q.p.hostAt(qh.key, q.p.now()) })
	qh.readyAt = time.Time{}
	q.placeLocked(qh)
}

// refillLocked moves the oldest of qh's spilled requests back from the store, as many as the memory
// bound leaves room for, then puts qh back among the hosts to schedule (after a poll when the store
// failed).
func (q *Queue) refillLocked(qh *queueHost, now time.Time) {
	want := min(qh.spilled-qh.spilling, max(q.maxMem-q.inMem, 1)) // only what has landed
	if want <= 0 {
		q.placeLocked(qh)
		return
	}
	quiet, spills := qh.spilling == 0, qh.spills
	var got []DeferredRequest
	var err error
	q.released(qh, func() { got, err = q.p.takeSpilled(qh.key, want) })
	taken := len(got)
	if len(got) < want && (err == nil || errors.Is(err, ErrCorruptState)) && quiet && qh.spills == spills {
		// The store holds no more of this host's requests and no write overlapped the take: the rest
		// are gone (undecodable, or taken by another Queue on the store). Counted as such, or Run
		// would never end; takeSpilled audited the undecodable ones.
		if err == nil {
			q.notes = append(q.notes, auditEvent{at: q.p.now(), host: qh.key, event: audit.EventStateCorrupt, trigger: audit.TriggerStore, compliant: true,
				detail: fmt.Sprintf("queue refill: %d spilled requests are no longer in the store", qh.spilled-len(got))})
		}
		taken = qh.spilled
	}
	if err != nil && !errors.Is(err, ErrCorruptState) {
		qh.readyAt = now.Add(queuePoll) // the store failed: ask again later, not at once
	}
	qh.fifo = append(qh.fifo, got...)
	qh.spilled -= taken
	q.spilled -= taken
	q.inMem += len(got)
	q.placeLocked(qh)
}

// absorbDeferredLocked takes back into qh's FIFO the requests the pacer deferred for its host, then
// puts qh back among the hosts to schedule, ready at now. Colly marked their URLs visited when they
// were first requested: they go out as retries, as Drain sends them.
func (q *Queue) absorbDeferredLocked(qh *queueHost, now time.Time) {
	var got []DeferredRequest
	q.released(qh, func() { got, _ = q.p.takeDeferred(qh.key) })
	for i := range got {
		got[i].Ctx = maps.Clone(got[i].Ctx)
		if got[i].Ctx == nil {
			got[i].Ctx = map[string]string{}
		}
		got[i].Ctx[queueRetryKey] = "1"
	}
	qh.fifo = append(got, qh.fifo...)
	q.inMem += len(got)
	qh.parked, qh.readyAt = false, now
	q.placeLocked(qh)
}

// takeSpilled removes and returns up to limit of the requests a Queue spilled for host, oldest first,
// and audits a failure. With ErrCorruptState, the requests returned are those that could be decoded.
func (p *Pacer) takeSpilled(host string, limit int) ([]DeferredRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	got, err := p.deferStore.TakeSpilled(ctx, host, limit)
	switch {
	case errors.Is(err, ErrCorruptState):
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: p.now(), host: host, event: audit.EventStateCorrupt, trigger: audit.TriggerStore,
			compliant: true, detail: "queue refill: spilled requests that cannot be decoded are dropped: " + err.Error()})
	case err != nil:
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: p.now(), host: host, event: audit.EventStoreUnavailable, trigger: audit.TriggerStore,
			compliant: true, detail: "queue refill failed: " + err.Error()})
		return nil, err
	}
	return got, err
}
