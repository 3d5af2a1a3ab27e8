package capacity

import "math"

// satInc is n+1, saturating.
func satInc(n uint8) uint8 { return satAdd(n, 1) }

// satAdd is n+k, saturating.
func satAdd(n, k uint8) uint8 {
	if n > math.MaxUint8-k {
		return math.MaxUint8
	}
	return n + k
}
