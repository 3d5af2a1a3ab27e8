package ext

import (
	"math"
	"time"
)

// Saturating duration arithmetic. Durations from outside (options, response headers, stored state)
// may be anything up to the largest Duration: sums and products of them saturate at the bounds
// instead of wrapping around to a negative wait.

// maxDuration and minDuration are the bounds of time.Duration.
const (
	maxDuration = time.Duration(math.MaxInt64)
	minDuration = time.Duration(math.MinInt64)
)

// satAdd returns a + b, saturated at the bounds of time.Duration.
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

// satMul returns d × f, saturated at the bounds of time.Duration; a NaN product is 0.
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
