package ext

import (
	"testing"

	"github.com/collypace/ext/internal/capacity"
)

// Issue 32: a fleet member judges a refusal on the fleet's latest pooled count, with the refusal on
// its side of the mark, and never on a count that does not know its own last backoff yet (the paces
// compared would not be the ones its model left and took).
func TestFleetPoolSample(t *testing.T) {
	var h host
	h.keepPoolLocked(fleetFacts{seq: 30, pool: capacity.Pool{Mark: 20, Before: capacity.PoolCounts{N: 12, Refused: 4}, After: capacity.PoolCounts{N: 10, Refused: 2}}})
	if got := h.poolSampleLocked(25); got.After.Refused != 3 || got.Before.Refused != 4 || got.After.N != 10 {
		t.Errorf("refusal of departure 25, after the mark at 20: %+v, want it counted after (3 of 10)", got)
	}
	if got := h.poolSampleLocked(18); got.Before.Refused != 5 || got.After.Refused != 2 {
		t.Errorf("refusal of departure 18, before the mark: %+v, want it counted before (5 of 12)", got)
	}
	if got := h.poolSampleLocked(31); got.After.Refused != 2 {
		t.Errorf("refusal of departure 31, not in the count yet: %+v, want the count as read", got)
	}
	h.markPoolLocked(29) // this member backed off for departure 29: its mark is on its way
	if got := h.poolSampleLocked(30); got.Mark != 0 {
		t.Errorf("count marked at 20 after a backoff here at 29: %+v, want none read", got)
	}
	h.keepPoolLocked(fleetFacts{seq: 33, pool: capacity.Pool{Mark: 31, Before: capacity.PoolCounts{N: 11, Refused: 3}, After: capacity.PoolCounts{N: 2}}})
	if got := h.poolSampleLocked(32); got.Mark != 31 || got.After.Refused != 1 {
		t.Errorf("count marked at 31, after the backoff here: %+v, want it read with the refusal after", got)
	}
	h.markPoolLocked(33)
	h.keepPoolLocked(fleetFacts{seq: 1}) // a lower number: the store lost its count and its marks
	if got := h.poolSampleLocked(1); got.Mark != 0 {
		t.Errorf("after the store lost its count: %+v, want none read until a mark", got)
	}
	h.keepPoolLocked(fleetFacts{seq: 9, pool: capacity.Pool{Mark: 5, Before: capacity.PoolCounts{N: 5, Refused: 2}, After: capacity.PoolCounts{N: 4, Refused: 1}}})
	if got := h.poolSampleLocked(8); got.Mark != 5 {
		t.Errorf("the store's first mark after its loss: %+v, want it read (this member's last mark was lost with it)", got)
	}
}
