package capacity

import (
	"fmt"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/duration"
)

const ms = time.Millisecond

// t0 is the tests' instant zero, and defaultJitter the pacer's default jitter fraction (ext.DefaultJitter).
var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

const defaultJitter = 0.1

// The interval is the maximum of its four parts; ties go to the published constraint.
func TestIntervalIsTheMaximum(t *testing.T) {
	for _, tc := range []struct {
		base, crawl, rate, adaptive time.Duration
		want                        time.Duration
		why                         audit.Trigger
	}{
		{1000 * ms, 0, 0, 1000 * ms, 1000 * ms, audit.TriggerBase},
		{1000 * ms, 2000 * ms, 0, 1000 * ms, 2000 * ms, audit.TriggerCrawlDelay},
		{1000 * ms, 0, 1500 * ms, 1000 * ms, 1500 * ms, audit.TriggerRateLimit},
		{1000 * ms, 2000 * ms, 1500 * ms, 4000 * ms, 4000 * ms, audit.TriggerAdaptive},
		{1000 * ms, 2000 * ms, 2000 * ms, 2000 * ms, 2000 * ms, audit.TriggerCrawlDelay},
		{5000 * ms, 2000 * ms, 0, 100 * ms, 5000 * ms, audit.TriggerBase},
	} {
		got, why := Interval(tc.base, tc.crawl, tc.rate, tc.adaptive)
		if got != tc.want || why != tc.why {
			t.Errorf("Interval(%v, %v, %v, %v) = %v %s, want %v %s", tc.base, tc.crawl, tc.rate, tc.adaptive, got, why, tc.want, tc.why)
		}
	}
}

// Jitter only adds, up to the fraction, and 0 turns it off.
func TestJitterOnlyAdds(t *testing.T) {
	for _, tc := range []struct {
		fraction, r float64
		want        time.Duration
	}{
		{0.1, 0, 0},
		{0.1, 0.5, 50 * ms},
		{0.1, 0.75, 75 * ms},
		{0, 0.7, 0},
	} {
		if got := Jitter(time.Second, tc.fraction, tc.r).Round(time.Microsecond); got != tc.want {
			t.Errorf("Jitter(1s, %v, %v) = %v, want %v", tc.fraction, tc.r, got, tc.want)
		}
	}
	// Never so much that the interval and its jitter overflow.
	if got := Jitter(duration.Max, 1, 0.99) + duration.Max; got != duration.Max {
		t.Errorf("Jitter(max, 1, 0.99) + max = %v, want max", got)
	}
	if got := Jitter(duration.Max-time.Second, 1, 0.5); got != time.Second {
		t.Errorf("Jitter(max-1s, 1, 0.5) = %v, want 1s", got)
	}
}

// The adaptive delay never exceeds its ceiling.
func TestRefusalsClampToCeiling(t *testing.T) {
	a := New(time.Second)
	for range 10 {
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, time.Second, 30*time.Second)
	}
	if a.delay != 30*time.Second {
		t.Errorf("delay %v after 10 refusals, want the 30s ceiling", a.delay)
	}
}

// confirm feeds confirmRun clean responses: the delay in effect becomes the known-good interval.
func confirm(a *Model, floor time.Duration) {
	for range confirmRun {
		a.Succeed(Sample{Gen: a.gen, At: t0}, floor, time.Minute)
	}
}

// Latency above p95 raises the delay by 1.25 only after slowRun samples in a row: the one healthy
// sample in twenty above p95 cannot ratchet it up.
func TestLatencyAboveP95NeedsARun(t *testing.T) {
	a := New(time.Second)
	for i := range 200 {
		lat := 100 * ms
		if i%20 == 19 {
			lat = 900 * ms // one healthy outlier in twenty
		}
		if a.ObserveLatency(a.gen, lat, 1, time.Second, 30*time.Second) {
			t.Fatalf("Sample %d: isolated outliers raised the delay to %v", i, a.delay)
		}
	}
	a.ObserveLatency(a.gen, 100*ms, 1, time.Second, 30*time.Second) // healthy: the run starts after it
	var raised bool
	for range slowRun {
		raised = a.ObserveLatency(a.gen, 5*time.Second, 1, time.Second, 30*time.Second)
	}
	if !raised || a.delay != 1250*ms {
		t.Errorf("after %d slow samples: raised=%v delay=%v, want 1.25s", slowRun, raised, a.delay)
	}
}

// With several requests in flight, slow responses are the crawler's own queue (the queueing signal's
// business), not a host slow for everyone: the slow rule stays out of it.
func TestSlowRuleIgnoresOwnQueue(t *testing.T) {
	a := New(time.Second)
	for range 40 {
		a.ObserveLatency(a.gen, 100*ms, 1, time.Second, 30*time.Second)
	}
	for range 2 * slowRun {
		if a.ObserveLatency(a.gen, 5*time.Second, 4, time.Second, 30*time.Second) {
			t.Fatalf("slow samples with 4 in flight raised the delay to %v", a.delay)
		}
	}
}

// After an outage inflated the delay, clean responses bring it back to the good interval it had.
func TestCleanResponsesReturnToFloor(t *testing.T) {
	a := New(100 * ms)
	confirm(&a, 100*ms) // the floor is known good before the outage
	for range 6 {
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedOutage, At: t0}, 100*ms, 30*time.Second) // 5xx: an outage
	}
	if a.delay != 2*time.Second {
		t.Fatalf("delay after the outage = %v, want 2s (doubling stops at the outage probe interval)", a.delay)
	}
	var spent time.Duration
	for i := 0; a.delay > 100*ms && i < 100; i++ {
		spent += a.delay // one response per interval
		a.Succeed(Sample{Gen: a.gen, At: t0}, 100*ms, 30*time.Second)
	}
	if a.delay != 100*ms {
		t.Fatalf("delay = %v after 100 clean responses, want the 100ms floor", a.delay)
	}
	if spent > 5*time.Second {
		t.Errorf("back to the floor after %v of clean responses, want under 5s", spent)
	}
}

// Rule 2 of the capacity model: a refused probe goes back to the last interval delivered without
// refusal, at once; it does not double.
func TestRefusedProbeReturnsToLastGoodRate(t *testing.T) {
	a := New(100 * ms)
	a.set(400*ms, 100*ms, time.Minute)
	confirm(&a, 100*ms)
	if a.good != 400*ms {
		t.Fatalf("good = %v after %d clean responses at 400ms, want 400ms", a.good, confirmRun)
	}
	probe := a.delay
	if probe >= 400*ms {
		t.Fatalf("no probe below the good interval after it was confirmed: delay %v", probe)
	}
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute)
	if a.delay != 400*ms || a.bad != probe {
		t.Errorf("refused probe at %v: delay %v, refused bound %v; want back at 400ms, bound %v", probe, a.delay, a.bad, probe)
	}
}

// A probe confirmed only lately (a token bucket's burst or lucky jitter let it through) and refused
// soon after is a refused probe too: back to the good interval before it, with a longer confirmation
// on that host from then on.
func TestYoungGoodRefusedGoesBack(t *testing.T) {
	a := New(100 * ms)
	a.good, a.bad = 400*ms, 200*ms
	a.set(400*ms, 100*ms, time.Minute)
	confirm(&a, 100*ms)                                                          // probing 300 ms
	confirm(&a, 100*ms)                                                          // 300 ms confirmed: probing 250 ms
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // the probe refused: back to 300 ms
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // 300 ms, hardly held, refused too
	if a.delay != 450*ms {
		t.Fatalf("setup: delay %v", a.delay)
	}
	b := New(100 * ms)
	b.good, b.bad = 400*ms, 200*ms
	b.set(400*ms, 100*ms, time.Minute)
	confirm(&b, 100*ms) // probing 300 ms
	confirm(&b, 100*ms) // 300 ms confirmed (good, 400 ms before it): probing 250 ms
	b.set(300*ms, 100*ms, time.Minute)
	b.Refuse(Sample{Gen: b.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // refused at the young 300 ms
	if b.delay != 400*ms || b.good != 400*ms || b.bad != 300*ms || b.confirmRun() != 2*confirmRun {
		t.Errorf("young good refused: delay %v good %v bad %v confirm %d; want back at 400ms, bad 300ms, confirm %d",
			b.delay, b.good, b.bad, b.confirmRun(), 2*confirmRun)
	}
}

// A refusal at the known-good interval is the edge of what the host accepts (timing noise decides
// there): it costs one edgeStep beyond the gap the departure asked for (its jitter included: HAProxy's
// window let a pace 5% too fast through by phase, and steps from the good interval under the gap it
// refused cost three refusals a minute), not a doubling, and the good interval stays known. The gap
// measured is not the host's: it carries the crawler's own lateness.
func TestRefusalAtGoodCostsOneStep(t *testing.T) {
	a := New(100 * ms)
	a.good, a.bad, a.held = 250*ms, 200*ms, dropRun // held at good a while
	a.set(250*ms, 100*ms, time.Minute)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Jitter: 3 * ms, Credited: 260 * ms, At: t0}, 100*ms, time.Minute)
	if want := 253*ms + 253*ms*edgeStep/100; a.delay != want || a.good != a.delay {
		t.Errorf("refused at the good 250ms + 3ms of jitter, sent 7ms late: delay %v, good %v; want %v (2%% beyond the gap asked for)", a.delay, a.good, want)
	}
	if a.bad < 253*ms {
		t.Errorf("refused at the good 250ms + 3ms of jitter: bad %v, want at least 253ms (no creep back under the gap refused)", a.bad)
	}
}

// The capacity dropped only when refusals recur at the good interval, within dropRun clean responses
// (the host accepts measurably less): then the delay backs off (rateBackoff), and the good interval is
// let go. A refusal when nothing is known backs off too.
func TestCapacityDropBacksOff(t *testing.T) {
	a := New(100 * ms)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // nothing known
	if a.delay != 150*ms {
		t.Fatalf("first refusal at 100ms: delay %v, want 150ms", a.delay)
	}
	a.good, a.bad, a.failures, a.held = 250*ms, 200*ms, 0, dropRun // held at good a while
	a.set(250*ms, 100*ms, time.Minute)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0.Add(time.Hour)}, 100*ms, time.Minute) // the edge: one step
	for range dropRun - 1 {
		a.Succeed(Sample{Gen: a.gen, At: t0.Add(time.Hour)}, 100*ms, time.Minute)
	}
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0.Add(time.Hour + 5*time.Second)}, 100*ms, time.Minute)
	if a.delay != 382500*time.Microsecond || a.good != 0 || a.bad != 255*ms {
		t.Errorf("refused again at good within %d clean responses: delay %v, good %v, bad %v; want 382.5ms, unknown, 255ms",
			dropRun, a.delay, a.good, a.bad)
	}
	// Refused at good again only after dropRun clean responses: the edge again, one step.
	b := New(100 * ms)
	b.good, b.bad = 250*ms, 248*ms
	b.set(250*ms, 100*ms, time.Minute)
	for range dropRun {
		b.Succeed(Sample{Gen: b.gen, At: t0}, 100*ms, time.Minute)
	}
	b.Refuse(Sample{Gen: b.gen, Kind: RefusedRate, At: t0.Add(time.Minute)}, 100*ms, time.Minute)
	if b.delay != 255*ms {
		t.Errorf("refused at good after %d clean responses: delay %v, want one step, 255ms", dropRun, b.delay)
	}
}

// Rule 3: between the slowest refused and the fastest good interval the model bisects until they are
// within bisectUntil, then creeps towards the refused bound in creepStep steps, each confirmed, until
// the next would reach it; after cruiseBeforeProbe clean responses and the probe wait it probes a
// step faster.
func TestBisectsThenProbesInSteps(t *testing.T) {
	a := New(100 * ms)
	a.good, a.bad = 400*ms, 200*ms
	a.set(400*ms, 100*ms, time.Minute)
	var tried []time.Duration
	for range 4 {
		confirm(&a, 100*ms)
		tried = append(tried, a.delay)
	}
	if want := []time.Duration{300 * ms, 250 * ms, 225 * ms, 220500 * time.Microsecond}; fmt.Sprint(tried) != fmt.Sprint(want) {
		t.Fatalf("intervals tried %v, want %v (bisection, then a creep of 2%%)", tried, want)
	}
	for i := 0; i < 20 && a.delay < a.good || a.creep() > a.bad; i++ {
		confirm(&a, 100*ms)
	}
	if a.delay != a.good || a.good <= 200*ms || a.creep() > 200*ms {
		t.Fatalf("after the creep: delay %v, good %v, bad %v; want a cruise at good, within one step of 200ms", a.delay, a.good, a.bad)
	}
	cruise := a.delay
	for i := 0; i < cruiseBeforeProbe && a.delay == cruise; i++ {
		a.Succeed(Sample{Gen: a.gen, At: t0.Add(time.Hour)}, 100*ms, time.Minute)
	}
	if want := cruise - cruise*probeGain/100; a.delay != want {
		t.Errorf("after a cruise of %d responses: delay %v, want a probe %v (8%% faster)", cruiseBeforeProbe, a.delay, want)
	}
}

// A 503 without Retry-After right after clean responses reads as a rate refusal (nginx limit_req);
// a second one at the wider spacing is an outage, and the first one's lesson is taken back.
func TestUnclear503(t *testing.T) {
	a := New(100 * ms)
	a.set(400*ms, 100*ms, time.Minute)
	confirm(&a, 100*ms) // good 400 ms, probing 250 ms
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedUnclear, At: t0}, 100*ms, time.Minute)
	if a.delay != 400*ms || a.bad != 250*ms {
		t.Fatalf("503 at a probe: delay %v, bad %v; want back at the good 400ms, bad 250ms", a.delay, a.bad)
	}
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedUnclear, At: t0}, 100*ms, time.Minute)
	if a.good != 400*ms || a.bad != 0 || a.delay != 800*ms {
		t.Errorf("second 503 in a row: good %v, bad %v, delay %v; want the model before (400ms, none) and an outage's backoff to 800ms",
			a.good, a.bad, a.delay)
	}
}

// A clean response of an older generation neither decreases nor counts toward a confirmation.
func TestStaleCleanResponseDoesNotDecrease(t *testing.T) {
	a := New(100 * ms)
	old := a.gen
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, 30*time.Second)
	for range 5 {
		if a.Succeed(Sample{Gen: old, At: t0}, 100*ms, 30*time.Second) != 0 {
			t.Fatal("a response that departed before the increase moved the delay")
		}
	}
	if a.good != 0 {
		t.Errorf("stale responses confirmed %v", a.good)
	}
}

// The rolling p95 reads the window's 95th percentile once it has enough samples.
func TestLatencyWindowP95(t *testing.T) {
	var w latencyWindow
	for i := 1; i <= minLatencySamples-1; i++ {
		w.add(time.Duration(i) * ms)
	}
	if _, ok := w.p95(); ok {
		t.Fatal("p95 reported before the window had enough samples")
	}
	for i := minLatencySamples; i <= 100; i++ {
		w.add(time.Duration(i) * ms)
	}
	// The window holds the last 40 samples: 61..100 ms; the 95th percentile is the 38th of them.
	if got, _ := w.p95(); got != 98*ms {
		t.Errorf("p95 = %v, want 98ms", got)
	}
}

// Issue 9, point 3 of the outage target: an outage backs off to the outage probe interval and no
// further (8 floors, at least 2 s, at most the ceiling), so the first request after it is not far
// behind its end; a rate refusal backs off on from there.
func TestOutageBackoffStopsAtProbeInterval(t *testing.T) {
	for _, tc := range []struct {
		floor, ceiling, want time.Duration
	}{
		{300 * ms, 30 * time.Second, 2400 * ms},
		{100 * ms, 30 * time.Second, 2 * time.Second},
		{time.Second, 5 * time.Second, 5 * time.Second},
	} {
		a := New(tc.floor)
		for range 20 {
			a.Refuse(Sample{Gen: a.gen, Kind: RefusedOutage, At: t0}, tc.floor, tc.ceiling)
		}
		if a.delay != tc.want {
			t.Errorf("floor %v ceiling %v: outage backoff %v, want %v", tc.floor, tc.ceiling, a.delay, tc.want)
		}
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, tc.floor, tc.ceiling) // a 429 after it: the host is there and says slow down
		if want := min(duration.Mul(tc.want, rateBackoff), tc.ceiling); a.delay != want {
			t.Errorf("floor %v: rate refusal after the outage: %v, want %v", tc.floor, a.delay, want)
		}
	}
}

// A token bucket is empty at a refusal: what it accepts from then on is its rate, whatever its burst.
// On a host known to be bursty, a refusal at an interval it had accepted goes to that measured interval
// when it lies between the refused one and its backoff; on another host (a capacity that dropped) it
// backs off (rateBackoff), and the measure restarts at every refusal.
func TestDrainMeasuresSustainedInterval(t *testing.T) {
	for _, bursty := range []bool{true, false} {
		a := New(100 * ms)
		if bursty {
			a.confirm = 2 * confirmRun
		}
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // the bucket is empty from here
		for range 20 {
			a.drain.accepted()
		}
		a.good, a.failures = 200*ms, 0 // just confirmed: a refusal at good now is a drop
		a.set(200*ms, 100*ms, time.Minute)
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, At: t0.Add(5 * time.Second)}, 100*ms, time.Minute) // 20 in 5 s: 250 ms each
		want := 300 * ms
		if bursty {
			want = 250 * ms
		}
		if a.delay != want {
			t.Errorf("bursty %v: refused at its good interval after 20 accepted in 5s: delay %v, want %v", bursty, a.delay, want)
		}
		if a.drain.n != 0 || a.drain.since != t0.Add(5*time.Second).UnixNano() {
			t.Errorf("bursty %v: the measure did not restart at the refusal: %+v", bursty, a.drain)
		}
	}
	var d drain
	d.refused(t0)
	for range minDelivered - 1 {
		d.accepted()
	}
	if got := d.sustained(t0.Add(time.Second)); got != 0 {
		t.Errorf("sustained %v from %d accepted, want 0 (too few to say)", got, minDelivered-1)
	}
}

// A latency a little above p95 (the crawler's own jitter) is not a slow host.
func TestLatencyJitterIsNotSlowness(t *testing.T) {
	a := New(time.Second)
	for range 40 {
		a.ObserveLatency(a.gen, 20*ms, 1, time.Second, 30*time.Second)
	}
	for range 5 {
		if a.ObserveLatency(a.gen, 60*ms, 1, time.Second, 30*time.Second) {
			t.Fatalf("60ms samples on a 20ms host raised the delay to %v: within the 50ms margin", a.delay)
		}
	}
}

// A climbing probe refused (50% below a good interval reached by accepted probes) says the capacity
// lies between them: after the good interval's confirmation run, the next probe goes half as far
// (25%), at once. A cruise probe refused (8%) waits for the cruise before the next.
func TestRefusedClimbProbesHalfAsFarAtOnce(t *testing.T) {
	for _, c := range []struct {
		gain uint8
		next time.Duration // the delay after the confirmation run at good
	}{
		{gain: 50, next: 450 * ms}, // 600 ms less a quarter
		{gain: probeGain, next: 600 * ms},
	} {
		a := New(10 * ms)
		a.good, a.bad, a.gain, a.probing = 600*ms, 0, c.gain, true
		a.set(a.good-a.good*time.Duration(c.gain)/100, 10*ms, time.Minute)
		a.refused = t0.UnixNano()
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, At: t0.Add(time.Second)}, 10*ms, time.Minute)
		if a.delay != 600*ms {
			t.Fatalf("gain %d%%: refused probe: delay %v, want back at good 600ms", c.gain, a.delay)
		}
		for i := range confirmRun {
			a.Succeed(Sample{Gen: a.gen, At: t0.Add(time.Duration(2+i) * time.Second)}, 10*ms, time.Minute)
		}
		if a.delay != c.next {
			t.Errorf("gain %d%% refused, %d clean at good: delay %v, want %v", c.gain, confirmRun, a.delay, c.next)
		}
	}
}

// The half step after a refused climbing one, accepted, ends the climb: the host's limit lies between
// the two, and the model cruises at the half step rather than climbing twice as far from it, past the
// interval just refused (on HAProxy's window at 2/s that step was refused, and so was its half).
func TestAcceptedHalfStepEndsTheClimb(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	a := New(floor)
	a.good, a.bad, a.gain, a.probing = 600*ms, 0, maxProbeGain, true
	a.set(300*ms, floor, ceiling)
	a.refused = t0.UnixNano()
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, At: t0.Add(time.Second)}, floor, ceiling) // the 50% step
	at := t0.Add(time.Second)
	for a.delay == 600*ms && at.Before(t0.Add(time.Minute)) {
		at = at.Add(600 * ms)
		a.Succeed(Sample{Gen: a.gen, Credited: 600 * ms, Spacing: 600 * ms, At: at}, floor, ceiling)
	}
	if a.delay != 450*ms {
		t.Fatalf("after the refused 50%% step: delay %v, want the half step 450ms", a.delay)
	}
	for a.good != 450*ms && at.Before(t0.Add(time.Minute)) {
		at = at.Add(450 * ms)
		a.Succeed(Sample{Gen: a.gen, Credited: 450 * ms, Spacing: 450 * ms, At: at}, floor, ceiling)
	}
	if a.good != 450*ms {
		t.Fatalf("the half step not confirmed in a minute: good %v, delay %v", a.good, a.delay)
	}
	if a.delay != 450*ms || a.gain != probeGain {
		t.Errorf("the half step 450ms confirmed: delay %v, gain %d%%; want a cruise at 450ms, gain %d%% (the refused 300ms lies within the next step)", a.delay, a.gain, probeGain)
	}
}
