package ext

import (
	"math"
	"time"
)

// The queueing signal (TCP Vegas, Netflix concurrency-limits' Gradient2, Envoy's adaptive concurrency):
// a host's latency above its base latency is a queue, and when the crawler keeps several requests in
// flight the queue is of its own making, paid by every other visitor of the host. The model caps the
// requests in flight at the bandwidth-delay product, in flight × base latency / latency (Little's law),
// plus a little headroom.
const (
	// baseWindow is how long one window of the base latency (a minimum) lasts; the base is the minimum
	// of the current and the previous window, so it is measured again every baseWindow or two, as BBR
	// measures its minimum round trip again (one measured under load drifts up).
	baseWindow = 10 * time.Second
	// queueTolerance and queueSlack are how far above the base a latency must be to show a queue:
	// 20% and 5 ms, so the noise of a fast host (or of a loaded crawler) is not a queue.
	queueTolerance = 0.20
	queueSlack     = 5 * time.Millisecond
	// capHeadroom is the headroom on the bandwidth-delay product: 10%, rounded down, so one worker
	// gets one request, ten get eleven.
	capHeadroom = 0.10
	// calmBeforeGrow is how many responses without a queue, the cap in use, before the cap grows by one.
	calmBeforeGrow = 40
)

// queueModel is one host's in-flight cap, learnt from its latency. The zero value knows nothing.
type queueModel struct {
	cur, prev uint32 // minimum latency of the current and the previous window, µs (0: none)
	curStart  int64  // unix ms the current window began
	limit     int32  // the in-flight cap (0: not learnt yet)
	calm      int32  // responses without a queue at the cap since it last moved
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
// base) caps it at the bandwidth-delay product; calm responses at the cap grow it by one. It reports
// whether the cap moved.
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
	switch {
	case first:
		need := 1
		if iv > 0 {
			need = int(min((latency+iv-1)/iv, time.Duration(ceiling)))
		}
		q.limit = int32(min(ceiling, max(need, 1)))
	case inFlight > 1 && latency > satAdd(satMul(base, 1+queueTolerance), queueSlack):
		bdp := float64(inFlight) * float64(base) / float64(latency)
		q.limit = int32(max(min(ceiling, int(bdp*(1+capHeadroom)), old), 1))
		q.calm = 0
	case inFlight >= old && old < ceiling:
		if q.calm++; q.calm >= calmBeforeGrow {
			q.limit, q.calm = int32(old+1), 0
		}
	}
	return q.capFor(ceiling) != old
}
