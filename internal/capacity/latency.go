package capacity

import (
	"math"
	"slices"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// The latency signals: the rolling p95 a slow host is read from, the drain a bucket's rate is measured
// by, and the host's typical latency.

// latencyWindow is a ring of the latest latencies, in milliseconds (saturating at 65 s), to keep a
// tracked host small. Its p95 is computed again every p95Every samples, not at every response: a sort
// per response was the pacer's largest cost per request.
type latencyWindow struct {
	samples [latencyWindowSize]uint16
	n       uint8 // samples held, up to the window size
	next    uint8
	fresh   uint8 // samples still to add before p95ms is computed again (0: now; the zero window has none)
	p95ms   uint16
}

// p95Every is how many samples the cached p95 may lag behind.
const p95Every = 4

func (w *latencyWindow) add(d time.Duration) {
	w.samples[w.next] = uint16(min(max(d.Milliseconds(), 0), math.MaxUint16))
	w.next = (w.next + 1) % latencyWindowSize
	w.n = min(w.n+1, latencyWindowSize)
	w.fresh = max(w.fresh, 1) - 1
}

// p95 returns the 95th percentile of the window; ok is false until it holds minLatencySamples.
func (w *latencyWindow) p95() (time.Duration, bool) {
	n := int(w.n)
	if n < minLatencySamples {
		return 0, false
	}
	if w.fresh == 0 {
		var buf [latencyWindowSize]uint16
		s := buf[:n]
		copy(s, w.samples[:n])
		slices.Sort(s)
		w.p95ms, w.fresh = s[(n*95+99)/100-1], p95Every
	}
	return time.Duration(w.p95ms) * time.Millisecond, true
}

// observeLatency feeds a clean response's latency to the rolling p95 and multiplies the delay by 1.25
// when slowRun consecutive samples are above it while the crawler kept one request in flight (a queue
// of its own making is the queueing signal's, not a slow host's). It reports whether the delay went up.
func (a *Model) ObserveLatency(gen uint32, latency time.Duration, inFlight int, floor, ceiling time.Duration) bool {
	p95, ok := a.lat.p95()
	a.lat.add(latency)
	if !ok || inFlight > 1 || latency <= duration.Add(p95, max(duration.Mul(p95, slowMargin), minSlowMargin)) {
		a.slow = 0
		return false
	}
	a.slow++
	if a.slow < slowRun || gen != a.gen {
		return false
	}
	a.slow = 0
	return a.increase(duration.Mul(a.delay, slowFactor), floor, ceiling) > 0
}

// typicalLatency is how long the host's responses take: the rolling p95 once known, the base latency
// (the minimum) before that, 0 before any sample.
func (a *Model) TypicalLatency() time.Duration {
	if p95, ok := a.lat.p95(); ok {
		return max(p95, a.queue.base())
	}
	return a.queue.base()
}

// drain measures what a host sustains once it has refused: a token bucket is empty at a refusal, so
// what it accepts from then on is bounded by its rate, whatever its burst. sustained is the span from
// the last rate refusal (of the last drainWindow) to now, divided by the departures accepted since (hold
// time included: a bucket refills during it), or 0 when fewer than minDelivered are known. It restarts
// at every refusal, so a host whose capacity changed is not measured at its old one.
type drain struct {
	since int64 // unix nanoseconds of the last rate refusal (0: none)
	n     int32 // accepted since
}

func (d *drain) refused(now time.Time) {
	d.since, d.n = now.UnixNano(), 0
}

func (d *drain) accepted() {
	if d.since != 0 {
		d.n++
	}
}

func (d *drain) sustained(now time.Time) time.Duration {
	span := time.Duration(now.UnixNano() - d.since)
	if d.since == 0 || d.n < minDelivered || span > drainWindow {
		return 0
	}
	return span / time.Duration(d.n)
}
