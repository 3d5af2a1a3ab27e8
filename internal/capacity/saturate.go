package capacity

import "math"

// satInc is n+1, saturating.
func satInc(n uint8) uint8 {
	if n == math.MaxUint8 {
		return n
	}
	return n + 1
}
