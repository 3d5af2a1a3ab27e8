package capacity

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// The capacity model's rules, fed with explicit instants: a host model decides each departure's
// fate, the model answers with the next interval, and Retry-After holds are kept as the pacer keeps
// them. One request in flight, answered in a millisecond; the departure's arrival at the host is
// delayed by up to a millisecond of network noise, so the edge of a limiter is met as on a real
// network.

// limiterHost is a limiter without burst (nginx limit_req): a request arriving sooner than 1/rate
// after the last accepted one is refused. rate may change at step (a reconfigured limiter).
type limiterHost struct {
	rate, stepRate float64
	step           time.Time
	last           time.Time
}

func (l *limiterHost) refuses(at time.Time) bool {
	rate := l.rate
	if !l.step.IsZero() && !at.Before(l.step) {
		rate = l.stepRate
	}
	if !l.last.IsZero() && at.Sub(l.last) < time.Duration(float64(time.Second)/rate) {
		return true
	}
	l.last = at
	return false
}

// modelRun drives one adaptive model against refuses for d from t0.
type modelRun struct {
	a              Model
	floor, ceiling time.Duration
	retryAfter     time.Duration // announced with each refusal (0: none)
	kind           RefusalKind   // what a refusal is (refusedRate; refusedUnclear for a 503 without Retry-After)
	rnd            *rand.Rand
	accepted       []time.Time
	refusals       []time.Time
	maxDelay       time.Duration // the largest delay once past warmUp
}

func newModelRun(floor, retryAfter time.Duration, seed uint64) *modelRun {
	return &modelRun{a: New(floor), floor: floor, ceiling: time.Minute, retryAfter: retryAfter,
		rnd: rand.New(rand.NewPCG(seed, 1))}
}

// run sends departures until d has passed; refused decides each (at its arrival at the host).
func (m *modelRun) run(d, warmUp time.Duration, refused func(at time.Time) bool) {
	last, hold := t0, t0
	var lastAccepted time.Time // the last accepted departure: what a limiter counts from
	for now := t0; now.Sub(t0) < d; {
		iv := max(m.a.delay, m.floor)
		fraction := defaultJitter
		if m.a.ProbingFaster() && m.a.delay >= m.floor {
			fraction = 0 // as earliestLocked
		}
		jit := Jitter(iv, fraction, m.rnd.Float64())
		dep := later(last.Add(iv+jit), hold)
		afterHold := last.Before(hold)                                                         // as earliestLocked: the first departure since a hold
		smp := Sample{Gen: m.a.gen, AfterHold: afterHold, Jitter: jit, Spacing: dep.Sub(last)} // as sampleLocked
		if !lastAccepted.IsZero() {
			smp.Credited = dep.Sub(lastAccepted)
		}
		last = dep
		arrival := dep.Add(time.Duration(m.rnd.Int64N(int64(time.Millisecond))))
		now = dep.Add(time.Millisecond)
		smp.At = now
		if refused(arrival) {
			m.refusals = append(m.refusals, arrival)
			smp.Kind, smp.Paced = m.kind, m.retryAfter > 0
			if m.retryAfter > 0 {
				hold = now.Add(m.retryAfter + m.retryAfter/10)
				m.a.SpaceProbes(hold.Sub(now)) // as applyVerdictLocked
			}
			m.a.Refuse(smp, m.floor, m.ceiling)
		} else {
			lastAccepted = dep
			m.accepted = append(m.accepted, arrival)
			m.a.drain.accepted()
			m.a.Succeed(smp, m.floor, m.ceiling)
		}
		if now.Sub(t0) > warmUp {
			m.maxDelay = max(m.maxDelay, m.a.delay)
		}
	}
}

// share is the accepted rate over [from, to) as a share of rate.
func (m *modelRun) share(from, to time.Duration, rate float64) float64 {
	n := 0
	for _, at := range m.accepted {
		if d := at.Sub(t0); d >= from && d < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds() / rate
}

func (m *modelRun) refusedIn(from, to time.Duration) int {
	n := 0
	for _, at := range m.refusals {
		if d := at.Sub(t0); d >= from && d < to {
			n++
		}
	}
	return n
}

// Limiters without burst at 2, 4 and 10/s, Retry-After 1 and 3 s, over 10 minutes: once learnt, the
// model keeps at least 90% of the capacity from 30 s on and 85% over the crawl; at 4/s with
// Retry-After 1 s, 90% in every 30 s window after the first, with at most one refusal a minute.
func TestModelKeepsWhatItLearnt(t *testing.T) {
	const d = 10 * time.Minute
	for _, rate := range []float64{2, 4, 10} {
		for _, ra := range []time.Duration{time.Second, 3 * time.Second} {
			for seed := range uint64(3) {
				m := newModelRun(100*ms, ra, seed)
				m.run(d, 0, (&limiterHost{rate: rate}).refuses)
				worst := 1.0
				for from := 30 * time.Second; from < d; from += 30 * time.Second {
					worst = min(worst, m.share(from, from+30*time.Second, rate))
				}
				steady, whole, n := m.share(30*time.Second, d, rate), m.share(0, d, rate), m.refusedIn(30*time.Second, d)
				name := fmt.Sprintf("%g/s, Retry-After %v, seed %d", rate, ra, seed)
				t.Logf("%s: steady %.1f%%, whole %.1f%%, worst 30 s window %.1f%%, %d refusals after 30 s", name, 100*steady, 100*whole, 100*worst, n)
				if steady < 0.90 || whole < 0.85 {
					t.Errorf("%s: steady %.1f%%, whole %.1f%% of capacity; want ≥ 90%% and ≥ 85%%", name, 100*steady, 100*whole)
				}
				if rate == 4 && ra == time.Second && (worst < 0.90 || n > 9) {
					t.Errorf("%s: worst 30 s window %.1f%%, %d refusals in 9.5 min; want ≥ 90%%, at most 1 a minute", name, 100*worst, n)
				}
			}
		}
	}
}

// A host whose Retry-After is long (30 s, a 33 s hold) is probed as rarely as its holds cost: refused
// cruise probes hold it at most about probeCostShare of the crawl (with a probe every cruiseMaxTime,
// each refused probe's hold would be 44% of it), and it still gets 85% of its capacity once learnt.
func TestLongHoldsSpaceProbes(t *testing.T) {
	const rate, d, warmUp = 4.0, 40 * time.Minute, 5 * time.Minute
	m := newModelRun(100*ms, 30*time.Second, 1)
	m.run(d, 0, (&limiterHost{rate: rate}).refuses)
	n := m.refusedIn(warmUp, d)
	held := time.Duration(n) * 33 * time.Second
	share := m.share(warmUp, d, rate)
	t.Logf("%d refusals after %v (held %v of %v), %.1f%% of capacity", n, warmUp, held, d-warmUp, 100*share)
	if float64(held) > 1.5*probeCostShare*float64(d-warmUp) {
		t.Errorf("%d refusals after %v hold the host %v of %v; want at most about %.0f%% of it", n, warmUp, held, d-warmUp, 100*probeCostShare)
	}
	if share < 0.85 {
		t.Errorf("%.1f%% of capacity after %v, want ≥ 85%%", 100*share, warmUp)
	}
}

// A capacity that halves or doubles mid-crawl (a limiter reconfigured) is followed: at least 85% of
// the capacity in force on each side of the step, leaving out the 30 s after it (a drop is seen at
// once; a rise within the probe wait, which a host whose capacity held has grown to cruiseMaxTime).
func TestModelFollowsACapacityStep(t *testing.T) {
	const step, d = 4 * time.Minute, 8 * time.Minute
	for _, tc := range []struct{ before, after float64 }{{4, 2}, {2, 4}} {
		for seed := range uint64(3) {
			m := newModelRun(100*ms, time.Second, seed)
			m.run(d, 0, (&limiterHost{rate: tc.before, stepRate: tc.after, step: t0.Add(step)}).refuses)
			pre, post := m.share(30*time.Second, step, tc.before), m.share(step+30*time.Second, d, tc.after)
			t.Logf("%g/s → %g/s, seed %d: %.1f%% before the step, %.1f%% from 30 s after it", tc.before, tc.after, seed, 100*pre, 100*post)
			if pre < 0.85 || post < 0.85 {
				t.Errorf("%g/s → %g/s, seed %d: %.1f%% before, %.1f%% after the step; want ≥ 85%% on each side", tc.before, tc.after, seed, 100*pre, 100*post)
			}
		}
	}
}

// After a drop that doubled the delay, the model climbs back toward the host's rate within seconds:
// refused twice at its good interval (the second a drop), it is back within 10% of the limit in 10 s.
func TestModelRecoversWithinSeconds(t *testing.T) {
	m := newModelRun(100*ms, time.Second, 7)
	lim := &limiterHost{rate: 4}
	m.run(time.Minute, 0, lim.refuses)                                                                            // learnt: cruising at about 250 ms
	m.a.Refuse(Sample{Gen: m.a.gen, Kind: RefusedRate, Paced: true, At: t0.Add(time.Minute)}, m.floor, m.ceiling) // at good: the edge, one step
	good := m.a.good
	m.a.Refuse(Sample{Gen: m.a.gen, Kind: RefusedRate, Paced: true, At: t0.Add(time.Minute + time.Second)}, m.floor, m.ceiling) // again at once: a drop
	if m.a.delay < duration.Mul(good, rateBackoff) {
		t.Fatalf("refused at the good %v within %d responses: delay %v, want a backoff (×%g)", good, dropRun, m.a.delay, rateBackoff)
	}
	start := t0.Add(time.Minute + 2*time.Second)
	back := time.Duration(0)
	last := start
	for now := start; now.Sub(start) < 30*time.Second; {
		now = later(last.Add(max(m.a.delay, m.floor)), now)
		last = now
		gen := m.a.gen
		if lim.refuses(now) {
			m.a.Refuse(Sample{Gen: gen, Kind: RefusedRate, Paced: true, At: now}, m.floor, m.ceiling)
			now = now.Add(1100 * time.Millisecond)
			continue
		}
		m.a.Succeed(Sample{Gen: gen, At: now}, m.floor, m.ceiling)
		if back == 0 && m.a.delay <= 275*ms {
			back = now.Sub(start)
		}
	}
	if back == 0 || back > 10*time.Second {
		t.Errorf("back within 10%% of 250ms after %v (0: never in 30 s), want within 10 s", back)
	}
}

// Refusals that speed does not cause (every third request, whatever the rate), 429s with Retry-After 2 s
// or 503s without, do not ratchet the delay: once the model has seen that backing off did not make them
// rarer, the delay stays within 4× the base and decays back to it.
func TestNoiseDoesNotRatchet(t *testing.T) {
	const base = 200 * ms
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		kind       RefusalKind
	}{
		{"429 + Retry-After: 2", 2 * time.Second, RefusedRate},
		{"503 without Retry-After", 0, RefusedUnclear},
	} {
		m := newModelRun(base, tc.retryAfter, 3)
		m.kind = tc.kind
		n := 0
		m.run(3*time.Minute, 20*time.Second, func(time.Time) bool { n++; return n%3 == 0 })
		if !m.a.noisy || m.maxDelay > 4*base || m.a.delay > base+base/10 {
			t.Errorf("%s: noise seen %v; delay at most %v after 20 s, %v at the end; want seen, ≤ %v, back near %v",
				tc.name, m.a.noisy, m.maxDelay, m.a.delay, 4*base, base)
		}
	}
}

// In noise mode, a window of outcomes refused clearly more often than the noise (noiseRise above it,
// and at least noiseExitShare of them) is a rate signal again: the mode ends, and the host counts as a
// limiter from then on (refuted): neither test reads its refusals as noise again. A window refused as
// often as the noise keeps the mode, against the same noise level (it does not follow the windows).
func TestNoiseModeEndsWhenRefusalsRise(t *testing.T) {
	third := counts{n: noiseWindow, refused: noiseWindow / 3}
	n := noise{gen: 1, before: third}
	for w := range 3 { // three windows a little above a third each: not clearly more
		for i := range noiseWindow {
			if n.observe(1, i%5 < 2, true, 0) { // 40% refused, under a third + 15 points
				t.Fatalf("window %d, 40%% refused against a third: read as a rate signal", w)
			}
		}
	}
	if n.before != third {
		t.Fatalf("the noise level moved with the windows: %+v, want %+v", n.before, third)
	}
	rate := false
	for i := range noiseWindow {
		rate = n.observe(1, i%2 == 0, true, 0) || rate // half refused, against a third
	}
	if !rate || !n.refuted || n.gen != 0 {
		t.Fatalf("half refused after a third: rate signal %v, noise %+v; want a rate signal, refuted, the counts afresh", rate, n)
	}
	n.before, n.after, n.gen = counts{n: 6, refused: 2}, counts{n: 6, refused: 2}, 1
	if n.slowedInVain(false) || n.slowedInVain(true) || n.spacedRefusal() || n.spacedRefusal() {
		t.Error("a host that left noise mode read as noise again")
	}
}

// nginx's limit_req without burst answers 503 without Retry-After, and refuses the same share (a half)
// at every pace between half its interval and its interval: slowing down by rateBackoff within that
// range does not make refusals rarer, as with noise. The half is what tells it apart (noise refuses
// less than half): the model never reads it as noise, and keeps the limiter's rate.
func TestNginxIsNotNoise(t *testing.T) {
	for _, rate := range []float64{2, 4, 10} {
		for seed := range uint64(3) {
			m := newModelRun(100*ms, 0, seed)
			m.kind = RefusedUnclear
			m.run(5*time.Minute, 0, (&limiterHost{rate: rate}).refuses)
			if m.a.noisy || m.a.noise.refuted {
				t.Errorf("%g/s, seed %d: nginx's refusals read as noise (noisy %v, left noise mode %v)", rate, seed, m.a.noisy, m.a.noise.refuted)
			}
			if got := m.share(30*time.Second, 5*time.Minute, rate); got < 0.90 {
				t.Errorf("%g/s, seed %d: %.1f%% of the capacity from 30 s on, want ≥ 90%%", rate, seed, 100*got)
			}
		}
	}
}

// Without Retry-After, a refusal after a backoff and a clean response, before noiseSamples outcomes
// at the new pace, waits for them: one piece of evidence backs off once. Refusals in a row, and
// refusals with a Retry-After (whose hold spaces the departures anyway), back off at once.
func TestBackoffWaitsForItsOutcomes(t *testing.T) {
	a := New(100 * ms)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) // nothing known: 150 ms
	a.Succeed(Sample{Gen: a.gen, At: t0}, 100*ms, time.Minute)
	if a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) || a.delay != 150*ms {
		t.Fatalf("refused after one clean response at the new pace: delay %v, want 150ms until %d outcomes", a.delay, noiseSamples)
	}
	if !a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, At: t0}, 100*ms, time.Minute) || a.delay != 225*ms {
		t.Errorf("refused again in a row: delay %v, want 225ms at once", a.delay)
	}
	b := New(100 * ms)
	b.Refuse(Sample{Gen: b.gen, Kind: RefusedRate, Paced: true, At: t0}, 100*ms, time.Minute)
	b.Succeed(Sample{Gen: b.gen, At: t0}, 100*ms, time.Minute)
	if !b.Refuse(Sample{Gen: b.gen, Kind: RefusedRate, Paced: true, At: t0}, 100*ms, time.Minute) || b.delay != 225*ms {
		t.Errorf("with Retry-After: delay %v, want 225ms at once", b.delay)
	}
}

// A refusal of a departure spaced by a whole Retry-After hold is one no limiter without a window gives
// for speed: two of them, once refusals were seen at two paces, and the refusals are noise. The delay
// comes down to at most twice the floor at once. Seen at one pace only, they are not (a window that
// counts every request refuses after a hold when the pace before was too fast).
func TestRefusalsAfterWholeHoldsAreNoise(t *testing.T) {
	a := New(100 * ms)
	a.set(2*time.Second, 100*ms, time.Minute)
	for range noiseSpaced {
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedSpaced, Paced: true, At: t0}, 100*ms, time.Minute)
	}
	if a.noisy {
		t.Fatal("refusals after holds seen at one pace: read as noise")
	}
	seenAtTwoPaces(&a.noise)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedSpaced, Paced: true, At: t0}, 100*ms, time.Minute)
	if !a.noisy || a.delay != 200*ms || a.good != 100*ms {
		t.Errorf("refusals after holds, at two paces: noisy %v, delay %v, good %v; want noise, 200ms, the floor", a.noisy, a.delay, a.good)
	}
}

// seenAtTwoPaces gives n outcomes, clean and refused, on each side of a backoff (twoPaces).
func seenAtTwoPaces(n *noise) {
	n.gen, n.before, n.after = 1, counts{n: 4, refused: 1}, counts{n: 4, refused: 1}
}

// An outage before anything was learnt backs off to the probe interval; once the host answers again,
// the delay comes back to the floor (halving the distance per clean response), not from the probe
// interval by confirmations of three. Nothing the host did not accept is taken as good meanwhile.
func TestOutageWithNothingLearntComesBackToTheFloor(t *testing.T) {
	a := New(100 * ms)
	for range 5 {
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedOutage, At: t0}, 100*ms, time.Minute)
	}
	if a.delay != 2*time.Second || a.good != 0 {
		t.Fatalf("outage: delay %v, good %v; want the 2s probe, nothing good", a.delay, a.good)
	}
	for range 10 {
		a.Succeed(Sample{Gen: a.gen, At: t0}, 100*ms, time.Minute)
	}
	if a.delay != 100*ms {
		t.Errorf("10 clean responses after the outage: delay %v, want back at the 100ms floor", a.delay)
	}
}

// A fleet shares one model (adopting the newest, as every admission returns it): three members taking
// turns on one limiter without burst keep what one process keeps, at least 90% of the capacity from
// 30 s on, and refuse no more often.
func TestFleetModelKeepsWhatItLearnt(t *testing.T) {
	const d, rate = 5 * time.Minute, 4
	for seed := range uint64(3) {
		one := newModelRun(100*ms, time.Second, seed)
		one.run(d, 0, (&limiterHost{rate: rate}).refuses)

		members := []*modelRun{newModelRun(100*ms, time.Second, seed), newModelRun(100*ms, time.Second, seed+10), newModelRun(100*ms, time.Second, seed+20)}
		var shared Bounds
		var version int64
		lim := &limiterHost{rate: rate}
		var accepted, refusals []time.Time
		last, hold := t0, t0
		for i := 0; ; i++ {
			m := members[i%len(members)]
			if version > m.a.version {
				m.a.Adopt(shared.Delay, shared.Good, shared.Bad, version, m.floor, m.ceiling)
			}
			fraction := defaultJitter
			if m.a.ProbingFaster() {
				fraction = 0
			}
			iv := max(m.a.delay, m.floor)
			jit := Jitter(iv, fraction, m.rnd.Float64())
			dep := later(last.Add(iv+jit), hold)
			if dep.Sub(t0) >= d {
				break
			}
			afterHold := last.Before(hold)
			last = dep
			arrival := dep.Add(time.Duration(m.rnd.Int64N(int64(time.Millisecond))))
			now := dep.Add(time.Millisecond)
			before := m.a.Bounds()
			if lim.refuses(arrival) {
				refusals = append(refusals, arrival)
				kind := RefusedRate
				if afterHold {
					kind = RefusedSpaced
				}
				m.a.Refuse(Sample{Gen: m.a.gen, Kind: kind, Paced: true, Jitter: jit, At: now}, m.floor, m.ceiling)
				hold = now.Add(1100 * time.Millisecond)
			} else {
				accepted = append(accepted, arrival)
				m.a.Succeed(Sample{Gen: m.a.gen, At: now}, m.floor, m.ceiling)
			}
			if m.a.Bounds() != before {
				version = max(version+1, now.UnixNano())
				m.a.version, shared = version, m.a.Bounds()
			}
		}
		fleet := &modelRun{accepted: accepted, refusals: refusals}
		steadyOne, steadyFleet := one.share(30*time.Second, d, rate), fleet.share(30*time.Second, d, rate)
		t.Logf("seed %d: one process %.1f%%, %d refusals; a fleet of 3 %.1f%%, %d refusals", seed,
			100*steadyOne, one.refusedIn(30*time.Second, d), 100*steadyFleet, fleet.refusedIn(30*time.Second, d))
		if steadyFleet < 0.90 || fleet.refusedIn(30*time.Second, d) > 3*max(one.refusedIn(30*time.Second, d), 2) {
			t.Errorf("seed %d: a fleet of 3 keeps %.1f%% with %d refusals after 30 s; one process %.1f%% with %d", seed,
				100*steadyFleet, fleet.refusedIn(30*time.Second, d), 100*steadyOne, one.refusedIn(30*time.Second, d))
		}
	}
}

// A refusal of the first departure after a Retry-After hold came a whole hold after the one before:
// no limiter refuses that for speed, so it moves neither the delay nor the count of refusals in a row
// (RefusedSpaced); the pacer marks such a departure (ext's TestFirstDepartureAfterAHoldIsMarked).
func TestRefusalAfterAHoldTeachesNothingAboutSpeed(t *testing.T) {
	a := New(100 * ms)
	a.good, a.bad, a.held = 250*ms, 240*ms, dropRun
	a.set(250*ms, 100*ms, time.Minute)
	if a.Refuse(Sample{Gen: a.gen, Kind: RefusedSpaced, Paced: true, At: t0}, 100*ms, time.Minute) || a.delay != 250*ms || a.good != 250*ms || a.failures != 0 {
		t.Errorf("a refusal after a hold moved the model: delay %v, good %v, %d failures", a.delay, a.good, a.failures)
	}
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// A refusal reads as noise only when it came clearly later after the host's previous accepted request
// than a request the host accepted: nginx refuses under its interval and accepts from it on, so in a
// few outcomes its refused share can fall as little as noise's (a third, then two fifths refused at a
// pace half as slow again) without its refusals being noise.
func TestNoiseNeedsARefusalPastAnAcceptedGap(t *testing.T) {
	for _, c := range []struct {
		refusedAt time.Duration // the credit of the last refusal after the backoff
		noise     bool
	}{
		{refusedAt: 1050 * ms, noise: false}, // under the shortest accepted (1 s) plus a tenth: a limiter's edge
		{refusedAt: 1500 * ms, noise: true},  // refused half a second later than a gap the host accepted
	} {
		var n noise
		for i, credit := range []time.Duration{1000 * ms, 500 * ms, 1100 * ms} { // a third refused
			n.observe(1, i == 1, false, credit)
		}
		n.backoff(2, false)
		for i, credit := range []time.Duration{1000 * ms, 600 * ms, 1200 * ms, c.refusedAt, 1300 * ms} { // two fifths
			n.observe(2, i == 1 || i == 3, false, credit)
		}
		if got := n.slowedInVain(false); got != c.noise {
			t.Errorf("refused %v after the last accepted request, the shortest accepted gap 1s: noise %v, want %v", c.refusedAt, got, c.noise)
		}
	}
}

// Issue 32: a fleet member reads noise only from the outcomes the fleet pooled in its store, at the
// fleet's two paces, never from its own third of them; and not at all from refusals with a Retry-After,
// whose holds space the departures whatever the pace (a window limiter's shares then look like noise
// in a fleet's counts: HAProxy's window at 2/s was flooded in 5 of 40 virtual draws). Its own exact
// credits still say whether a refusal came clearly later than a gap the host accepted.
func TestFleetReadsNoiseFromThePooledOutcomes(t *testing.T) {
	const floor, ceiling = 100 * ms, time.Minute
	noisy := Pool{Mark: 20, Before: PoolCounts{N: 12, Refused: 4}, After: PoolCounts{N: 9, Refused: 3}} // a third at both paces
	limiter := Pool{Mark: 20, Before: PoolCounts{N: 12, Refused: 6}, After: PoolCounts{N: 9, Refused: 3}}
	for _, c := range []struct {
		name   string
		pool   Pool
		paced  bool
		credit time.Duration // the refusal's, since the host's last accepted request (accepted: 300-320 ms)
		noise  bool
	}{
		{"a third refused at both paces", noisy, false, 600 * ms, true},
		{"no pool: the store does not pool", Pool{}, false, 600 * ms, false},
		{"a half refused before: a limiter's share", limiter, false, 600 * ms, false},
		{"refused at an accepted gap: a limiter's edge", noisy, false, 310 * ms, false},
		{"with Retry-After", noisy, true, 600 * ms, false},
	} {
		a := New(floor)
		for i, credit := range []time.Duration{300 * ms, 320 * ms, 310 * ms} { // this member's own outcomes
			a.Succeed(Sample{Gen: a.gen, Credited: credit, Spacing: credit, Fleet: true, At: t0.Add(time.Duration(i) * time.Second)}, floor, ceiling)
		}
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: c.paced, Credited: c.credit, Spacing: c.credit, Fleet: true, Pool: c.pool, At: t0.Add(5 * time.Second)}, floor, ceiling)
		if a.noisy != c.noise {
			t.Errorf("%s: noise mode %v, want %v (delay %v)", c.name, a.noisy, c.noise, a.delay)
		}
	}
}

// A fleet member reads refusals after whole holds as noise only once the fleet's pooled outcomes saw
// refusals at two paces, never its own third of them (twoPaces on a member's counts), and never
// without a pool.
func TestFleetRefusalsAfterWholeHoldsAreNoiseOnThePool(t *testing.T) {
	atTwoPaces := Pool{Mark: 12, Before: PoolCounts{N: 12, Refused: 4}, After: PoolCounts{N: 8, Refused: 3}}
	atOne := Pool{Mark: 12, Before: PoolCounts{N: 12, Refused: 4}, After: PoolCounts{N: 2, Refused: 1}}
	for _, c := range []struct {
		name  string
		pool  Pool
		noise bool
	}{
		{"pooled at two paces", atTwoPaces, true},
		{"pooled at one pace", atOne, false},
		{"no pool", Pool{}, false},
	} {
		a := New(100 * ms)
		a.set(2*time.Second, 100*ms, time.Minute)
		seenAtTwoPaces(&a.noise) // the member's own counts: never read in a fleet
		for range noiseSpaced {
			a.Refuse(Sample{Gen: a.gen, Kind: RefusedSpaced, Paced: true, Fleet: true, Pool: c.pool, At: t0}, 100*ms, time.Minute)
		}
		if a.noisy != c.noise {
			t.Errorf("%s: noise mode %v, want %v", c.name, a.noisy, c.noise)
		}
	}
}
