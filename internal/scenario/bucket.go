package scenario

import "time"

// bucket is a token bucket with explicit time. The zero value is unusable: use newBucket.
// It is not safe for concurrent use; Host guards it with its mutex.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64 // capacity
	tokens float64 // at last
	last   time.Time
}

// newBucket returns a full bucket.
func newBucket(rate float64, burst int) bucket {
	return bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// refillAt adds the tokens earned up to now. A now earlier than the last call refills nothing.
func (b *bucket) refillAt(now time.Time) {
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}

// setRateAt refills the bucket at the old rate up to now, then changes the rate.
func (b *bucket) setRateAt(now time.Time, rate float64) {
	b.refillAt(now)
	b.rate = rate
}

// takeAt refills the bucket up to now and takes one token if there is one.
// A now earlier than the last call refills nothing.
func (b *bucket) takeAt(now time.Time) bool {
	b.refillAt(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
