package capacity

import (
	"math"
	"testing"
	"time"
)

// Issue 32's rules, fed with explicit facts: a misattribution must fail slow, never fast.

// A clean response after a refusal proves the gap since the host's last accepted request (a limiter
// counts from it), not the delay under test: it confirms nothing. Clean responses spaced by the delay
// itself do.
func TestCleanAfterARefusalConfirmsNothing(t *testing.T) {
	a := New(100 * ms)
	a.set(500*ms, 100*ms, time.Minute)
	for range confirmRun {
		a.Succeed(Sample{Gen: a.gen, Credited: time.Second, Spacing: 500 * ms, At: t0}, 100*ms, time.Minute)
	}
	if a.good != 0 {
		t.Fatalf("%d clean responses 1s after the last accepted request confirmed %v as good", confirmRun, a.good)
	}
	for range confirmRun {
		a.Succeed(Sample{Gen: a.gen, Credited: 500 * ms, Spacing: 500 * ms, At: t0}, 100*ms, time.Minute)
	}
	if a.good != 500*ms {
		t.Errorf("%d clean responses 500ms after the last accepted one: good %v, want 500ms", confirmRun, a.good)
	}
}

// Two 503s in a row against a limiter, the second at a pace faster than any it accepted, are not an
// outage: the lesson of the first is kept (the refused gap is the lower bound), and the delay keeps
// growing from it rather than coming back to the floor once the host answers.
func TestRefusalsInARowAgainstALimiterAreNotAnOutage(t *testing.T) {
	a := New(10 * ms)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedUnclear, Credited: 10 * ms, Spacing: 10 * ms, At: t0}, 10*ms, time.Minute)
	first := a.delay
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedUnclear, Credited: 10*ms + first, Spacing: first, At: t0}, 10*ms, time.Minute)
	if a.good != 0 || a.bad < 10*ms+first || a.delay <= first {
		t.Errorf("second 503 in a row at %v: good %v, bad %v, delay %v; want no outage (good unknown), the refused gap as bad, a longer delay",
			10*ms+first, a.good, a.bad, a.delay)
	}
	// At a pace the host accepted before, it is an outage.
	b := New(100 * ms)
	b.good, b.delay = 500*ms, 500*ms
	b.Refuse(Sample{Gen: b.gen, Kind: RefusedUnclear, Credited: 500 * ms, At: t0}, 100*ms, time.Minute)
	b.Refuse(Sample{Gen: b.gen, Kind: RefusedUnclear, Credited: time.Second, At: t0}, 100*ms, time.Minute)
	if b.delay < time.Second {
		t.Errorf("503s in a row at a pace accepted before: delay %v, want the outage backoff (at least 1s)", b.delay)
	}
}

// From a floor 100 times shorter than the host's interval (nginx at 1/s without burst, 503, a 10 ms
// floor), the model reaches the rate in a handful of refusals and then keeps it.
func TestLearnsFromFarBelow(t *testing.T) {
	for seed := range uint64(5) {
		m := newModelRun(10*ms, 0, seed)
		m.kind = RefusedUnclear
		m.run(3*time.Minute, 0, (&limiterHost{rate: 1}).refuses)
		if n := m.refusedIn(0, 30*time.Second); n > 6 {
			t.Errorf("seed %d: %d refusals in the first 30 s, want a handful (at most 6)", seed, n)
		}
		if share := float64(len(m.refusals)) / float64(len(m.refusals)+len(m.accepted)); share > 0.10 {
			t.Errorf("seed %d: %.1f%% of requests refused, want at most 10%%", seed, 100*share)
		}
		if got := m.share(30*time.Second, 3*time.Minute, 1); got < 0.85 {
			t.Errorf("seed %d: %.1f%% of the rate from 30 s on, want at least 85%%", seed, 100*got)
		}
	}
}

// A fleet member reads no noise from refusals after holds, spaced by its fleet's departures as they
// are (its third of the outcomes): a limiter is not taken for noise. One process that spaced them
// itself does. (That a fleet member's sample carries the fleet's spacing, never its own, is the
// pacer's: TestFleetMemberSampleCarriesTheFleetsSpacing.)
func TestFleetMemberDoesNotJudgeSpacingAlone(t *testing.T) {
	for _, fleet := range []bool{true, false} {
		a := New(100 * ms)
		a.good, a.delay = 250*ms, 250*ms
		seenAtTwoPaces(&a.noise)
		for i := range noiseSpaced + 1 {
			at := t0.Add(time.Duration(i+1) * 3 * time.Second)
			a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, AfterHold: true, Spacing: 3 * time.Second, Credited: 3 * time.Second, At: at, Fleet: fleet}, 100*ms, time.Minute)
		}
		if fleet && a.noisy {
			t.Error("a fleet member read refusals after holds as noise from its own outcomes")
		}
		if !fleet && !a.noisy {
			t.Error("one process: refusals spaced by whole holds and the good interval not read as noise")
		}
	}
}

// The refusal governor slows a host whatever the model believes: in noise mode the delay decays to the
// floor, yet half the outcomes refused raise its minimum to 1.5 × the interval, which noise mode's
// clean responses cannot bring down.
func TestGovernorSlowsAHostNoiseModeKeepsFast(t *testing.T) {
	a := New(100 * ms)
	a.becomeNoisy(100*ms, time.Minute)
	tripped := false
	for i := range GovernJudge {
		if a.Governed(i%2 == 0, 100*ms, 100*ms, time.Minute) {
			tripped = true
		}
	}
	if !tripped || a.delay < 150*ms {
		t.Fatalf("half of %d outcomes refused in noise mode: governor tripped %v, delay %v; want 150ms at least", GovernJudge, tripped, a.delay)
	}
	for range 10 {
		a.Succeed(Sample{Gen: a.gen, At: t0}, 100*ms, time.Minute)
	}
	if a.delay < 150*ms {
		t.Errorf("noise mode's clean responses brought the delay to %v, under the governor's 150ms", a.delay)
	}
	// A host refusing a quarter of its requests (a third of first attempts) is left alone.
	b := New(100 * ms)
	for i := range 4 * governWindow {
		if b.Governed(i%4 == 0, 100*ms, 100*ms, time.Minute) {
			t.Fatalf("a quarter refused: the governor tripped after %d outcomes", i+1)
		}
	}
}

// A limiter's rate sought from a floor far under it (1/s from 10 ms, 429 + Retry-After 1 s) costs a
// refusal a step, each a slowdown of 1.5 or more, and their holds pace the search: 8 of its first 20
// outcomes refused are the search's, answered as the governor would, and do not trip it (they held the
// host 1.5× slower than it was found for a minute after). The same refusals at a pace the model can no
// longer slow (its ceiling) trip it.
func TestGovernorLeavesTheSearchFromBelowAlone(t *testing.T) {
	for _, c := range []struct {
		ceiling time.Duration
		trips   bool
	}{{ceiling: time.Minute, trips: false}, {ceiling: 10 * ms, trips: true}} {
		a := New(10 * ms)
		tripped := false
		at := t0
		for i := range GovernJudge {
			refused := i < 16 && i%2 == 0 // a refusal and a clean response after its hold, 8 times
			at = at.Add(time.Second)
			if refused {
				a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: a.delay, Spacing: a.delay, At: at}, 10*ms, c.ceiling)
			} else {
				a.Succeed(Sample{Gen: a.gen, AfterHold: true, Credited: 1100 * ms, Spacing: 1100 * ms, At: at}, 10*ms, c.ceiling)
			}
			tripped = a.Governed(refused, a.delay, 10*ms, c.ceiling) || tripped
		}
		if tripped != c.trips {
			t.Errorf("ceiling %v: 8 refusals of the search in 20 outcomes tripped the governor %v, want %v (delay %v)", c.ceiling, tripped, c.trips, a.delay)
		}
	}
}

// A limiter read as an outage (503s in a row, nothing good known) fails slow: on the way back down
// from the outage probe, each step is a probe that one clean response confirms, and the step the
// host refuses sends the delay back to the last one it accepted, never further down. Before, the floor
// was taken as good, the way back went to it whatever the refusals, and a limiter at 0.5/s was asked
// at twice its rate over and over.
func TestLimiterReadAsAnOutageFailsSlow(t *testing.T) {
	a := New(10 * ms)
	for range 5 {
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedOutage, At: t0}, 10*ms, time.Minute)
	}
	if a.good != 0 {
		t.Fatalf("an outage with nothing learnt took %v as good", a.good)
	}
	probe := a.delay
	a.Succeed(Sample{Gen: a.gen, Credited: probe, Spacing: probe, At: t0}, 10*ms, time.Minute)
	if a.good != probe || a.delay >= probe {
		t.Fatalf("clean at the outage probe %v: good %v, delay %v; want it good, and a step down", probe, a.good, a.delay)
	}
	step := a.delay
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedUnclear, Credited: step, Spacing: step, At: t0}, 10*ms, time.Minute)
	if a.delay != probe || a.bad != step {
		t.Errorf("the step down to %v refused: delay %v, bad %v; want back at %v (the last accepted), %v refused", step, a.delay, a.bad, probe, step)
	}
}

// A host that refuses a pace right after confirmRun clean responses confirmed it (a token bucket's
// burst let them through: the example crawler's capacity host at its 300 ms floor) is bursty: its next
// paces need burstConfirm times as many clean responses to be confirmed, so a bucket refilled during a
// Retry-After hold does not confirm a pace it cannot sustain. Before, it took one clean response more
// than a confirmation run to tell, and the demo's host was refused 4 times in 30 pages; with twice as
// many 3 times, and 2 now.
func TestRefusedRightAfterItsConfirmationIsABurst(t *testing.T) {
	a := New(300 * ms)
	for range confirmRun {
		a.Succeed(Sample{Gen: a.gen, Credited: 310 * ms, Spacing: 310 * ms, At: t0}, 300*ms, time.Minute)
	}
	if a.good != 300*ms {
		t.Fatalf("%d clean responses at the floor: good %v, want 300ms", confirmRun, a.good)
	}
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: 310 * ms, Spacing: 310 * ms, At: t0}, 300*ms, time.Minute)
	if a.confirmRun() != burstConfirm*confirmRun {
		t.Errorf("refused right after %d clean responses confirmed the pace: a confirmation needs %d, want %d", confirmRun, a.confirmRun(), burstConfirm*confirmRun)
	}
}

// With nothing good known, refusals with a Retry-After back off no further than twice the outage probe
// (4.8 s from a 300 ms floor): a host that refuses a third of its requests at any pace (a flaky backend
// answering 429 + Retry-After) reached a minute's interval before (12 min for 60 pages), while a
// limiter that still refuses there is the refusal governor's to slow.
func TestPacedRefusalsWithNothingKnownStopAtTwiceTheOutageProbe(t *testing.T) {
	a := New(300 * ms)
	for i := range 20 {
		gap := a.delay + 2200*ms // the hold before, then the delay
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, AfterHold: i%2 == 0, Credited: gap, Spacing: gap, At: t0.Add(time.Duration(i) * 5 * time.Second)}, 300*ms, time.Minute)
	}
	if want := 2 * outageProbe(300*ms, time.Minute); a.delay > want {
		t.Errorf("20 refusals with Retry-After, nothing accepted: delay %v, want at most %v", a.delay, want)
	}
}

// cruising is a model that has learnt a host's interval (good) and holds it: its bounds close, its
// good interval held longer than dropRun, its last refusal at refused.
func cruising(good time.Duration, refused time.Time) Model {
	return Model{delay: good, good: good, bad: good - good/64, gain: probeGain, held: dropRun, refused: refused.UnixNano()}
}

// cruiseToProbe feeds the model a clean response every delay from s.At on, each spaced and credited
// by it (the rest of s as given), until the delay moves (the next probe), and returns that instant.
func cruiseToProbe(t *testing.T, a *Model, s Sample, floor, ceiling time.Duration) time.Time {
	t.Helper()
	iv, from := a.delay, s.At
	for a.delay == iv {
		if s.At.Sub(from) > 10*time.Minute {
			t.Fatal("no cruise probe in 10 minutes")
		}
		s.At = s.At.Add(iv)
		s.Gen, s.Credited, s.Spacing = a.gen, iv, iv
		a.Succeed(s, floor, ceiling)
	}
	return s.At
}

// A cruise probe a share g faster than the good interval is confirmed by about 1.5/g clean responses,
// not confirmRun: HAProxy's window, which counts every request in periods, lets a pace 8% too fast
// through for about 12 requests by phase before it refuses one, and a probe confirmed by 3 made the
// model cruise under the host's limit and climb faster still (1.3 refusals a minute at 1/s).
func TestCruiseProbeNeedsAsManyResponsesAsItsStep(t *testing.T) {
	const floor = 50 * ms
	a := cruising(time.Second, t0)
	at := cruiseToProbe(t, &a, Sample{At: t0}, floor, time.Minute)
	probe := a.delay
	g := float64(time.Second-probe) / float64(time.Second)
	need := int(math.Ceil(stepConfirm / g))
	for i := 1; i < need; i++ {
		at = at.Add(probe)
		a.Succeed(Sample{Gen: a.gen, Credited: probe, Spacing: probe, At: at}, floor, time.Minute)
		if a.good != time.Second {
			t.Fatalf("probe at %v (%.0f%% faster) confirmed after %d clean responses, want %d", probe, 100*g, i, need)
		}
	}
	at = at.Add(probe)
	a.Succeed(Sample{Gen: a.gen, Credited: probe, Spacing: probe, At: at}, floor, time.Minute)
	if a.good != probe {
		t.Errorf("probe at %v after %d clean responses: good %v, want the probe confirmed", probe, need, a.good)
	}
}

// A refusal at the edge of what the host accepts (at the good interval, long held) shows there is no
// capacity beyond it: the next cruise probe waits twice the probe wait, as after a refused probe, so a
// host whose capacity holds sees at most about one refusal a minute once learnt.
func TestEdgeRefusalDelaysTheNextProbe(t *testing.T) {
	const floor = 50 * ms
	a := cruising(500*ms, t0)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: 500 * ms, Spacing: 500 * ms, At: t0}, floor, time.Minute)
	edge := a.delay
	if a.good != edge || edge <= 500*ms {
		t.Fatalf("refused at the good interval long held: delay %v good %v, want one edge step slower", edge, a.good)
	}
	at := cruiseToProbe(t, &a, Sample{At: t0}, floor, time.Minute)
	if wait := at.Sub(t0); wait < 2*cruiseMinTime {
		t.Errorf("the next probe %v after an edge refusal, want at least %v", wait, 2*cruiseMinTime)
	}
}

// A fleet member's credit after a departure the host did not count as an accepted page (a refusal, a
// robots.txt read) is only a lower bound of the gap since the host's last accepted request. A clean
// response credited with it sets no upper bound (a robots.txt read 10 ms before the first page made
// 10 ms an interval the host accepted, and every refusal after it read as not about speed: 8 refusals
// to climb from a 10 ms floor), and a refusal credited with it bounds the host's interval by the
// departure's own spacing: HAProxy's window counts refused requests, and the doubled credit put the
// refused bound above an interval the host then accepted, where no bisection could come back (a fleet
// at two thirds of the rate for minutes). Nor does the next delay reach as far as the doubled credit:
// it is the departure's own spacing (a fleet on HAProxy's window at 2/s went to the 2 s outage probe
// after the first refusal past a hold, and took 45-90 s to come back to the rate).
func TestFleetCreditAfterAnUncountedDepartureIsALowerBound(t *testing.T) {
	const floor = 10 * ms
	a := New(floor)
	a.Succeed(Sample{Gen: a.gen, Credited: 21 * ms, Spacing: 10 * ms, CreditLower: true, Fleet: true, At: t0}, floor, time.Minute)
	if a.upper != 0 {
		t.Fatalf("a clean response credited with a lower bound set the upper bound %v, want none", a.upper)
	}
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: 2200 * ms, Spacing: 1100 * ms, CreditLower: true, AfterHold: true, Fleet: true, At: t0.Add(time.Second)}, floor, time.Minute)
	if a.bad != 1100*ms {
		t.Errorf("refused 1.1s after the departure before, the credit a lower bound (2.2s): refused bound %v, want 1.1s", a.bad)
	}
	if a.delay != 1100*ms {
		t.Errorf("the delay after it: %v, want the refused spacing 1.1s, not the doubled credit", a.delay)
	}
}

// A rate refusal of the first departure after a Retry-After hold bounds the interval by the hold's
// spacing (fail slow: nginx slower than its Retry-After refuses it so), but HAProxy's window refuses
// it for the requests before the hold, whatever its rate. Once good is confirmed just above that
// bound, the next departures probe below it at once, not after a cruise of 30 responses and 30 s. So
// does a fleet member's refusal right after a refused departure of the fleet (CreditLower: it came
// after that refusal's hold, which this member may not have heard of). A bound set by a departure
// spaced by the pace alone is cruised at as before.
func TestBoundAfterAHoldIsProbedAtOnce(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	for _, tc := range []struct {
		name                    string
		afterHold, fleet, lower bool
		probe                   bool
	}{
		{"after a hold", true, false, false, true},
		{"a fleet's, after a refused departure", false, true, true, true},
		{"spaced by the pace", false, false, false, false},
		{"a fleet's, spaced by the pace", false, true, false, false},
	} {
		a := New(floor)
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: 10 * ms, Spacing: 10 * ms, At: t0}, floor, ceiling)
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, AfterHold: tc.afterHold, Fleet: tc.fleet, CreditLower: tc.lower,
			Credited: 1150 * ms, Spacing: 1150 * ms, At: t0}, floor, ceiling)
		// Confirmed at 1.17 s, within the bisection's last step of the refused 1.15 s: cruising.
		a.good, a.delay, a.prevGood = 1170*ms, 1170*ms, 0
		at := t0.Add(2 * time.Second)
		for range confirmRun {
			at = at.Add(1170 * ms)
			a.Succeed(Sample{Gen: a.gen, Credited: 1170 * ms, Spacing: 1170 * ms, Fleet: tc.fleet, At: at}, floor, ceiling)
		}
		if probing := a.delay < a.good; probing != tc.probe {
			t.Errorf("%s: delay %v after %d clean responses at good %v; want a probe below it: %v", tc.name, a.delay, confirmRun, a.good, tc.probe)
		}
	}
}

// A fleet member that adopted the bound another member's refusal past a hold set (the shared model
// carries the bounds, not that member's holdBound) and confirms good at that bound probes below it at
// once: the host accepted the interval it refused, so that refusal was not about it. Before, the
// member that confirmed cruised at the bound for 30 responses and 30 s (the fleet on HAProxy's window
// at 2/s: 44 s at 1.1 s). A good confirmed above its refused bound is cruised at as before.
func TestFleetConfirmedAtAnAdoptedBoundProbesAtOnce(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	for _, tc := range []struct {
		name       string
		delay, bad time.Duration
		probe      bool
	}{
		{"confirmed at the refused bound", 1107 * ms, 1107 * ms, true},
		{"confirmed above it (a creep step follows)", 1200 * ms, 1107 * ms, false},
	} {
		a := New(floor)
		a.Adopt(tc.delay, 0, tc.bad, t0.UnixNano(), floor, ceiling) // another member's refusal past a hold
		at := t0
		for range confirmRun {
			at = at.Add(tc.delay)
			a.Succeed(Sample{Gen: a.gen, Credited: tc.delay, Spacing: tc.delay, Fleet: true, At: at}, floor, ceiling)
		}
		if a.good != tc.delay {
			t.Fatalf("%s: good %v after %d clean responses at %v, want it confirmed", tc.name, a.good, confirmRun, tc.delay)
		}
		if a.probing != tc.probe {
			t.Errorf("%s: delay %v once good %v is confirmed (refused bound %v); want a probe below the bound: %v", tc.name, a.delay, a.good, tc.bad, tc.probe)
		}
	}
}

// A fleet climbs as one crawler: a member that confirms a climbing probe another member started (a
// step of 32% below good) takes the next step from the prober's, twice as far (50% at most), at once.
// Before, it doubled its own gain (8% → 16%), and a refusal of that step read as a cruise probe's: a
// minute at 16% below HAProxy's rate at 2/s.
func TestFleetConfirmedProbeClimbsFromTheProbersStep(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	a := cruising(850*ms, t0)
	probe := 578 * ms // 32% below good: the prober's third step
	a.Adopt(probe, 850*ms, probe, t0.Add(time.Second).UnixNano(), floor, ceiling)
	if !a.probing {
		t.Fatalf("adopted a probe 32%% below good: probing %v", a.probing)
	}
	at := t0.Add(time.Second)
	for range a.confirmNeed() {
		at = at.Add(probe)
		a.Succeed(Sample{Gen: a.gen, Credited: probe, Spacing: probe, Fleet: true, At: at}, floor, ceiling)
	}
	if a.good != probe {
		t.Fatalf("good %v after the probe's confirmation, want %v", a.good, probe)
	}
	if want := probe - probe*maxProbeGain/100; a.delay != want {
		t.Errorf("the next step after a 32%% step confirmed: %v, want %v (%d%% below %v)", a.delay, want, maxProbeGain, probe)
	}
}

// A fleet member that confirms the half step another member took after its climbing probe was
// refused ends the climb there, as the prober does (TestAcceptedHalfStepEndsTheClimb): it cruises at
// the half step rather than going twice as far again, past the refused probe; whether it heard of the
// refusal before the half step or with it.
func TestFleetConfirmedHalfStepEndsTheClimb(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	for _, heard := range []bool{true, false} {
		a := cruising(850*ms, t0.Add(-time.Minute))
		a.Adopt(578*ms, 850*ms, 578*ms, t0.UnixNano(), floor, ceiling) // the prober's 32% step
		if heard {
			a.Adopt(850*ms, 850*ms, 833*ms, t0.Add(time.Second).UnixNano(), floor, ceiling) // refused
		}
		a.Adopt(714*ms, 850*ms, 714*ms, t0.Add(2*time.Second).UnixNano(), floor, ceiling) // its half step, 16%
		if !a.probing {
			t.Fatalf("heard of the refusal %v: adopted the half step, probing %v", heard, a.probing)
		}
		at := t0.Add(2 * time.Second)
		for range a.confirmNeed() {
			at = at.Add(714 * ms)
			a.Succeed(Sample{Gen: a.gen, Credited: 714 * ms, Spacing: 714 * ms, Fleet: true, At: at}, floor, ceiling)
		}
		if a.good != 714*ms {
			t.Fatalf("heard of the refusal %v: good %v after the half step's confirmation, want 714ms", heard, a.good)
		}
		if a.delay != 714*ms || a.gain != probeGain {
			t.Errorf("heard of the refusal %v: the half step 714ms confirmed: delay %v, gain %d%%; want a cruise at 714ms, gain %d%% (the refused 578ms lies within the next step)", heard, a.delay, a.gain, probeGain)
		}
	}
}

// A member that adopted another's half step, which a third member then confirms, cruises at it too:
// the half step's marker does not outlive the probe here, and its next clean response is no climbing
// step.
func TestFleetHalfStepConfirmedElsewhereEndsTheClimbHere(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	a := cruising(850*ms, t0.Add(-time.Minute))
	a.Adopt(578*ms, 850*ms, 578*ms, t0.UnixNano(), floor, ceiling)                    // the prober's 32% step
	a.Adopt(850*ms, 850*ms, 833*ms, t0.Add(time.Second).UnixNano(), floor, ceiling)   // refused
	a.Adopt(714*ms, 850*ms, 714*ms, t0.Add(2*time.Second).UnixNano(), floor, ceiling) // its half step, 16%
	a.Adopt(714*ms, 714*ms, 714*ms, t0.Add(9*time.Second).UnixNano(), floor, ceiling) // confirmed elsewhere
	at := t0.Add(9 * time.Second)
	for range 3 {
		at = at.Add(714 * ms)
		a.Succeed(Sample{Gen: a.gen, Credited: 714 * ms, Spacing: 714 * ms, Fleet: true, At: at}, floor, ceiling)
	}
	if a.delay != 714*ms {
		t.Errorf("the half step 714ms confirmed elsewhere: delay %v after clean responses at it, want a cruise at 714ms", a.delay)
	}
}

// A cruise probe refused elsewhere in the fleet, started and refused between two of this member's
// admissions, leaves the fleet cruising at the same good interval with its refused bound at the creep
// below it, a hair under the gap an edge refusal had left there. The member takes it as the refusal it
// is: its next probe waits twice the probe wait from it, as the prober's does, so the fleet probes as
// one crawler (it probed 31 s after the fleet's refused probe, 4 refused probes in 200 s at 2/s).
func TestFleetProbeRefusedElsewhereDelaysTheNextProbeHere(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	good := 508597 * time.Microsecond
	edge := t0.Add(-time.Minute)
	a := cruising(good, edge)
	a.bad = good - good/50 + 2*time.Microsecond // the edge's refused gap, just above the creep
	refused := t0
	a.Adopt(good, good, a.creep(), refused.UnixNano(), floor, ceiling)
	at := cruiseToProbe(t, &a, Sample{Fleet: true, At: refused}, floor, ceiling)
	if wait := at.Sub(refused); wait < 2*cruiseMinTime {
		t.Errorf("the next probe %v after a cruise probe refused elsewhere, want at least %v", wait, 2*cruiseMinTime)
	}
}

// A good interval lately confirmed and refused at once (a creep step the host let through by phase or
// by the network's jitter) finds the host's edge, as a refusal at a good interval long held does: the
// model goes back to the good before it, and the next cruise probe waits twice the probe wait. It
// probed 30 s later, and nginx at 2/s saw three refusals in the two minutes after the first; HAProxy's
// window at 2/s did in a third of the draws.
func TestYoungGoodRefusedDelaysTheNextProbe(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	good := 510 * ms
	a := cruising(500*ms, t0.Add(-time.Minute))
	a.prevGood, a.held = good, 2
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: 499 * ms, Spacing: 500 * ms, At: t0}, floor, ceiling)
	if a.delay != good || a.good != good {
		t.Fatalf("a good confirmed 2 responses ago, refused: delay %v good %v, want back at %v", a.delay, a.good, good)
	}
	at := cruiseToProbe(t, &a, Sample{At: t0}, floor, ceiling)
	if wait := at.Sub(t0); wait < 2*cruiseMinTime {
		t.Errorf("the next probe %v after it, want at least %v", wait, 2*cruiseMinTime)
	}
}

// A good interval lately confirmed and refused after its jitter lengthened the gap past the good before
// it goes back no faster than one edge step beyond the gap refused: back at the good before it, the
// model would cruise under a gap the host had just refused (a fleet on HAProxy's window at 0.5/s went
// back to 1839 ms after a refusal at 1865 ms, and was refused twice more in 40 s).
func TestYoungGoodRefusedNeverGoesBackUnderTheGapRefused(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	a := cruising(1802*ms, t0.Add(-time.Minute))
	a.prevGood, a.held = 1839*ms, 2
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Jitter: 63 * ms, Credited: 1865 * ms, Spacing: 1865 * ms, At: t0}, floor, ceiling)
	if want := 1865*ms + 1865*ms*edgeStep/100; a.good != want || a.delay != want {
		t.Fatalf("refused at 1802 ms + 63 ms of jitter, the good before it 1839 ms: delay %v good %v, want %v (an edge step beyond the gap refused)", a.delay, a.good, want)
	}
	// Nor does it creep back to that gap: the next clean responses keep it at the edge.
	at := t0
	for range 2 * dropRun {
		at = at.Add(a.good)
		a.Succeed(Sample{Gen: a.gen, Credited: a.good, Spacing: a.good, At: at}, floor, ceiling)
		if a.delay < 1865*ms {
			t.Fatalf("%v after the refusal: delay %v, under the gap refused (1865 ms)", at.Sub(t0), a.delay)
		}
	}
}

// A refused cruise probe followed by a refusal at the edge is two misses in seconds: the next probe
// waits until the first lies missSpan behind, not one probe wait after the second, so a host whose
// edge is noisy sees at most about one refusal a minute (real nginx at 2/s: a probe refused, the edge
// 4 s later, the next probe 75 s on, three refusals in 80 s).
func TestProbeAndEdgeRefusedTogetherSpaceTheNextProbe(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	good := 500 * ms
	a := cruising(good, t0.Add(-2*time.Minute))
	at := cruiseToProbe(t, &a, Sample{At: t0}, floor, ceiling) // cruise to the first probe
	probe := a.delay
	at = at.Add(probe)
	refusedProbe := at
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: probe, Spacing: probe, At: at}, floor, ceiling)
	if a.delay != good {
		t.Fatalf("a refused cruise probe: delay %v, want back at good %v", a.delay, good)
	}
	for range 8 { // 4 s at good, then the edge refuses it
		at = at.Add(good)
		a.Succeed(Sample{Gen: a.gen, Credited: good, Spacing: good, At: at}, floor, ceiling)
	}
	at = at.Add(good)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Credited: good, Spacing: good, At: at}, floor, ceiling)
	edge := a.delay
	if a.good != edge || edge <= good {
		t.Fatalf("refused at the good interval long held: delay %v good %v, want one edge step slower", edge, a.good)
	}
	at = cruiseToProbe(t, &a, Sample{At: at}, floor, ceiling)
	if wait, want := at.Sub(refusedProbe), 2*time.Minute; wait < want { // two refusals in a minute, then none for one
		t.Errorf("the next probe %v after a refused probe and an edge refusal, want at least %v", wait, want)
	}
}

// A drop (refused again at the good interval soon after the edge) bounds the host's interval by the gap
// the departure asked for, its jitter included, not by the delay under it: the way back from the
// backoff creeps down to that bound, never under it (a fleet on HAProxy's window at 0.5/s crept 40 ms
// under a gap refused 4 s before, and was refused twice more in a minute). The gap measured carries
// the crawler's own lateness, which is not the host's.
func TestDropBoundsByTheGapAskedFor(t *testing.T) {
	const floor, ceiling = 100 * ms, time.Minute
	a := New(floor)
	a.good, a.bad, a.held = 250*ms, 245*ms, dropRun/2 // refused at the edge lately
	a.set(250*ms, floor, ceiling)
	a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Jitter: 10 * ms, Credited: 265 * ms, Spacing: 265 * ms, At: t0}, floor, ceiling)
	if a.good != 0 || a.bad != 260*ms {
		t.Errorf("refused at good 250ms + 10ms of jitter, sent 5ms late, within %d clean responses: good %v bad %v, want unknown and 260ms (the gap asked for)", dropRun, a.good, a.bad)
	}
}

// A refusal at the good interval within missSpan of the last miss is a window's phase, not the edge's
// timing noise: the step beyond the gap asked for is 1/held of it (a pace a share g too fast passes up to
// 1/g requests), not edgeStep. A fleet on HAProxy's window at 0.5/s, 7% under the rate, climbed 2% a
// refusal, five refusals in two minutes. A refusal at the edge with no miss in missSpan keeps edgeStep.
func TestEdgeRefusedAgainStepsByThePhase(t *testing.T) {
	const floor, ceiling = 10 * ms, time.Minute
	asked := 1894 * ms
	for _, c := range []struct {
		name     string
		lastMiss time.Duration // before the refusal
		want     time.Duration
	}{
		{"the last miss 68 s before", 68 * time.Second, asked + asked/34},
		{"the last miss 3 minutes before", 3 * time.Minute, asked + asked*edgeStep/100},
	} {
		a := cruising(1881*ms, t0.Add(-c.lastMiss))
		a.held, a.missedAt = 34, [2]int64{t0.Add(-c.lastMiss).UnixNano(), 0}
		a.Refuse(Sample{Gen: a.gen, Kind: RefusedRate, Paced: true, Jitter: 13 * ms, Credited: asked, Spacing: asked, At: t0}, floor, ceiling)
		if a.good != c.want || a.delay != c.want {
			t.Errorf("%s: refused at 1881 ms + 13 ms of jitter after 34 clean responses: delay %v good %v, want %v", c.name, a.delay, a.good, c.want)
		}
	}
}
