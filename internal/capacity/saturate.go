package capacity

import (
	"math"
	"time"
)

// Saturating arithmetic on durations: a hostile header or a long crawl never wraps a delay negative.

const (
	maxDuration = time.Duration(math.MaxInt64)
	minDuration = time.Duration(math.MinInt64)
)

// satAdd is a + b, saturating at the largest and smallest durations.
func satAdd(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return maxDuration
	case a < 0 && b < 0 && s >= 0:
		return minDuration
	}
	return s
}

// satMul is d × f, saturating, and 0 for NaN.
func satMul(d time.Duration, f float64) time.Duration {
	x := float64(d) * f
	switch {
	case math.IsNaN(x):
		return 0
	case x >= float64(maxDuration): // float64(MaxInt64) is 2^63, one past the largest Duration
		return maxDuration
	case x <= float64(minDuration):
		return minDuration
	}
	return time.Duration(x)
}

// clampDuration is d within [lo, hi].
func clampDuration(d, lo, hi time.Duration) time.Duration {
	return max(min(d, hi), lo)
}

// satInc is n+1, saturating.
func satInc(n uint8) uint8 {
	if n == math.MaxUint8 {
		return n
	}
	return n + 1
}
