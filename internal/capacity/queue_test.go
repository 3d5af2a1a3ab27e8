package capacity

import (
	"testing"
	"time"
)

// Issue 15 rule 1: a forming queue caps in-flight. One worker serving in 100 ms behind a 20 ms
// interval: the first response sets the cap at what the interval needs (5); a response that waited
// behind another (180 ms with 2 in flight) shows the queue, and the cap falls to one less than was in
// flight: 1. Responses without a queue at the cap grow it by one.
func TestFormingQueueCapsInFlight(t *testing.T) {
	var q queueModel
	if got := q.capFor(8); got != 8 {
		t.Fatalf("cap before any response = %d, want the policy's 8", got)
	}
	q.observe(100*ms, 1, 20*ms, 8, t0)
	if got := q.capFor(8); got != 5 {
		t.Fatalf("cap after a 100ms response at a 20ms interval = %d, want 5", got)
	}
	q.observe(180*ms, 2, 20*ms, 8, t0.Add(200*ms))
	if got := q.capFor(8); got != 1 {
		t.Fatalf("cap after a queued response (180ms, 2 in flight, base 100ms) = %d, want 1", got)
	}
	for i := range calmBeforeGrow {
		if q.capFor(8) != 1 {
			t.Fatalf("cap grew after %d calm responses, want %d", i, calmBeforeGrow)
		}
		q.observe(101*ms, 1, 20*ms, 8, t0.Add(time.Second))
	}
	if got := q.capFor(8); got != 2 {
		t.Errorf("cap after %d calm responses at the cap = %d, want 2", calmBeforeGrow, got)
	}
}

// Four workers × 200 ms: a queue takes one request off the cap per response that shows it, so a
// single response that waited (one in five) does not cut the cap to half the workers.
func TestQueueTakesOneOffTheCap(t *testing.T) {
	var w queueModel
	w.observe(200*ms, 1, 20*ms, 8, t0)
	if got := w.capFor(8); got != 8 {
		t.Fatalf("cap after a 200ms response at a 20ms interval = %d, want 8 (the policy's)", got)
	}
	for i, want := range []int{7, 6, 5, 4} {
		w.observe(400*ms, 8-i, 20*ms, 8, t0.Add(time.Second))
		if got := w.capFor(8); got != want {
			t.Fatalf("cap after %d queued responses = %d, want %d", i+1, got, want)
		}
	}
	w.observe(400*ms, 5, 20*ms, 8, t0.Add(2*time.Second)) // 5 in flight, one waited: still a queue
	if got := w.capFor(8); got != 4 {
		t.Errorf("cap after a queued response with 5 in flight = %d, want 4", got)
	}
}

// A growth that formed a queue doubles the calm the next growth needs: a host whose workers are all
// in use is queued again ever more rarely, not every calmBeforeGrow responses.
func TestFailedGrowthWaitsLonger(t *testing.T) {
	q := queueModel{limit: 2}
	q.observe(100*ms, 1, 20*ms, 8, t0) // the base
	q.limit = 2
	calm := func(n int) {
		for range n {
			q.observe(100*ms, 2, 20*ms, 8, t0.Add(time.Second))
		}
	}
	calm(calmBeforeGrow)
	if q.capFor(8) != 3 {
		t.Fatalf("cap %d after %d calm responses, want 3", q.capFor(8), calmBeforeGrow)
	}
	q.observe(200*ms, 3, 20*ms, 8, t0.Add(2*time.Second)) // the third request queued
	calm(calmBeforeGrow)
	if q.capFor(8) != 2 {
		t.Fatalf("cap %d after a failed growth and %d calm responses, want 2 (it needs twice as many)", q.capFor(8), calmBeforeGrow)
	}
	calm(calmBeforeGrow)
	if q.capFor(8) != 3 {
		t.Errorf("cap %d after %d calm responses, want 3", q.capFor(8), 2*calmBeforeGrow)
	}
}

// The base latency is a minimum over a window that is measured again: an old minimum ages out, so a
// host whose unloaded latency rose is not read as queueing forever.
func TestBaseLatencyIsMeasuredAgain(t *testing.T) {
	var q queueModel
	q.observe(50*ms, 1, time.Second, 8, t0)
	q.observe(120*ms, 1, time.Second, 8, t0.Add(baseWindow+time.Second))
	q.observe(120*ms, 1, time.Second, 8, t0.Add(2*baseWindow+2*time.Second))
	if got := q.base(); got != 120*ms {
		t.Errorf("base after two windows at 120ms = %v, want 120ms (the old 50ms aged out)", got)
	}
}

// A cap cut below one the host held calm grows back to it after calmBeforeGrow calm responses,
// however many growths beyond it formed a queue: a queue seen once at two workers does not cost the
// crawl half its speed for minutes.
func TestRegrowsToAHeldCapAtOnce(t *testing.T) {
	q := queueModel{limit: 2, best: 2, misses: maxGrowMisses}
	q.observe(50*ms, 1, 0, 8, t0) // the base
	q.limit = 1                   // cut by a deep queue
	for range calmBeforeGrow {
		q.observe(50*ms, 1, 0, 8, t0.Add(time.Second))
	}
	if got := q.capFor(8); got != 2 {
		t.Errorf("cap %d after %d calm responses below the held 2, want 2", got, calmBeforeGrow)
	}
	for range calmBeforeGrow {
		q.observe(50*ms, 2, 0, 8, t0.Add(time.Second))
	}
	if got := q.capFor(8); got != 2 {
		t.Errorf("cap %d after %d calm responses at the held 2, want 2 (beyond it, growths wait %d)", got, calmBeforeGrow, calmBeforeGrow<<maxGrowMisses)
	}
	// A queue at the held cap itself (not after a growth), in three responses in a row (the two in
	// flight at once may both be the crawler's hiccup: TestHiccupIsNotAQueue): the host takes less now.
	for range 3 {
		q.observe(120*ms, 2, 0, 8, t0.Add(2*time.Second))
	}
	if q.capFor(8) != 1 || q.best != 1 {
		t.Errorf("after a queue at the held cap: cap %d, best %d; want 1, 1", q.capFor(8), q.best)
	}
}

// The crawler's own hiccup is not a queue at a cap the host held calm: on a loaded machine a response,
// or the few in flight at once, are read tens of milliseconds late (70 ms for a 50 ms service, with 4
// requests in flight to 4 workers). A queue persists: a response sent after the first queued one landed
// shows it too; a hiccup's does not, and the cap stays (on loopback, such readings held 4 workers ×
// 50 ms at 1 to 3 requests for minutes: 66% of their capacity).
func TestHiccupIsNotAQueue(t *testing.T) {
	q := queueModel{limit: 4, best: 4}
	q.observe(50*ms, 1, 0, 8, t0) // the base
	q.limit = 4
	for i := range 200 {
		latency := 50 * ms
		if i%20 == 10 {
			latency = 70 * ms // one response in twenty read late
		}
		q.observe(latency, 4, 0, 8, t0.Add(time.Second))
		if got := q.capFor(8); got != 4 {
			t.Fatalf("response %d (%v, 4 in flight): cap %d, want 4", i, latency, got)
		}
	}
	for i := range 4 { // a stall that delays the 4 responses in flight at once
		q.observe(70*ms, 4, 0, 8, t0.Add(2*time.Second))
		if got := q.capFor(8); got != 4 {
			t.Fatalf("cap %d after %d queued responses in a row at 4 in flight, want 4 (all sent before the first landed)", got, i+1)
		}
	}
	q.observe(70*ms, 4, 0, 8, t0.Add(2*time.Second)) // sent after the first landed: a queue that persists
	if got := q.capFor(8); got != 3 {
		t.Errorf("cap %d after 5 queued responses in a row at 4 in flight, want 3", got)
	}
}

// A growth beyond the cap the host held must show calm (within 10% + 2 ms of the base): one request
// behind four workers × 50 ms waits about a quarter of a service time (61 ms), under the queue
// threshold (20% + 5 ms); held, that growth would keep a queue at the host for good (on loopback: a
// median wait of 11 ms for every page). At the held cap the same latency changes nothing.
func TestGrowthBeyondTheHeldCapMustBeCalm(t *testing.T) {
	q := queueModel{}
	q.observe(50*ms, 1, 0, 8, t0) // the base
	q.limit, q.best, q.grown = 5, 4, true
	q.observe(61*ms, 5, 0, 8, t0.Add(time.Second))
	if got := q.capFor(8); got != 4 {
		t.Fatalf("cap %d after a 61ms response with 5 in flight beyond the held 4, want 4", got)
	}
	for range 3 * calmBeforeGrow {
		q.observe(61*ms, 4, 0, 8, t0.Add(time.Second))
	}
	if got := q.capFor(8); got != 4 {
		t.Errorf("cap %d after 61ms responses at the held 4, want 4 (neither a queue nor calm enough to grow)", got)
	}
}

// Only a growth must show calm: the cap the first response set (what the interval needs) is not one,
// and one request in flight is no queue of the crawler's making, however slow it comes back.
func TestOnlyAGrowthMustBeCalm(t *testing.T) {
	var q queueModel
	q.observe(100*ms, 1, 20*ms, 8, t0) // the cap the interval needs: 5
	q.observe(115*ms, 1, 20*ms, 8, t0.Add(time.Second))
	q.observe(115*ms, 2, 20*ms, 8, t0.Add(time.Second))
	if got := q.capFor(8); got != 5 {
		t.Errorf("cap %d after 115ms responses (base 100ms, under the queue threshold) with 1 and 2 in flight, want 5", got)
	}
}
