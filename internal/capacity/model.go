// Package capacity is one host's capacity model: what the host can take, learnt from its refusals
// (the rate signal: bounds bisected, cruise probes, the noise test, the refusal governor) and from its
// latency (the queueing signal's in-flight cap, the slow-host rule). It is pure: every input is an
// explicit Sample or latency with its instant, every output a delay, a cap or a verdict the pacer
// applies and audits. No lock (the pacer's host mutex guards a Model), no logger, no store, no clock,
// and nothing imported from the pacer (github.com/collypace/ext), so the arrows point one way.
package capacity

import (
	"cmp"
	"math"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// The capacity model: what a host can take, learnt from its refusals (the rate signal) and from its
// latency (the queueing signal, queue.go). The numbers are documented in the
// README ("The capacity model").
const (
	// rateBackoff multiplies the delay when a rate refusal says nothing better: nothing is known yet,
	// or the host refused a rate it accepted before (its capacity dropped). A half slower, not twice:
	// a step twice as fine costs a limiter one refusal more to learn, and a host whose refusals do
	// not depend on the pace half the slowdown before the noise shows (see noise).
	rateBackoff = 1.5
	// refusalFactor multiplies the delay when the host fails (an outage), up to outageProbe.
	refusalFactor = 2
	// confirmRun is how many clean responses at a probed interval make it the known-good interval, at
	// first; a host that refuses an interval right after a confirmation run (a token bucket's burst let
	// it through) needs burstConfirm runs from then on, and one that refuses a good interval lately
	// confirmed doubles it again, up to maxConfirmRun.
	confirmRun    = 3
	maxConfirmRun = 48
	// burstConfirm: a bucket refilled during a Retry-After hold lets its burst through at any pace, and
	// a pace 10% too fast for about ten requests more (the demo's capacity host: 2/s, burst 2, confirmed
	// 450 ms with two runs and was refused at it once its burst was spent).
	burstConfirm = 4
	// bisectUntil stops bisecting between the slowest refused and the fastest good interval once they
	// are this close (good/refused); creepStep then moves good towards the refused bound in steps of
	// this share of it, each confirmed before the next, until the next step would reach the bound: the
	// pacer then cruises at good. A refused step costs a Retry-After hold and an accepted one nothing,
	// so the last eighth is crept, not halved: one refusal ends it, and the cruise is within 2% of the
	// host's limit for the rest of the crawl.
	bisectUntil = 1.125
	creepStep   = 0.02
	// cruiseBeforeProbe and cruiseMinTime are how many clean responses at the good interval, and how
	// long after the last refusal, come before the next probe for more capacity (BBR's probe cycle),
	// once the bisection is done; probeGain is how much faster that probe goes. An accepted probe is
	// followed by the next at once, each step twice the last (up to maxProbeGain), so a capacity that
	// rose is climbed in a few seconds; each refused probe in a row doubles the wait, up to
	// cruiseMaxTime (or what a long Retry-After hold demands: see spaceProbes), and so does a refusal
	// at the edge or at a good interval lately confirmed (no capacity beyond it), so a host whose
	// capacity holds sees at most about one refusal a minute once learnt. A refused bisection or creep
	// step does not: the first probe comes one probe wait after learning, and finds a capacity that
	// rose within it (issue 26's step from 2/s to 4/s at 90 s was found at 163 s when it waited
	// twice). A climbing probe (after an accepted one) is confirmed by as many responses as its step
	// needs (confirmNeed). Gains in percent.
	cruiseBeforeProbe = 30
	cruiseMinTime     = 30 * time.Second
	cruiseMaxTime     = 75 * time.Second
	// missSpan: no cruise probe leaves while the last two misses (refused probes, refusals at the edge
	// or at a good lately confirmed) lie within missSpan before it, so a probe and an edge refusal that
	// follows it cost one probe wait more: at most about one refusal a minute where the edge is noisy
	// (real nginx at 2/s: a probe refused, the edge 4 s later, the next probe 75 s on, three refusals
	// in 80 s). A host whose edge is clean keeps the doubling waits above.
	missSpan = 2 * time.Minute
	// probeCostShare is the share of the crawl's time that refused probes may cost (see spaceProbes).
	probeCostShare = 0.05
	probeGain      = 8
	maxProbeGain   = 50
	// edgeStep: a refusal at the good interval moves it this many percent beyond the gap the refused
	// departure asked for. The model cruises at the edge of what the host accepts, where a fraction of
	// a millisecond of timing noise decides (nginx keeps its rate per millisecond). That refusal says
	// "at the edge", not "capacity dropped": one small step clears the noise, where a doubling would
	// halve the crawl. The step starts from the gap asked for, its jitter included, not from good:
	// HAProxy's window lets a pace a few percent too fast through by phase, and steps from under the
	// gap it refused cost three refusals a minute. Not from the gap measured, which carries the
	// crawler's own lateness (nginx at 4/s: 7 ms, and good went 5.6% over the limit, not 2.8%).
	edgeStep = 2
	// dropRun: a refusal at the good interval within this many clean responses of its confirmation or
	// of the last refusal there shows that the host accepts measurably less than it did (its capacity
	// dropped): only then does the model let go of the good interval and back off.
	dropRun = 16
	// slowFactor multiplies the delay when latency stays above the host's rolling p95 while the
	// crawler keeps at most one request in flight: the host is slow for everyone, not queueing ours.
	slowFactor = 1.25
	// slowRun is how many consecutive samples above p95 it takes: one healthy sample in twenty
	// is above p95 by definition, three in a row by chance is one in 8 000.
	slowRun = 3
	// slowMargin and minSlowMargin are how far above p95 a sample must be to count as slow: half of
	// p95 again, and at least 50 ms, so the crawler's own hiccups (a GC pause, a loaded machine) on a
	// fast host do not read as the host slowing down.
	slowMargin    = 0.5
	minSlowMargin = 50 * time.Millisecond
	// minLatencySamples is how many samples the window needs before its p95 means anything.
	minLatencySamples = 20
	// latencyWindowSize is how many recent latencies the rolling p95 is computed over.
	latencyWindowSize = 40
	// minBackoff is what a refusal doubles when the delay is smaller (a base delay of 0).
	minBackoff = 100 * time.Millisecond
	// outageProbeFloors and minOutageProbe bound how far an outage (503 without Retry-After, other 5xx,
	// broken connections) backs the delay off: to 8 floors, at least 2 s (never above the ceiling).
	// An outage says nothing about the host's speed: past that, slower probing only delays noticing
	// that it is back, while the breaker parks a host that keeps failing.
	outageProbeFloors = 8
	minOutageProbe    = 2 * time.Second
	// drainWindow is how far back the drain estimate looks for the last rate refusal, and minDelivered
	// how many accepted departures since it the estimate needs (see drain).
	drainWindow  = time.Minute
	minDelivered = 8
)

// Model is one host's capacity model: the adaptive delay and what it is learnt from. It is not safe
// for concurrent use: the host's mutex protects it.
//
// The rate signal keeps two bounds on the host's capacity interval: good, the fastest interval
// delivered without refusal, and bad, the slowest refused for speed since. A refused probe goes back to
// good (no doubling); a probe accepted confirmRun times becomes good; between them the pacer bisects.
// A refusal at good moves it one small step slower (the edge); it backs off (doubles) only when
// nothing is known, when refusals recur at good (the capacity dropped), and never when backing off did
// not make refusals rarer (noise). After any change, probes climb back within seconds.
//
// Fields are ordered so that a tracked host stays in its allocation size class (memory_test.go).
type Model struct {
	delay    time.Duration // the adaptive delay, in [floor, ceiling]: written only by set
	good     time.Duration // fastest interval delivered without refusal (0: unknown)
	bad      time.Duration // slowest interval refused for speed below good (0: none)
	prevGood time.Duration // good before the last probe was confirmed: a young good refused goes back to it
	upper    time.Duration // while nothing good is known: the shortest interval accepted since the last refusal (0: none)
	version  int64         // orders the model's changes across a fleet (unix nanoseconds of the last one)
	refused  int64         // unix nanoseconds of the last refusal
	missedAt [2]int64      // unix nanoseconds of the last two misses (see missed), the latest first
	undoGood time.Duration // restored when a second unclear refusal proves an outage
	undoBad  time.Duration
	lat      latencyWindow
	gain     uint8  // the next cruise probe's step below good, in percent (above probeGain: climbing)
	slow     uint8  // consecutive latency samples above p95
	confirm  uint8  // clean responses that confirm a probe on this host (confirmRun and up; 0: confirmRun)
	misses   uint8  // cruise probes refused in a row: each doubles the wait before the next
	holdWait uint16 // seconds: the probe wait the last Retry-After hold demands beyond cruiseMaxTime (see spaceProbes)
	failures uint8  // consecutive refusals (saturating)
	clean    uint8  // clean responses of the current generation (saturating)
	held     uint8  // clean responses at good since it was confirmed or last refused (saturating)
	regain   uint8  // after a refused climbing probe, the next one's gain, taken at once, kept while it runs (0: none)
	halfOf   uint8  // a fleet's climbing probe refused elsewhere: its gain, until the next adoption (see Adopt)
	probing  bool   // the delay is a cruise probe (not a bisection step)
	// returning: an outage was read with nothing good known, and the delay comes back down by
	// bisection towards the floor, each step confirmed by one clean response (see Succeed): a refusal on
	// the way is a refused probe, which goes back to the last step accepted.
	returning bool
	undo      bool // the last refusal was unclear: undoGood and undoBad are the model before it
	// holdBound: bad was set by the first departure after a Retry-After hold (a fleet member's: after a
	// refused departure of the fleet), refused at the hold's spacing, which a window that counts refused
	// requests (HAProxy's) refuses for the requests before the hold, whatever the host's rate: once good
	// is confirmed above it, it is probed at once, not after a cruise.
	holdBound bool
	noisy     bool // slowing down did not make refusals rarer: they do not move the delay (see noise)
	// gen is bumped on every change of delay, good or bad: an outcome of an older generation is stale
	// (it wraps after 4 billion changes, which no outcome in flight outlives).
	gen    uint32
	queue  queueModel
	drain  drain
	noise  noise
	govern governor
}

// New is a host's model with nothing learnt: the delay at the floor.
func New(floor time.Duration) Model {
	return Model{delay: floor, gain: probeGain}
}

// Delay is the adaptive delay, in [floor, ceiling].
func (a *Model) Delay() time.Duration { return a.delay }

// Good is the fastest interval delivered without refusal (0: unknown), and Bad the slowest refused
// for speed below it (0: none).
func (a *Model) Good() time.Duration { return a.good }
func (a *Model) Bad() time.Duration  { return a.bad }

// Version orders the model's changes across a fleet (unix nanoseconds of the last one).
func (a *Model) Version() int64 { return a.version }

// Gen is the model's generation: a reservation carries it, and an outcome of an older one is stale.
func (a *Model) Gen() uint32 { return a.gen }

// Noisy reports noise mode: refusals that speed does not cause no longer move the delay.
func (a *Model) Noisy() bool { return a.noisy }

// Backoffs changes with every backoff of the delay the noise test will judge (a fleet member tells the
// shared store, which pools the fleet's outcomes on each side of it: see Pool).
func (a *Model) Backoffs() uint16 { return a.noise.gen }

// GovernMin is the delay's minimum the refusal governor set (0: none).
func (a *Model) GovernMin() time.Duration { return a.govern.min }

// Restore sets what a store kept of the model (a restart's or the fleet's first read), as it was
// written: the store's repair has bounded it already.
func (a *Model) Restore(delay, good, bad time.Duration, version int64) {
	a.delay, a.good, a.bad, a.version = delay, good, bad, version
}

// Accepted counts a departure the host accepted, for the drain estimate.
func (a *Model) Accepted() { a.drain.accepted() }

// InFlightCap is the in-flight cap the queueing signal learnt, given the policy's maximum (ceiling).
func (a *Model) InFlightCap(ceiling int) int { return a.queue.capFor(ceiling) }

// BaseLatency is the host's base latency (the minimum over the last window or two; 0: none yet).
func (a *Model) BaseLatency() time.Duration { return a.queue.base() }

// ObserveQueue feeds a clean response's latency to the queueing signal: inFlight requests were in
// flight at its departure, spaced by iv, under the policy's maximum ceiling. It reports whether the
// cap moved.
func (a *Model) ObserveQueue(latency time.Duration, inFlight int, iv time.Duration, ceiling int, now time.Time) bool {
	return a.queue.observe(latency, inFlight, iv, ceiling, now)
}

// refuse applies a refusal s of a departure made in generation s.gen (spaced by the delay, which has
// not changed since: the generation is the same). Only the first refusal of a generation counts: the
// others departed before the change took effect. A refusal that would back the delay off when backing
// off has not made refusals rarer (noise) changes nothing: the Retry-After hold, applied apart from the
// model, is all it costs. It reports whether the delay went up.
func (a *Model) Refuse(s Sample, floor, ceiling time.Duration) bool {
	before, searching := a.delay, a.good == 0 && !a.noisy
	up := a.refuse(s, floor, ceiling)
	// The search from below slowing by governSlow or more answers its refusal as the governor would.
	a.govern.answered = searching && s.Gen == a.gen-1 && a.delay >= duration.Mul(before, governSlow)
	return up
}

// refuse is Refuse before the governor's reading of it.
func (a *Model) refuse(s Sample, floor, ceiling time.Duration) bool {
	now, kind := s.At, s.Kind
	if a.noise.observe(s.Gen, true, a.noisy, s.exactCredit()) {
		a.noisy = false // refused clearly more often than the noise: a rate signal again
	}
	if kind == RefusedRate && a.spacedAtAcceptedPace(s) {
		kind = RefusedSpaced
	}
	if kind == RefusedSpaced {
		// Refusals at two paces: this process's, or a fleet's pooled in its store (a member's third
		// of them is not read: see pooledSlowedInVain).
		if !a.noisy && a.noise.spacedRefusal() && (!s.Fleet && a.noise.twoPaces() || s.Fleet && pooledTwoPaces(s.Pool)) {
			a.becomeNoisy(floor, ceiling)
		}
		return false
	}
	if s.Gen != a.gen {
		return false
	}
	a.failures = satInc(a.failures)
	a.regain = 0 // set again below by a refused climbing probe only
	a.refused = now.UnixNano()
	returning := a.returning // on the way back from an outage, no step of it accepted yet
	a.returning = false
	if a.noisy {
		return false // refusals that speed does not cause teach nothing about speed
	}
	accepted := a.good
	if accepted == 0 {
		accepted = a.upper // the good interval a drop let go of, or the shortest gap accepted since
	}
	if kind == RefusedUnclear && a.failures > 1 && accepted > 0 && s.gap(a.delay) >= accepted {
		// Refused again at a pace the host accepted before: not a rate limit. Against a limiter, a
		// second refusal at a faster pace than it accepted only says the next step was still too fast.
		kind = RefusedOutage
		if a.undo {
			a.good, a.bad = a.undoGood, a.undoBad
		}
	}
	a.undo = false
	snapshot := *a // the model before this refusal, kept should it prove to be noise
	var next time.Duration
	backoff := true // the delay backs off (rather than going back to good, or one edge step)
	switch {
	case kind == RefusedOutage:
		// Nothing was learnt before the outage: once it ends, the delay comes back to the floor, halving
		// its distance per clean response (returning), not from the probe interval by confirmations.
		// Nothing is taken as good that the host did not accept: a limiter read as an outage goes back
		// to the last step it accepted at its first refusal (fail slow), not down to the floor again.
		a.returning = a.good == 0
		next = min(duration.Mul(max(a.delay, floor, minBackoff), refusalFactor), max(a.delay, outageProbe(floor, ceiling)))
	case a.failures > 1 && (a.good > 0 || returning):
		// Refused again at a slower delay: the bounds learnt nothing new; back off again. After an
		// outage, nothing accepted since: its gap since the last accepted request spans the outage and
		// bounds nothing; the way back (returning) starts from here once the host answers.
		next = duration.Mul(max(a.delay, floor, minBackoff), rateBackoff)
		a.returning = returning
	default:
		bursty := a.confirmRun() > confirmRun // known before this refusal
		if int(a.clean) >= confirmRun && !(a.good > 0 && a.delay >= a.good && a.held >= dropRun) {
			// Refused at an interval it had accepted a confirmation run in a row (or more), and not the
			// first refusal at the edge: a token bucket's burst ran out (or its capacity dropped). Its
			// acceptances prove little from now on.
			a.confirm = uint8(max(int(a.confirm), burstConfirm*confirmRun))
		}
		if kind == RefusedUnclear {
			a.undoGood, a.undoBad, a.undo = a.good, a.bad, true
		}
		next, backoff = a.learnRefusal(s, floor, bursty)
		if a.good == 0 && (kind == RefusedUnclear || s.Fleet || s.Paced) {
			// Nothing accepted known, and no way yet to tell a limiter from refusals that speed does not
			// cause: a 503 without Retry-After (a limiter's or an outage's), a fleet member (which never
			// reads noise from its third of the outcomes), or refusals with a Retry-After before they
			// were seen at two paces (a limiter slower than its Retry-After refuses after each hold, as
			// noise does). Past twice the outage probe, slower probing would only slow a host that
			// refuses at any pace with no end (a noisy host with Retry-After went to a minute); the
			// refusal governor still slows a limiter that refuses there.
			next = min(next, max(a.delay, 2*outageProbe(floor, ceiling)))
		}
		a.drain.refused(now)
	}
	paced := s.Paced
	switch {
	case backoff && kind != RefusedOutage && !paced && a.failures == 1 && a.noise.tooSoon():
		// Refused again, after a clean response, before the last backoff's outcomes tell whether
		// slowing down helped: wait for them rather than back off twice on one piece of evidence.
		// (Refusals in a row back off at once; so does a refusal with a Retry-After, whose hold
		// spaces the next departures whatever the delay.)
		*a = snapshot
		return false
	case backoff && (!s.Fleet && a.noise.slowedInVain(paced) || s.Fleet && a.pooledSlowedInVain(s.Pool, paced)):
		// Slowing down did not make refusals rarer: undo what this refusal taught, stop backing off,
		// and let the delay decay to the floor. A fleet member sees a third of the outcomes, at paces
		// the others set too: it never reads noise from them alone (a limiter read as noise flooded
		// it), only from the fleet's, pooled by the store (s.Pool; none: no noise read).
		*a = snapshot
		a.becomeNoisy(floor, ceiling)
		return false
	case backoff:
		a.noise.backoff(a.gen+1, paced)
	}
	a.gain, a.probing = max(probeGain, a.regain), false
	return a.increase(next, floor, ceiling) > 0
}

// spacedAtAcceptedPace reports whether a rate refusal s came although the departure was spaced by a
// whole hold and by at least the good interval on both readings (since the last departure and since
// the last accepted one): no limiter refuses that for speed. Unknown spacing is not spaced: a wrong
// reading here would take a limiter for noise (fail fast), so it needs every fact.
func (a *Model) spacedAtAcceptedPace(s Sample) bool {
	return s.AfterHold && a.good > 0 && s.Spacing >= a.good && s.Credited >= a.good
}

// becomeNoisy enters noise mode: refusals no longer move the delay, which comes down to at most twice
// the floor at once and decays from there (a clean response halves its distance to the floor, the
// published constraints); the share refused so far is the noise level that refusals must clearly
// exceed to be a rate signal again (see noise.observe).
func (a *Model) becomeNoisy(floor, ceiling time.Duration) {
	a.noisy = true
	a.set(min(a.delay, duration.Mul(floor, 2)), floor, ceiling)
	a.good, a.bad, a.prevGood = floor, 0, 0
	a.gain, a.probing = probeGain, false
	a.gen++
	a.clean = 0
	a.noise.settle()
}

// learnRefusal moves the bounds for a rate refusal at interval (the departure's jitter on top) and
// returns the delay to go on with:
//   - a probe below the good interval: good (the probe's interval becomes the refused bound); a
//     cruise probe refused leaves the bounds close (no bisection) and doubles the wait before the next;
//     a climbing one (more than twice probeGain) is followed at once by one half as far;
//   - good lately confirmed (fewer than 4 confirmation runs: a burst, or lucky jitter, let it
//     through): the good before it, and the wait before the next probe doubled;
//   - the good interval, refused after dropRun clean responses at it: one edgeStep beyond the gap it
//     asked for (the interval and its jitter), or a window's phase beyond it when the last miss is
//     recent (edgeStepAfter);
//   - refused at good within dropRun clean responses of its confirmation or of the last refusal
//     (the host accepts measurably less: its capacity dropped): the gap asked for is the refused bound,
//     and the delay rateBackoff × the refused interval,
//     or on a host known to be bursty the interval it sustained since its last refusal (drain) when
//     that lies between them;
//   - nothing known: see learnFromBelow.
func (a *Model) learnRefusal(s Sample, floor time.Duration, bursty bool) (next time.Duration, backoff bool) {
	interval, now := a.delay, s.At
	refused := s.gap(a.delay) // the gap the host refused was at least this, on the longer reading
	a.holdBound = false
	if a.good > 0 && interval < a.good {
		a.bad = min(max(a.bad, refused), a.good)
		switch {
		case a.probing && a.gain > 2*probeGain:
			// A climbing probe refused (the step before it was accepted: the capacity rose). It lies
			// between good and this probe: the next probe goes half as far, at once, rather than a
			// cruise of a minute at good after a step that went too far (a limiter found from a Retry-After
			// hold's bound climbed to within 20% and cruised there).
			a.regain = a.gain / 2
			a.bad = max(a.bad, a.creep())
		case a.probing:
			// A cruise probe refused: the capacity did not rise. Cruise again (no bisection: the
			// bounds were close before the probe), and wait longer before the next probe.
			a.missed()
			a.bad = max(a.bad, a.creep())
		}
		return a.good, false
	}
	if a.good > 0 && interval == a.good && a.prevGood > a.good && int(a.held) < 4*a.confirmRun() {
		a.bad, a.good, a.prevGood = min(refused, a.prevGood), a.prevGood, 0
		if asked := s.asked(interval); beyondEdge(asked, edgeStep) > a.good {
			// Its jitter lengthened the gap refused past the good before it: that gap is the edge, as
			// below (back at the good before it, or creeping to it again, the model went under a gap
			// just refused: a fleet on HAProxy's window at 0.5/s went back to 1848 ms after a refusal
			// at 1849 ms, and was refused every 25 s).
			a.edgeAt(asked, refused, edgeStep)
		}
		a.confirm = uint8(min(2*a.confirmRun(), maxConfirmRun))
		a.missed() // the edge lies between the two goods: as at the edge, below
		return a.good, false
	}
	if a.good > 0 && interval >= a.good && a.held >= dropRun {
		a.edgeAt(s.asked(interval), refused, a.edgeStepAfter(now)) // interval is at least good here
		a.held = 0
		a.missed() // no capacity beyond the edge: wait longer before the next probe
		return a.good, false
	}
	if a.good == 0 {
		// A credit that is only a lower bound (CreditLower) reaches no further than the bound: a fleet on
		// HAProxy's window at 2/s went to the outage probe after the first refusal past a hold, and took
		// 45-90 s to come back to the rate.
		reach := refused
		if s.CreditLower {
			reach = s.bound(a.delay)
		}
		next = a.learnFromBelow(s.bound(a.delay), reach, floor, s.Paced, s.Credited > 0)
		// A fleet member whose departure followed a refused one (CreditLower) came after the hold that
		// refusal set, in the store, whether or not this member heard of it. (CreditLower also follows a
		// robots.txt read, which sets no hold: the bound is then the page's own short spacing, and the
		// rule costs at most one early probe, until the next refusal clears it.)
		a.holdBound = (s.AfterHold || s.Fleet && s.CreditLower) && a.bad > 0
		return next, true
	}
	a.upper = a.good // accepted until now: a refusal at it again is not explained by speed
	// The gap asked for, jitter included, bounds the way back: it stops above it.
	a.good, a.bad, a.prevGood = 0, s.asked(interval), 0
	next = duration.Mul(max(interval, floor, minBackoff), rateBackoff)
	if est := a.drain.sustained(now); bursty && est > interval && est < next {
		next = est
	}
	return next, true
}

// learnFromBelow is the delay after a rate refusal with nothing good known. gap is the refused gap the
// lower bound is taken from (Sample.bound: the longer reading, or the departure's own spacing when the
// longer one is only a lower bound), reach the longer reading, which a paced backoff may go as far as;
// the shortest gap accepted since (upper) is the upper bound.
//   - With an upper bound, the next departures test the midpoint (the geometric one when the bounds are
//     more than four times apart).
//   - A refusal with a Retry-After (paced) backs off by rateBackoff, or to the refused gap when longer,
//     up to the outage probe: the hold spaces the next departure anyway, and a limiter slower than its
//     Retry-After refuses the first departure after the hold (noise after a hold would jump there too).
//   - A refusal whose gap since the last accepted request is unknown (credited false: a fleet member
//     without the fleet's facts) backs off by rateBackoff: without upper bounds, a host that refuses at
//     any pace would be slowed fourfold a refusal.
//   - Otherwise the next departures space by three refused gaps: the first after the refusal is then
//     four refused gaps after the last accepted request (a limiter counts from it), so a floor 100 times
//     shorter than the host's interval is crossed in four refusals, where steps of rateBackoff took a dozen.
//
// A refusal at a gap the host accepted since (upper ≤ gap) is not explained by speed: the delay backs
// off by rateBackoff only, as before anything was learnt, and the noise test judges it.
func (a *Model) learnFromBelow(gap, reach, floor time.Duration, paced, credited bool) time.Duration {
	backoff := duration.Mul(max(a.delay, floor, minBackoff), rateBackoff)
	if a.upper > 0 && a.upper <= gap {
		a.bad, a.prevGood = a.delay, 0
		return backoff
	}
	a.bad, a.prevGood = max(a.bad, gap), 0
	if a.upper > a.bad {
		if a.upper > 4*a.bad { // far apart (an upper bound a long hold set): halve the ratio, not the distance
			return time.Duration(math.Sqrt(float64(a.bad) * float64(a.upper)))
		}
		return a.bad + (a.upper-a.bad)/2
	}
	a.upper = 0
	if paced { // the hold spaces the first departure; the others, the refused gap at least, up to the outage probe
		return max(backoff, min(max(a.bad, reach), outageProbe(floor, duration.Max)))
	}
	if !credited {
		return backoff
	}
	return max(duration.Mul(a.bad, fromBelowStep), backoff)
}

// fromBelowStep multiplies the refused gap, nothing good known, for the next delay (see learnFromBelow).
const fromBelowStep = 3

// succeed counts a clean response of generation gen. A probe (the delay below good, or nothing good
// known yet) accepted confirmRun times becomes good; at good, the pacer bisects towards bad, or after
// a cruise probes a step faster; above good (after an outage, a slow spell or noise) it comes back,
// halving the distance per response. It reports how the delay moved (see set).
//
// A clean response proves the interval the limiter counted, since its last accepted request: one
// that came after a refusal or a hold proves a longer interval than the one under test, and confirms
// nothing about it (the shortest such interval is kept as the upper bound while nothing good is known,
// unless a hold set it: a Retry-After's length says nothing about the host's rate).
func (a *Model) Succeed(s Sample, floor, ceiling time.Duration) int {
	now := s.At
	if a.noise.observe(s.Gen, false, a.noisy, s.exactCredit()) {
		a.noisy = false
	}
	if s.Gen != a.gen {
		return 0
	}
	a.failures, a.undo = 0, false
	if a.good == 0 && !s.AfterHold && !s.CreditLower && s.Credited > 0 && (a.upper == 0 || s.Credited < a.upper) {
		a.upper = s.Credited
	}
	if (a.good == 0 || a.delay < a.good) && s.provesOnlyLonger(a.delay) {
		return 0
	}
	span := max(s.Span, 1) // a fleet's departures confirm as one process's do
	a.clean = satAdd(a.clean, span)
	if a.delay == a.good {
		a.held = satAdd(a.held, span)
	}
	switch {
	case a.good > 0 && a.delay > a.good:
		a.clean = 0 // a way back, not a probe: the outcomes in flight still count
		next := a.delay - (a.delay-a.good)/2
		if next-a.good < a.good/20 {
			next = a.good
		}
		return a.set(next, floor, ceiling)
	case int(a.clean) < a.confirmNeed() && !a.returning:
		return 0
	case a.good == 0 || a.delay < a.good:
		switch {
		case a.probing && a.regain > 0:
			// The half step after a refused climbing one held: the host's limit lies between them, within
			// this step. The climb ends here (a step twice as far went past the refused one, refused
			// again, and so was its half: five refusals in 35 s on HAProxy's window at 2/s); the cruise
			// probes test the rest.
			a.gain, a.regain, a.misses = probeGain, 0, 0
		case a.probing:
			a.gain = min(a.gain*2, maxProbeGain) // a faster rate held: the next probe goes further, at once
			a.misses = 0
		}
		// The first good confirmed at the bound a refusal set: that refusal was not about this interval
		// (a hold's, or in a fleet another member's, whose holdBound this member does not hold: the fleet
		// cruised at the bound for 45 s before its first probe), so the bound is probed at once, as
		// holdBound is. (A probe's own bound is the probe: its confirmation is not this.)
		atBound := a.good == 0 && a.bad >= a.delay
		a.prevGood, a.good, a.probing, a.held, a.upper = a.good, a.delay, false, 0, 0
		a.holdBound = a.holdBound || atBound
		a.returning = a.returning && a.apart(floor)
		return a.next(floor, ceiling, now)
	case a.apart(floor) || a.creep() > max(a.bad, floor) || a.cruised(now) || a.holdBound || a.regain > 0:
		return a.next(floor, ceiling, now) // bisect, creep, after a cruise, or climbing again
	}
	return 0
}

// spaceProbes spaces cruise probes by the cost of a refusal: a refused probe holds the host for hold
// (its Retry-After), so the wait before the next is at least probeCostShare⁻¹ × hold, and probing
// costs the crawl at most about probeCostShare of its time whatever the host's Retry-After.
// A hold beyond cruiseMaxTime × probeCostShare (3.75 s) lifts the wait's ceiling to that wait: with a
// Retry-After of 60 s, a probe every 75 s would hold the host most of the crawl.
func (a *Model) SpaceProbes(hold time.Duration) {
	need := time.Duration(float64(hold) / probeCostShare)
	a.holdWait = 0
	if need > cruiseMaxTime {
		a.holdWait = uint16((min(need, maxHoldWait) + time.Second - 1) / time.Second) // rounded up
	}
	for a.misses < maxMisses && cruiseMinTime<<a.misses < need && cruiseMinTime<<a.misses < cruiseMaxTime {
		a.misses++
	}
}

// maxHoldWait bounds the probe wait a hold demands (a Retry-After up to the 10 min default cap asks
// at most 3 h 40 min; holdWait counts seconds up to 18 h).
const maxHoldWait = 4 * time.Hour

// cruised reports whether the model has cruised at good long enough to probe: cruiseBeforeProbe
// clean responses (doubled by each refused probe in a row, twice at most: a slow host, whose probe wait
// is in responses rather than seconds, sees at most a refused probe per 120 of its responses), and the probe wait since the last refusal (cruiseMinTime, doubled by each refused
// probe in a row, up to cruiseMaxTime), or what the last Retry-After hold demands, if longer; and the
// miss before the last at least missSpan behind.
func (a *Model) cruised(now time.Time) bool {
	wait := max(min(cruiseMinTime<<min(a.misses, maxMisses), cruiseMaxTime), time.Duration(a.holdWait)*time.Second)
	return int(a.clean) >= cruiseBeforeProbe<<min(a.misses, 2) && time.Duration(now.UnixNano()-a.refused) >= wait &&
		time.Duration(now.UnixNano()-a.missedAt[1]) >= missSpan
}

// probingFaster reports whether the delay tests an interval below the good one (a probe or a
// bisection step). Its departures go without jitter: a gap lengthened by jitter and accepted would
// confirm an interval the host never accepted, and the model would cruise below the host's limit.
// Jitter stays on at good, on top of the learnt limit, never below it.
func (a *Model) ProbingFaster() bool {
	return a.good > 0 && a.delay < a.good
}

// maxMisses bounds the refused probes counted in a row (misses): each doubles the probe wait, which
// cruiseMaxTime caps long before.
const maxMisses = 8

// missed counts a refused probe in a row, or a refusal at the edge, at the last refusal's instant:
// the next probe waits twice as long, and until the miss before it lies missSpan behind.
func (a *Model) missed() {
	a.misses = min(a.misses+1, maxMisses)
	if a.refused != a.missedAt[0] {
		a.missedAt = [2]int64{a.refused, a.missedAt[0]}
	}
}

// beyondEdge is step percent beyond the gap a refused departure asked for.
func beyondEdge(asked time.Duration, step float64) time.Duration {
	return duration.Add(asked, time.Duration(float64(asked)*step/100))
}

// edgeAt takes the gap a departure asked for, refused (refused: the longer reading), as the host's
// edge: good step percent beyond it, and the refused bound where no creep goes back to it.
func (a *Model) edgeAt(asked, refused time.Duration, step float64) {
	a.good = beyondEdge(asked, step)
	a.bad = max(min(refused, a.good), a.creep())
}

// edgeStepAfter is the step beyond a refusal at the good interval held since its confirmation or the
// last refusal there: edgeStep, which clears the edge's timing noise; but when the last miss lies within
// missSpan, the edge refused again is a window's phase, not noise: a window that counts every request
// in periods (HAProxy's) lets a pace a share g too fast through for up to 1/g requests, so a refusal
// after held of them says g may be as large as 1/held (the likeliest reading, and the slower), up to
// probeGain (held is at least dropRun here). A fleet on HAProxy's window at 0.5/s, 7% under the rate,
// climbed 2% a refusal: five in two minutes.
func (a *Model) edgeStepAfter(now time.Time) float64 {
	if time.Duration(now.UnixNano()-a.missedAt[0]) >= missSpan {
		return edgeStep
	}
	return min(max(100/float64(a.held), edgeStep), probeGain)
}

// creep is the next step of the creep towards the refused bound: creepStep below good.
func (a *Model) creep() time.Duration {
	return a.good - time.Duration(float64(a.good)*creepStep)
}

// confirmRun is how many clean responses confirm a probe on this host.
func (a *Model) confirmRun() int {
	return max(int(a.confirm), confirmRun)
}

// confirmNeed is how many clean responses confirm the delay under test: confirmRun, and for a cruise
// probe a share g faster than the good interval at least stepConfirm/g (up to maxConfirmRun). A limiter
// that counts every request in periods (HAProxy's window) or a bucket with a burst lets a pace a share
// g too fast through for about 1/g requests, by phase or burst, before it refuses one: a probe
// confirmed by three made the model cruise under the host's limit and climb faster still. A bisection
// step is confirmed by confirmRun: a limiter without burst (nginx) refuses it at once, and learning
// from below must take seconds, not minutes.
func (a *Model) confirmNeed() int {
	n := a.confirmRun()
	if a.probing && a.delay < a.good {
		g := float64(a.good-a.delay) / float64(a.good)
		n = max(n, min(int(math.Ceil(stepConfirm/g)), maxConfirmRun))
	}
	return n
}

// stepConfirm: see confirmNeed.
const stepConfirm = 1.5

// apart reports whether the bounds are too far apart to cruise: good above bisectUntil × the refused
// bound (the floor when nothing was refused).
func (a *Model) apart(floor time.Duration) bool {
	return float64(a.good) > float64(max(a.bad, floor))*bisectUntil
}

// next picks the interval to try at good: the midpoint towards bad (or the floor) while they are
// apart, the floor when it is close and nothing was refused, a creepStep below good while that stays
// above bad, and after a cruise (or right after an accepted probe) a step of gain below good. A bursty host (confirm raised) confirms each step with
// more responses, so a bucket's burst does not pass for its rate.
func (a *Model) next(floor, ceiling time.Duration, now time.Time) int {
	switch {
	case a.good <= floor:
		return 0
	case a.apart(floor):
		bad := max(a.bad, floor)
		return a.increase(bad+(a.good-bad)/2, floor, ceiling)
	case a.bad == 0:
		return a.increase(floor, floor, ceiling)
	case a.creep() > max(a.bad, floor):
		return a.increase(a.creep(), floor, ceiling)
	case a.gain <= probeGain && !a.cruised(now) && !a.holdBound: // not climbing (the last probe accepted), nor cruised
		return 0
	}
	probe := max(a.good-a.good*time.Duration(a.gain)/100, floor)
	if probe >= a.bad-a.bad/25 {
		a.regain = 0
		return 0 // the floor keeps the probe within 4% of what was refused: not worth a refusal
	}
	a.bad = min(a.bad, probe)            // a probe below what was refused: forget the old bound
	a.probing, a.holdBound = true, false // regain stays set until the probe is confirmed or refused
	return a.increase(max(probe, floor), floor, ceiling)
}

// outageProbe is how far an outage backs the delay off: 8 floors, at least 2 s, at most the ceiling.
func outageProbe(floor, ceiling time.Duration) time.Duration {
	return min(max(duration.Mul(floor, outageProbeFloors), minOutageProbe), ceiling)
}

// increase sets the delay to d (clamped) and starts a new generation, even when d is the delay
// already: the outcomes in flight were sent under the old model. It reports how the delay moved.
func (a *Model) increase(d, floor, ceiling time.Duration) int {
	moved := a.set(d, floor, ceiling)
	a.gen++
	a.clean = 0
	return moved
}

// set is the one write of the delay: d clamped to [floor, ceiling], and never under the governor's. It reports how the delay moved:
// 1 up, -1 down, 0 not at all, so a clamp is never reported as the opposite of what it did.
func (a *Model) set(d, floor, ceiling time.Duration) int {
	old := a.delay
	a.delay = max(min(max(d, a.govern.min), ceiling), floor)
	return cmp.Compare(a.delay, old)
}
