package ext

import (
	"context"
	"math"

	"github.com/collypace/ext/internal/capacity"
)

// This file is a fleet member's side of the refusals a shared store pools (refusalPool) for the noise
// test: the latest count its admissions returned, the count a refusal is judged on, and the marks.

// fleetPool is what a member knows of the fleet's pooled refusals on a host (under the host's lock).
type fleetPool struct {
	counts capacity.Pool // from the admission of the fleet's departure seq
	seq    uint64
	// min is the fleet's number of the departure whose refusal this member last backed off for: a
	// count marked before it does not know that backoff yet (its mark is on its way), and the paces it
	// compares are not the ones the model left and took.
	min uint64
}

// poolOf is the pooled count an admission a returned, as the capacity model reads it (none when the
// mark is not below the departure's number: a store that does not pool, or a count started again).
func poolOf(a Admission) capacity.Pool {
	if a.PoolMark == 0 || a.PoolMark >= a.Seq {
		return capacity.Pool{}
	}
	return capacity.Pool{Mark: a.PoolMark,
		Before: capacity.PoolCounts{N: a.PoolBefore, Refused: a.PoolBeforeRefused},
		After:  capacity.PoolCounts{N: uint32(min(a.Seq-a.PoolMark, math.MaxUint32)), Refused: a.PoolAfterRefused}}
}

// keepPoolLocked keeps the pooled count of the latest admission here. A lower departure number than
// the last one's means the store lost its count (as for fleetSeq), its marks with it: this member's
// last mark is forgotten too.
func (h *host) keepPoolLocked(f fleetFacts) {
	if h.pool == nil {
		if f.pool.Mark == 0 {
			return
		}
		h.pool = &fleetPool{}
	}
	if f.seq < h.pool.seq {
		h.pool.min = 0
	}
	h.pool.counts, h.pool.seq = f.pool, f.seq
}

// poolSampleLocked is the pooled count a refusal of the fleet's departure seq is judged on: the latest
// count, with this refusal on its side of the mark (the store counts it once reported, after the
// model read it). None (Mark 0) when the count does not know this member's last backoff.
func (h *host) poolSampleLocked(seq uint64) capacity.Pool {
	if h.pool == nil || h.pool.counts.Mark < h.pool.min || seq == 0 {
		return capacity.Pool{}
	}
	c := h.pool.counts
	switch {
	case seq > h.pool.seq: // not in the count yet
	case seq > c.Mark:
		c.After.Refused++
	default:
		c.Before.Refused++
	}
	return c
}

// markPoolLocked records that this member backed off for the refusal of the fleet's departure seq:
// counts marked before it are not read until the mark reached the store.
func (h *host) markPoolLocked(seq uint64) {
	if h.pool == nil {
		h.pool = &fleetPool{}
	}
	h.pool.min = max(h.pool.min, seq)
}

// fleetPoolBackoff tells a store that pools refusals that the fleet's pace on h backed off (paced: for
// a Retry-After), before the backed-off model is written: a member that adopts it reads counts marked by it.
func (p *Pacer) fleetPoolBackoff(h *host, paced bool) {
	pool, ok := p.persist.shared.(refusalPool)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	start := p.now()
	if err := pool.PoolBackoff(ctx, h.key, paced); err != nil {
		p.storeStalled(h.key, "pool backoff", err, start, p.now())
	}
}
