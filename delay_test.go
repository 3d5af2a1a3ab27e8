package ext

import (
	"fmt"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

const ms = time.Millisecond

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
		got, why := interval(tc.base, tc.crawl, tc.rate, tc.adaptive)
		if got != tc.want || why != tc.why {
			t.Errorf("interval(%v, %v, %v, %v) = %v %s, want %v %s", tc.base, tc.crawl, tc.rate, tc.adaptive, got, why, tc.want, tc.why)
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
		if got := jitter(time.Second, tc.fraction, tc.r).Round(time.Microsecond); got != tc.want {
			t.Errorf("jitter(1s, %v, %v) = %v, want %v", tc.fraction, tc.r, got, tc.want)
		}
	}
}

// A reservation's jitter lengthens the gap to the next departure.
func TestReservationAddsJitter(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0.1), withRandom(func() float64 { return 0.5 }))
	p.ReserveAt("h", t0)
	if got := p.ReserveAt("h", t0).At.Sub(t0); got != 1050*ms {
		t.Errorf("second departure at +%v, want +1.05s", got)
	}
}

// Departures are booked one interval apart, from the previous departure, whatever the latency.
func TestReservationsAreStartBased(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	for i := range 5 {
		res := p.ReserveAt("h", t0)
		if want := t0.Add(time.Duration(i) * time.Second); !res.At.Equal(want) {
			t.Fatalf("reservation %d at +%v, want +%v", i, res.At.Sub(t0), want.Sub(t0))
		}
	}
}

// The adaptive delay never exceeds its ceiling.
func TestRefusalsClampToCeiling(t *testing.T) {
	a := newAdaptive(time.Second)
	for range 10 {
		a.refuse(a.gen, true, time.Second, 30*time.Second, t0)
	}
	if a.delay != 30*time.Second {
		t.Errorf("delay %v after 10 refusals, want the 30s ceiling", a.delay)
	}
}

// Latency above p95 raises the delay by 1.25 only after slowRun samples in a row: the one healthy
// sample in twenty above p95 cannot ratchet it up.
func TestLatencyAboveP95NeedsARun(t *testing.T) {
	a := newAdaptive(time.Second)
	for i := range 200 {
		lat := 100 * ms
		if i%20 == 19 {
			lat = 900 * ms // one healthy outlier in twenty
		}
		if a.observeLatency(a.gen, lat, time.Second, 30*time.Second) {
			t.Fatalf("sample %d: isolated outliers raised the delay to %v", i, a.delay)
		}
	}
	a.observeLatency(a.gen, 100*ms, time.Second, 30*time.Second) // healthy: the run starts after it
	var raised bool
	for range slowRun {
		raised = a.observeLatency(a.gen, 5*time.Second, time.Second, 30*time.Second)
	}
	if !raised || a.delay != 1250*ms {
		t.Errorf("after %d slow samples: raised=%v delay=%v, want 1.25s", slowRun, raised, a.delay)
	}
}

// After an outage inflated the delay, clean responses bring it back to the floor.
func TestCleanResponsesReturnToFloor(t *testing.T) {
	a := newAdaptive(100 * ms)
	a.succeed(a.gen, 100*ms, 30*time.Second) // a clean response before the outage
	for range 6 {
		a.refuse(a.gen, false, 100*ms, 30*time.Second, t0) // 503s without Retry-After: an outage
	}
	if a.delay != 2*time.Second {
		t.Fatalf("delay after the outage = %v, want 2s (doubling stops at the outage probe interval)", a.delay)
	}
	var spent time.Duration
	for i := 0; a.delay > 100*ms && i < 100; i++ {
		spent += a.delay // one response per interval
		a.succeed(a.gen, 100*ms, 30*time.Second)
	}
	if a.delay != 100*ms {
		t.Fatalf("delay = %v after 100 clean responses, want the 100ms floor", a.delay)
	}
	if spent > 30*time.Second {
		t.Errorf("back to the floor after %v of clean responses, want under 30s", spent)
	}
}

// After a refusal that followed clean responses, the delay settles just above the delay that was
// refused (the host's known limit), not back at the floor where it would be refused again.
func TestDecreaseSettlesAboveKnownLimit(t *testing.T) {
	a := newAdaptive(100 * ms)
	a.delay = 220 * ms
	a.refuse(a.gen, true, 100*ms, 30*time.Second, t0) // 429 at 220ms
	for range 20 {
		a.succeed(a.gen, 100*ms, 30*time.Second)
	}
	if want := 242 * ms; a.delay != want {
		t.Errorf("delay settled at %v, want %v (known limit + 10%%)", a.delay, want)
	}
	for range probeAfter {
		a.succeed(a.gen, 100*ms, 30*time.Second)
	}
	if a.limit >= 220*ms {
		t.Errorf("known limit %v after %d clean responses at the target, want it probed lower", a.limit, probeAfter)
	}
}

// A clean response of an older generation neither decreases nor counts toward a decrease.
func TestStaleCleanResponseDoesNotDecrease(t *testing.T) {
	a := newAdaptive(100 * ms)
	old := a.gen
	a.refuse(a.gen, true, 100*ms, 30*time.Second, t0)
	for range 5 {
		if a.succeed(old, 100*ms, 30*time.Second) != 0 {
			t.Fatal("a response that departed before the increase decreased the delay")
		}
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
	// The window holds the last 48 samples: 53..100 ms; the 95th percentile is the 46th of them.
	if got, _ := w.p95(); got != 98*ms {
		t.Errorf("p95 = %v, want 98ms", got)
	}
}

// Issue 9, point 3 of the outage target: an outage backs off to the outage probe interval and no
// further (8 floors, at least 2 s, at most the ceiling), so the first request after it is not far
// behind its end; a rate refusal doubles on.
func TestOutageBackoffStopsAtProbeInterval(t *testing.T) {
	for _, tc := range []struct {
		floor, ceiling, want time.Duration
	}{
		{300 * ms, 30 * time.Second, 2400 * ms},
		{100 * ms, 30 * time.Second, 2 * time.Second},
		{time.Second, 5 * time.Second, 5 * time.Second},
	} {
		a := newAdaptive(tc.floor)
		for range 20 {
			a.refuse(a.gen, false, tc.floor, tc.ceiling, t0)
		}
		if a.delay != tc.want {
			t.Errorf("floor %v ceiling %v: outage backoff %v, want %v", tc.floor, tc.ceiling, a.delay, tc.want)
		}
		a.refuse(a.gen, true, tc.floor, tc.ceiling, t0) // a 429 after it: the host is there and says slow down
		if want := min(2*tc.want, tc.ceiling); a.delay != want {
			t.Errorf("floor %v: rate refusal after the outage: %v, want %v", tc.floor, a.delay, want)
		}
	}
}

// Issue 9, point 5: at a rate refusal the known limit is the interval the host sustained over the
// last window (accepted departures), when that is slower than the delay in effect: a host whose
// capacity halved is known at its new speed at the first refusal.
func TestRateRefusalLearnsSustainedInterval(t *testing.T) {
	a := newAdaptive(250 * ms)
	// 12 departures accepted 500 ms apart over the last 6 s (the host let them through at 2/s),
	// then a refusal at the 250 ms delay in effect.
	for i := range 12 {
		a.accepted.add(t0.Add(time.Duration(i) * 500 * ms))
	}
	now := t0.Add(6 * time.Second)
	a.refuse(a.gen, true, 250*ms, 30*time.Second, now)
	if a.limit != 500*ms {
		t.Errorf("limit %v after the refusal, want the sustained 500ms", a.limit)
	}
	// Too few accepted departures in the window say nothing: the delay in effect is the limit.
	b := newAdaptive(250 * ms)
	for i := range 3 {
		b.accepted.add(t0.Add(time.Duration(i) * 500 * ms))
	}
	b.refuse(b.gen, true, 250*ms, 30*time.Second, now)
	if b.limit != 250*ms {
		t.Errorf("limit %v with 3 accepted departures, want the delay in effect, 250ms", b.limit)
	}
}

// An outage (503 without Retry-After, 5xx, broken connections) says nothing about the host's speed:
// once it is over, the delay returns to the floor, not to the delay at which the outage began.
func TestOutageTeachesNoLimit(t *testing.T) {
	a := newAdaptive(200 * ms)
	a.delay = 200 * ms
	a.refuse(a.gen, false, 200*ms, 30*time.Second, t0)
	for range 20 {
		a.succeed(a.gen, 200*ms, 30*time.Second)
	}
	if a.delay != 200*ms || a.limit != 0 {
		t.Errorf("after an outage: delay %v, known limit %v; want the 200ms floor and no limit", a.delay, a.limit)
	}
}

// Refusals that keep coming just above the known limit double the margin, so the host's capacity is
// found in a few refusals rather than in 10% steps; clean responses at the target shrink it again.
func TestCreepingRefusalsWidenTheMargin(t *testing.T) {
	a := newAdaptive(100 * ms)
	settle := func() {
		for range 30 {
			if a.delay <= a.target(100*ms) {
				return
			}
			a.succeed(a.gen, 100*ms, 30*time.Second)
		}
	}
	var targets []time.Duration
	for range 3 { // refused each time at the target
		a.refuse(a.gen, true, 100*ms, 30*time.Second, t0)
		settle()
		targets = append(targets, a.target(100*ms))
	}
	want := []time.Duration{110 * ms, 132 * ms, 184800 * time.Microsecond} // margins 10%, 20%, 40%
	for i := range want {
		if targets[i] != want[i] {
			t.Fatalf("targets after each refusal %v, want %v", targets, want)
		}
	}
	for range marginDecayAfter {
		a.succeed(a.gen, 100*ms, 30*time.Second)
	}
	if a.margin != 0.25 || a.delay != 165*ms {
		t.Errorf("after %d clean responses at the target: margin %v, delay %v; want 25%% and 165ms", marginDecayAfter, a.margin, a.delay)
	}
}

// A latency a little above p95 (the crawler's own jitter) is not a slow host.
func TestLatencyJitterIsNotSlowness(t *testing.T) {
	a := newAdaptive(time.Second)
	for range 40 {
		a.observeLatency(a.gen, 20*ms, time.Second, 30*time.Second)
	}
	for range 5 {
		if a.observeLatency(a.gen, 60*ms, time.Second, 30*time.Second) {
			t.Fatalf("60ms samples on a 20ms host raised the delay to %v: within the 50ms margin", a.delay)
		}
	}
}

// issue 10 item 4: the adaptive delay never exceeds the ceiling, whatever moves it. Refusals at the
// ceiling widen the margin until the recovery target (known limit × (1 + margin)) is above the
// ceiling; clean responses then decayed the margin and set the delay to that target unclamped (46.5 s
// with a 30 s ceiling), logged as a decrease. A 301 with Retry-After: 0 is a rate refusal too and
// ratcheted the same way. Every audit event also says which way the delay went.
func TestAdaptiveDelayNeverExceedsCeiling(t *testing.T) {
	for _, refusal := range []Outcome{
		{Status: 429},
		{Status: 301, Header: header("Retry-After", "0")},
	} {
		t.Run(fmt.Sprint(refusal.Status), func(t *testing.T) {
			var buf auditBuf
			p := NewPacer(WithBaseDelay(time.Second), WithMaxDelay(30*time.Second), WithJitter(0),
				WithLogger(zerolog.New(&buf)), withRandom(func() float64 { return 0 }))
			now := t0
			observe := func(o Outcome) {
				t.Helper()
				before, _ := p.HostAt("h", now)
				seen := len(events(t, &buf))
				p.ObserveAt(p.ReserveAt("h", now), o, now)
				after, _ := p.HostAt("h", now)
				if after.AdaptiveDelay > 30*time.Second {
					t.Fatalf("adaptive delay %v above the 30s ceiling", after.AdaptiveDelay)
				}
				for _, e := range events(t, &buf)[seen:] {
					switch e[audit.FieldEvent] { // a JSON string: compared as one
					case string(audit.EventDelayDecreased):
						if after.AdaptiveDelay >= before.AdaptiveDelay {
							t.Fatalf("delay_decreased logged for %v → %v", before.AdaptiveDelay, after.AdaptiveDelay)
						}
					case string(audit.EventDelayIncreased):
						if after.AdaptiveDelay <= before.AdaptiveDelay {
							t.Fatalf("delay_increased logged for %v → %v", before.AdaptiveDelay, after.AdaptiveDelay)
						}
					}
				}
				now = now.Add(after.Interval)
			}
			for range 5 { // 1 s doubled to the ceiling
				observe(refusal)
			}
			for range 5 { // refused at the ceiling after a clean response: the margin doubles to 100%
				observe(Outcome{Status: 200})
				observe(refusal)
			}
			for range 4 * marginDecayAfter { // clean responses at the target decay the margin
				observe(Outcome{Status: 200})
			}
			if st, _ := p.HostAt("h", now); st.AdaptiveDelay != 30*time.Second || st.Breaker != audit.BreakerClosed {
				t.Errorf("after clean responses: delay %v, breaker %v; want the 30s ceiling, closed", st.AdaptiveDelay, st.Breaker)
			}
		})
	}
}
