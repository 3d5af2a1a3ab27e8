package ext

import (
	"testing"
	"time"
)

// Issue 32's rules, fed with explicit facts: a misattribution must fail slow, never fast.

// A clean response after a refusal proves the gap since the host's last accepted request (a limiter
// counts from it), not the delay under test: it confirms nothing. Clean responses spaced by the delay
// itself do.
func TestCleanAfterARefusalConfirmsNothing(t *testing.T) {
	a := newAdaptive(100 * ms)
	a.set(500*ms, 100*ms, time.Minute)
	for range confirmRun {
		a.succeed(sample{gen: a.gen, credited: time.Second, spacing: 500 * ms, at: t0}, 100*ms, time.Minute)
	}
	if a.good != 0 {
		t.Fatalf("%d clean responses 1s after the last accepted request confirmed %v as good", confirmRun, a.good)
	}
	for range confirmRun {
		a.succeed(sample{gen: a.gen, credited: 500 * ms, spacing: 500 * ms, at: t0}, 100*ms, time.Minute)
	}
	if a.good != 500*ms {
		t.Errorf("%d clean responses 500ms after the last accepted one: good %v, want 500ms", confirmRun, a.good)
	}
}

// Two 503s in a row against a limiter, the second at a pace faster than any it accepted, are not an
// outage: the lesson of the first is kept (the refused gap is the lower bound), and the delay keeps
// growing from it rather than coming back to the floor once the host answers.
func TestRefusalsInARowAgainstALimiterAreNotAnOutage(t *testing.T) {
	a := newAdaptive(10 * ms)
	a.refuse(sample{gen: a.gen, kind: refusedUnclear, credited: 10 * ms, spacing: 10 * ms, at: t0}, 10*ms, time.Minute)
	first := a.delay
	a.refuse(sample{gen: a.gen, kind: refusedUnclear, credited: 10*ms + first, spacing: first, at: t0}, 10*ms, time.Minute)
	if a.good != 0 || a.bad < 10*ms+first || a.delay <= first {
		t.Errorf("second 503 in a row at %v: good %v, bad %v, delay %v; want no outage (good unknown), the refused gap as bad, a longer delay",
			10*ms+first, a.good, a.bad, a.delay)
	}
	// At a pace the host accepted before, it is an outage.
	b := newAdaptive(100 * ms)
	b.good, b.delay = 500*ms, 500*ms
	b.refuse(sample{gen: b.gen, kind: refusedUnclear, credited: 500 * ms, at: t0}, 100*ms, time.Minute)
	b.refuse(sample{gen: b.gen, kind: refusedUnclear, credited: time.Second, at: t0}, 100*ms, time.Minute)
	if b.delay < time.Second {
		t.Errorf("503s in a row at a pace accepted before: delay %v, want the outage backoff (at least 1s)", b.delay)
	}
}

// From a floor 100 times shorter than the host's interval (nginx at 1/s without burst, 503, a 10 ms
// floor), the model reaches the rate in a handful of refusals and then keeps it.
func TestLearnsFromFarBelow(t *testing.T) {
	for seed := range uint64(5) {
		m := newModelRun(10*ms, 0, seed)
		m.kind = refusedUnclear
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

// A fleet member judges spacing by the fleet's departures (its admission's facts), never by its own
// (the others sent in between), and reads no noise from its third of the outcomes: a limiter is not
// taken for noise. One process that spaced them itself does.
func TestFleetMemberDoesNotJudgeSpacingAlone(t *testing.T) {
	h := newHost("fleet.test", HostPolicy{BaseDelay: 100 * ms, MaxDelay: time.Minute})
	h.delay.good, h.delay.delay = 250*ms, 250*ms
	seenAtTwoPaces(&h.delay.noise)
	h.lastAccepted = t0
	refusal := outcomeSignals{o: Outcome{Status: 429}, v: classify(Outcome{Status: 429}), hold: t0.Add(10 * time.Second), retryAfterValid: true}
	for i := range noiseSpaced + 1 {
		// Departed after a hold, 3 s after this member's previous departure: by its own reading, spaced.
		at := t0.Add(time.Duration(i+1) * 3 * time.Second)
		res := Reservation{gen: h.delay.gen, afterHold: true, fleet: true, At: at, before: at.Add(-3 * time.Second).UnixNano()}
		smp := h.sampleLocked(res, refusal, at)
		if smp.spacing != 0 || smp.credited != 0 {
			t.Fatalf("a fleet member's sample without the fleet's facts: spacing %v, credited %v; want both unknown", smp.spacing, smp.credited)
		}
		res.facts = fleetFacts{seq: uint64(10 + i), since: 3 * time.Second}
		if smp = h.sampleLocked(res, refusal, at); smp.spacing != 3*time.Second || !smp.fleet {
			t.Fatalf("a fleet member's sample with the fleet's facts: spacing %v, fleet %v; want the fleet's 3s", smp.spacing, smp.fleet)
		}
		h.delay.refuse(smp, 100*ms, time.Minute)
	}
	if h.delay.noisy {
		t.Error("a fleet member read refusals after holds as noise from its own departures")
	}
	// One process that spaced them itself does.
	p := newAdaptive(100 * ms)
	p.good, p.delay = 250*ms, 250*ms
	seenAtTwoPaces(&p.noise)
	for range noiseSpaced {
		p.refuse(sample{gen: p.gen, kind: refusedRate, paced: true, afterHold: true, spacing: 3 * time.Second, credited: 3 * time.Second, at: t0}, 100*ms, time.Minute)
	}
	if !p.noisy {
		t.Error("one process: refusals spaced by whole holds and the good interval not read as noise")
	}
}

// The refusal governor slows a host whatever the model believes: in noise mode the delay decays to the
// floor, yet half the outcomes refused raise its minimum to 1.5 × the interval, which noise mode's
// clean responses cannot bring down.
func TestGovernorSlowsAHostNoiseModeKeepsFast(t *testing.T) {
	a := newAdaptive(100 * ms)
	a.becomeNoisy(100*ms, time.Minute)
	tripped := false
	for i := range governJudge {
		if a.governed(i%2 == 0, 100*ms, 100*ms, time.Minute) {
			tripped = true
		}
	}
	if !tripped || a.delay < 150*ms {
		t.Fatalf("half of %d outcomes refused in noise mode: governor tripped %v, delay %v; want 150ms at least", governJudge, tripped, a.delay)
	}
	for range 10 {
		a.succeed(sample{gen: a.gen, at: t0}, 100*ms, time.Minute)
	}
	if a.delay < 150*ms {
		t.Errorf("noise mode's clean responses brought the delay to %v, under the governor's 150ms", a.delay)
	}
	// A host refusing a quarter of its requests (a third of first attempts) is left alone.
	b := newAdaptive(100 * ms)
	for i := range 4 * governWindow {
		if b.governed(i%4 == 0, 100*ms, 100*ms, time.Minute) {
			t.Fatalf("a quarter refused: the governor tripped after %d outcomes", i+1)
		}
	}
}
