package capacity

import (
	"math"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// The queueing signal (TCP Vegas, Netflix concurrency-limits' Gradient2, Envoy's adaptive concurrency):
// a host's latency above its base latency is a queue, and when the crawler keeps several requests in
// flight the queue is of its own making, paid by every other visitor of the host. The model caps the
// requests in flight: the first response sets the cap at what the interval needs; each response that
// shows a queue takes one off it (Vegas's decrease by one: a single response's latency over-reads a
// queue that one request in several waited in, and a per-response bandwidth-delay product would cut a
// host with several workers to half); calm responses at the cap grow it by one. A cap cut below one
// the host held calm grows back to it after calmBeforeGrow responses; beyond it, each growth that
// formed a queue doubles the calm the next one needs, so a host whose workers are all in use is not
// queued again every few seconds, nor held at half its workers for minutes by one queued response.
const (
	// baseWindow is how long one window of the base latency (a minimum) lasts; the base is the minimum
	// of the current and the previous window, so it is measured again every baseWindow or two, as BBR
	// measures its minimum round trip again (one measured under load drifts up).
	baseWindow = 10 * time.Second
	// queueTolerance and queueSlack are how far above the base a latency must be to show a queue:
	// 20% and 5 ms, so the noise of a fast host (or of a loaded crawler) is not a queue.
	queueTolerance = 0.20
	queueSlack     = 5 * time.Millisecond
	// calmTolerance and calmSlack are how close to the base a latency must be to count as calm: what
	// grows the cap, and what a growth beyond the cap the host held must show (a queue of one request
	// behind several workers waits a fraction of a service time, below queueTolerance: such a
	// growth, held, would keep a queue at the host for good).
	calmTolerance = 0.10
	calmSlack     = 2 * time.Millisecond
	// calmBeforeGrow is how many responses without a queue, the cap in use, before the cap grows by one;
	// maxGrowMisses bounds its doubling (40 × 2⁴ = 640 responses).
	calmBeforeGrow = 40
	maxGrowMisses  = 4
)

// queueModel is one host's in-flight cap, learnt from its latency. The zero value knows nothing.
type queueModel struct {
	cur, prev uint32 // minimum latency of the current and the previous window, µs (0: none)
	curStart  int64  // unix ms the current window began
	limit     int16  // the in-flight cap (0: not learnt yet)
	calm      int16  // responses without a queue at the cap since it last moved; negative: the responses in a row that showed a queue
	best      int16  // the highest cap held calm for a growth's worth of responses: regrown to at once
	misses    uint8  // growths in a row beyond best that formed a queue
	grown     bool   // the cap last moved up: a queue now is that growth's
}

// capFor is the in-flight cap given the policy's maximum (ceiling): what the model learnt, the
// maximum until it learnt anything.
func (q *queueModel) capFor(ceiling int) int {
	if q.limit <= 0 {
		return ceiling
	}
	return min(int(q.limit), ceiling)
}

// base is the host's base latency: the minimum over the current and the previous window.
func (q *queueModel) base() time.Duration {
	b := q.cur
	if q.prev > 0 && (b == 0 || q.prev < b) {
		b = q.prev
	}
	return time.Duration(b) * time.Microsecond
}

// observe feeds a clean response's latency, sent with inFlight requests in flight to the host
// (itself included) when the departure interval was iv, at now. The first response sets the cap at
// what the interval needs to be kept (latency / interval, rounded up); a queue (latency above the
// base, several in flight; at a cap the host held calm before, in a cap's worth of responses in a row
// and one more: those in flight at once may all be read late by the crawler's own hiccup) takes
// one off what was in flight (a response sent with more in flight than the cap now allows was counted
// already), and a deep one (latency above twice the base) cuts the cap to the bandwidth-delay product
// at once; calm responses at the cap grow it by one. It reports whether the cap moved.
func (q *queueModel) observe(latency time.Duration, inFlight int, iv time.Duration, ceiling int, now time.Time) bool {
	us := uint32(min(max(latency.Microseconds(), 1), math.MaxUint32))
	first := q.cur == 0 && q.prev == 0
	ms := now.UnixMilli()
	if ms-q.curStart > baseWindow.Milliseconds() {
		q.prev, q.cur, q.curStart = q.cur, 0, ms
	}
	if q.cur == 0 || us < q.cur {
		q.cur = us
	}
	old := q.capFor(ceiling)
	base := q.base()
	queued := inFlight > 1 && latency > duration.Add(duration.Mul(base, 1+queueTolerance), queueSlack)
	steady := latency <= duration.Add(duration.Mul(base, 1+calmTolerance), calmSlack)
	if q.grown && inFlight > int(q.best) && !steady {
		queued = true // a growth beyond what the host held: any wait reads as the queue it formed
	}
	if !queued && q.calm < 0 {
		q.calm = 0 // the queue did not persist
	}
	switch {
	case first:
		need := 1
		if iv > 0 {
			need = int(min((latency+iv-1)/iv, time.Duration(ceiling)))
		}
		q.limit = int16(min(ceiling, max(need, 1), math.MaxInt16))
	case queued && old <= int(q.best) && -int(min(q.calm, 0)) < old:
		// A response that waited at a cap the host held calm before: a queue, or the crawler's own
		// hiccup (a loaded machine reads the responses in flight tens of milliseconds late, all at
		// once). A queue persists: it is read once a response sent after the first one that showed it
		// landed shows it too, the cap's worth of responses later (calm counts them, negative). A
		// growth beyond what the host held is cut at the first: that queue is expected.
		q.calm = min(q.calm, 0) - 1
	case queued:
		bdp := int(math.Ceil(float64(inFlight) * float64(base) / float64(latency)))
		next := inFlight - 1
		if latency > 2*base { // a deep queue: at once to the bandwidth-delay product, rounded up
			next = min(next, bdp)
		}
		if inFlight > old { // sent with more in flight than the cap now allows: its queue was cut already
			next = old
			if latency > 2*base { // unless deeper than that cut: not below its own product
				next = min(old, max(bdp, 1))
			}
		}
		if q.grown && next < old {
			q.misses = min(q.misses+1, maxGrowMisses)
		}
		if !q.grown && next < old && old <= int(q.best) {
			q.best = int16(old - 1) // a queue at a cap held before: the host takes less now
		}
		q.limit, q.grown = int16(max(next, 1)), false
		q.calm = min(q.calm, 0) - 1 // the queue's next responses cut too
	case inFlight >= old && old < ceiling && steady:
		need := calmBeforeGrow // back up to a cap held before: at once
		if old >= int(q.best) {
			need <<= q.misses // beyond it: each growth that formed a queue doubles the wait
		}
		if q.calm++; int(q.calm) >= need {
			if q.grown {
				q.misses = 0 // the last growth held: the host had more to give
			}
			q.best = int16(max(int(q.best), old))
			q.limit, q.calm = int16(min(old+1, math.MaxInt16)), 0
			q.grown = old+1 > int(q.best) // beyond what the host held: a queue now is this growth's
		}
	}
	return q.capFor(ceiling) != old
}
