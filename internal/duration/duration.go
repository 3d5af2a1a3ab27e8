// Package duration is saturating arithmetic on time.Duration. Durations from outside (options,
// response headers, stored state) may be anything up to the largest Duration: sums and products of
// them saturate at the bounds instead of wrapping around to a negative wait.
package duration

import (
	"math"
	"time"
)

// Max and Min are the bounds of time.Duration.
const (
	Max = time.Duration(math.MaxInt64)
	Min = time.Duration(math.MinInt64)
)

// Add returns a + b, saturated at the bounds of time.Duration.
func Add(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return Max
	case a < 0 && b < 0 && s >= 0:
		return Min
	}
	return s
}

// Mul returns d × f, saturated at the bounds of time.Duration; a NaN product is 0.
func Mul(d time.Duration, f float64) time.Duration {
	x := float64(d) * f
	switch {
	case math.IsNaN(x):
		return 0
	case x >= float64(Max): // float64(MaxInt64) is 2^63, one past the largest Duration
		return Max
	case x <= float64(Min):
		return Min
	}
	return time.Duration(x)
}
