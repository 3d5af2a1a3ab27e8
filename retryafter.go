package ext

import (
	"time"

	"github.com/collypace/ext/internal/duration"
)

// The pacer's side of Retry-After: internal/retryafter parses the field into a wait; how long that
// wait then holds the host is decided here.

// retryAfterHold is how long a Retry-After wait holds the host: the wait plus buffer × wait,
// saturated at the largest Duration.
func retryAfterHold(wait time.Duration, buffer float64) time.Duration {
	return duration.Add(wait, duration.Mul(wait, buffer))
}
