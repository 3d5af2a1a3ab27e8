package ext

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/collypace/ext/audit"
)

// The capacity model: what a host can take, learnt from its refusals (the rate signal) and from its
// latency (the queueing signal, queue.go's sibling queuemodel.go). The numbers are documented in the
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
	// first; a host that refuses an interval lately confirmed (a token bucket's burst let the probe
	// through) doubles it for that host, up to maxConfirmRun.
	confirmRun    = 3
	maxConfirmRun = 48
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
	// cruiseMaxTime (or what a long Retry-After hold demands: see spaceProbes), so a host whose
	// capacity holds sees at most one probe a minute. Gains in percent.
	cruiseBeforeProbe = 30
	cruiseMinTime     = 15 * time.Second
	cruiseMaxTime     = 75 * time.Second
	// probeCostShare is the share of the crawl's time that refused probes may cost (see spaceProbes).
	probeCostShare = 0.05
	probeGain      = 8
	maxProbeGain   = 50
	// edgeStep is how much slower, in percent, a refusal at the good interval moves it: the model
	// cruises at the edge of what the host accepts, where a fraction of a millisecond of timing noise
	// decides (nginx keeps its rate per millisecond). That refusal says "at the edge", not "capacity
	// dropped": one small step clears the noise, where a doubling would halve the crawl.
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

// refusalKind says what a refusal teaches about the host's speed.
type refusalKind uint8

const (
	// refusedRate: asked too fast (429, or any refusal with a Retry-After).
	refusedRate refusalKind = iota
	// refusedUnclear: a 503 without Retry-After, nginx limit_req's default answer and an outage's alike.
	// The first after a clean response is read as a rate refusal; a second in a row shows an outage
	// (spacing wider did not help), and the first one's lesson is taken back.
	refusedUnclear
	// refusedOutage: another 5xx or a broken connection: nothing about speed.
	refusedOutage
	// refusedSpaced: a rate refusal of the first departure after a Retry-After hold, spaced from the
	// one before by the whole hold: no limiter refuses that for speed (nginx counts from the last
	// accepted request, a bucket refilled, a window slid on), so it teaches nothing about speed either,
	// only that the host refuses whatever the spacing (noise).
	refusedSpaced
)

// adaptive is one host's capacity model: the adaptive delay and what it is learnt from. It is not safe
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
type adaptive struct {
	delay    time.Duration // the adaptive delay, in [floor, ceiling]: written only by set
	good     time.Duration // fastest interval delivered without refusal (0: unknown)
	bad      time.Duration // slowest interval refused for speed below good (0: none)
	prevGood time.Duration // good before the last probe was confirmed: a young good refused goes back to it
	upper    time.Duration // while nothing good is known: the shortest interval accepted since the last refusal (0: none)
	version  int64         // orders the model's changes across a fleet (unix nanoseconds of the last one)
	refused  int64         // unix nanoseconds of the last refusal
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
	probing  bool   // the delay is a cruise probe (not a bisection step)
	undo     bool   // the last refusal was unclear: undoGood and undoBad are the model before it
	noisy    bool   // slowing down did not make refusals rarer: they do not move the delay (see noise)
	// gen is bumped on every change of delay, good or bad: an outcome of an older generation is stale
	// (it wraps after 4 billion changes, which no outcome in flight outlives).
	gen    uint32
	queue  queueModel
	drain  drain
	noise  noise
	govern governor
}

func newAdaptive(floor time.Duration) adaptive {
	return adaptive{delay: floor, gain: probeGain}
}

// sample is one outcome as the capacity model learns from it: every fact a rule reads, explicit.
// A limiter counts from the last request it accepted (nginx, a token bucket) or counts every request
// (HAProxy's window): credited and spacing are those two readings of the same departure, and each
// rule takes the one that makes it fail slow when it reads the host wrong.
type sample struct {
	at        time.Time     // when the outcome was read
	gen       uint32        // the model's generation when the request departed
	kind      refusalKind   // a refusal's kind, as the response says it (refusedRate, refusedUnclear, refusedOutage)
	paced     bool          // a refusal that came with a Retry-After hold
	afterHold bool          // the first departure since a hold ended
	jitter    time.Duration // the jitter added to the delay (the generation's: the departure was paced by it)
	spacing   time.Duration // since the previous departure to the host (0: none known)
	credited  time.Duration // since the host's previous accepted departure (0: unknown)
	fleet     bool          // admitted by a shared store: one member's outcomes, a share of the fleet's
}

// gap is the interval the host refused, on the longer reading (the bound it sets is then slower):
// since the last accepted departure when known, the departure's own spacing otherwise.
func (s sample) gap(delay time.Duration) time.Duration {
	return max(delay+s.jitter, s.credited)
}

// provesOnlyLonger reports whether a clean response proves an interval longer than the one tested: the
// limiter counted since its last accepted request, and a refusal (or a hold) came in between. It then
// confirms nothing about the delay under test (creditSlack for the network's and the clock's noise).
func (s sample) provesOnlyLonger(delay time.Duration) bool {
	tested := delay + s.jitter
	return s.credited > 0 && s.credited > tested+tested/creditSlack+2*time.Millisecond
}

// creditSlack: a clean response proves only a longer interval when it came a tenth later than tested.
const creditSlack = 10

// refuse applies a refusal s of a departure made in generation s.gen (spaced by the delay, which has
// not changed since: the generation is the same). Only the first refusal of a generation counts: the
// others departed before the change took effect. A refusal that would back the delay off when backing
// off has not made refusals rarer (noise) changes nothing: the Retry-After hold, applied apart from the
// model, is all it costs. It reports whether the delay went up.
func (a *adaptive) refuse(s sample, floor, ceiling time.Duration) bool {
	now, kind := s.at, s.kind
	if a.noise.observe(s.gen, true, a.noisy) {
		a.noisy = false // refused clearly more often than the noise: a rate signal again
	}
	if kind == refusedRate && a.spacedAtAcceptedPace(s) {
		kind = refusedSpaced
	}
	if kind == refusedSpaced {
		if !a.noisy && a.noise.spacedRefusal() && a.noise.twoPaces() && !s.fleet {
			a.becomeNoisy(floor, ceiling)
		}
		return false
	}
	if s.gen != a.gen {
		return false
	}
	a.failures = satInc(a.failures)
	a.refused = now.UnixNano()
	if a.noisy {
		return false // refusals that speed does not cause teach nothing about speed
	}
	accepted := a.good
	if accepted == 0 {
		accepted = a.upper // the good interval a drop let go of, or the shortest gap accepted since
	}
	if kind == refusedUnclear && a.failures > 1 && accepted > 0 && s.gap(a.delay) >= accepted {
		// Refused again at a pace the host accepted before: not a rate limit. Against a limiter, a
		// second refusal at a faster pace than it accepted only says the next step was still too fast.
		kind = refusedOutage
		if a.undo {
			a.good, a.bad = a.undoGood, a.undoBad
		}
	}
	a.undo = false
	snapshot := *a // the model before this refusal, kept should it prove to be noise
	var next time.Duration
	backoff := true // the delay backs off (rather than going back to good, or one edge step)
	switch {
	case kind == refusedOutage:
		if a.good == 0 {
			// Nothing was learnt before the outage: once it ends, the delay comes back to the floor
			// (succeed halves the distance to good per clean response), not from the probe interval.
			a.good = floor
		}
		next = min(satMul(max(a.delay, floor, minBackoff), refusalFactor), max(a.delay, outageProbe(floor, ceiling)))
	case a.failures > 1 && a.good > 0:
		// Refused again at a slower delay: the bounds learnt nothing new; back off again.
		next = satMul(max(a.delay, floor, minBackoff), rateBackoff)
	default:
		bursty := a.confirmRun() > confirmRun // known before this refusal
		if int(a.clean) > confirmRun && !(a.good > 0 && a.delay >= a.good && a.held >= dropRun) {
			// Refused at an interval it had accepted several times in a row, and not the first refusal
			// at the edge: a token bucket's burst ran out (or its capacity dropped). Its acceptances
			// prove little from now on.
			a.confirm = uint8(max(int(a.confirm), 2*confirmRun))
		}
		if kind == refusedUnclear {
			a.undoGood, a.undoBad, a.undo = a.good, a.bad, true
		}
		next, backoff = a.learnRefusal(s, floor, bursty)
		if a.good == 0 && (kind == refusedUnclear || s.fleet) {
			// Nothing accepted known, and no way to tell a limiter from refusals that speed does not
			// cause: a 503 without Retry-After (a limiter's or an outage's), or a fleet member, which
			// never reads noise from its third of the outcomes. Past twice the outage probe, slower
			// probing would only slow a host that refuses at any pace with no end; the refusal governor
			// still slows a limiter that refuses there.
			next = min(next, max(a.delay, 2*outageProbe(floor, ceiling)))
		}
		a.drain.refused(now)
	}
	paced := s.paced
	switch {
	case backoff && kind != refusedOutage && !paced && a.failures == 1 && a.noise.tooSoon():
		// Refused again, after a clean response, before the last backoff's outcomes tell whether
		// slowing down helped: wait for them rather than back off twice on one piece of evidence.
		// (Refusals in a row back off at once; so does a refusal with a Retry-After, whose hold
		// spaces the next departures whatever the delay.)
		*a = snapshot
		return false
	case backoff && !s.fleet && a.noise.slowedInVain(paced):
		// Slowing down did not make refusals rarer: undo what this refusal taught, stop backing off,
		// and let the delay decay to the floor. A fleet member sees a third of the outcomes, at paces
		// the others set too: it never reads noise from them alone (a limiter read as noise floods
		// it; the fleet's pooled outcomes are not in the store yet), and the noise a process of the
		// fleet without a store of its own reads elsewhere is not the fleet's.
		*a = snapshot
		a.becomeNoisy(floor, ceiling)
		return false
	case backoff:
		a.noise.backoff(a.gen+1, paced)
	}
	a.gain, a.probing = probeGain, false
	return a.increase(next, floor, ceiling) > 0
}

// spacedAtAcceptedPace reports whether a rate refusal s came although the departure was spaced by a
// whole hold and by at least the good interval on both readings (since the last departure and since
// the last accepted one): no limiter refuses that for speed. Unknown spacing is not spaced: a wrong
// reading here would take a limiter for noise (fail fast), so it needs every fact.
func (a *adaptive) spacedAtAcceptedPace(s sample) bool {
	return s.afterHold && a.good > 0 && s.spacing >= a.good && s.credited >= a.good
}

// becomeNoisy enters noise mode: refusals no longer move the delay, which comes down to at most twice
// the floor at once and decays from there (a clean response halves its distance to the floor, the
// published constraints); the share refused so far is the noise level that refusals must clearly
// exceed to be a rate signal again (see noise.observe).
func (a *adaptive) becomeNoisy(floor, ceiling time.Duration) {
	a.noisy = true
	a.set(min(a.delay, satMul(floor, 2)), floor, ceiling)
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
//   - good lately confirmed (fewer than 4 confirmation runs: a burst, or lucky jitter, let it
//     through): the good before it;
//   - the good interval, refused after dropRun clean responses at it: one edgeStep slower;
//   - refused at good within dropRun clean responses of its confirmation or of the last refusal
//     (the host accepts measurably less: its capacity dropped): rateBackoff × the refused interval,
//     or on a host known to be bursty the interval it sustained since its last refusal (drain) when
//     that lies between them;
//   - nothing known: see learnFromBelow.
func (a *adaptive) learnRefusal(s sample, floor time.Duration, bursty bool) (next time.Duration, backoff bool) {
	interval, now := a.delay, s.at
	refused := s.gap(a.delay) // the gap the host refused was at least this, on the longer reading
	if a.good > 0 && interval < a.good {
		a.bad = min(max(a.bad, refused), a.good)
		if a.probing {
			// A cruise probe refused: the capacity did not rise. Cruise again (no bisection: the
			// bounds were close before the probe), and wait longer before the next probe.
			a.misses = min(a.misses+1, 8)
			a.bad = max(a.bad, a.creep())
		}
		return a.good, false
	}
	if a.good > 0 && interval == a.good && a.prevGood > a.good && int(a.held) < 4*a.confirmRun() {
		a.bad, a.good, a.prevGood = min(refused, a.prevGood), a.prevGood, 0
		a.confirm = uint8(min(2*a.confirmRun(), maxConfirmRun))
		return a.good, false
	}
	if a.good > 0 && interval >= a.good && a.held >= dropRun {
		a.good = satAdd(max(a.good, interval), max(a.good, interval)*edgeStep/100)
		a.bad = max(min(refused, a.good), a.creep()) // the edge is known: no creep back to it
		a.held = 0
		return a.good, false
	}
	if a.good == 0 {
		return a.learnFromBelow(refused, floor, s.paced, s.credited > 0), true
	}
	a.upper = a.good // accepted until now: a refusal at it again is not explained by speed
	a.good, a.bad, a.prevGood = 0, interval, 0
	next = satMul(max(interval, floor, minBackoff), rateBackoff)
	if est := a.drain.sustained(now); bursty && est > interval && est < next {
		next = est
	}
	return next, true
}

// learnFromBelow is the delay after a rate refusal at gap (the longer reading) with nothing good known:
// the refused gap is the lower bound, and the shortest gap accepted since (upper) the upper one.
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
func (a *adaptive) learnFromBelow(gap, floor time.Duration, paced, credited bool) time.Duration {
	backoff := satMul(max(a.delay, floor, minBackoff), rateBackoff)
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
		return max(backoff, min(a.bad, outageProbe(floor, maxDuration)))
	}
	if !credited {
		return backoff
	}
	return max(satMul(a.bad, fromBelowStep), backoff)
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
func (a *adaptive) succeed(s sample, floor, ceiling time.Duration) int {
	now := s.at
	if a.noise.observe(s.gen, false, a.noisy) {
		a.noisy = false
	}
	if s.gen != a.gen {
		return 0
	}
	a.failures, a.undo = 0, false
	if a.good == 0 && !s.afterHold && s.credited > 0 && (a.upper == 0 || s.credited < a.upper) {
		a.upper = s.credited
	}
	if (a.good == 0 || a.delay < a.good) && s.provesOnlyLonger(a.delay) {
		return 0
	}
	a.clean = satInc(a.clean)
	if a.delay == a.good {
		a.held = satInc(a.held)
	}
	switch {
	case a.good > 0 && a.delay > a.good:
		a.clean = 0 // a way back, not a probe: the outcomes in flight still count
		next := a.delay - (a.delay-a.good)/2
		if next-a.good < a.good/20 {
			next = a.good
		}
		return a.set(next, floor, ceiling)
	case int(a.clean) < a.confirmRun():
		return 0
	case a.good == 0 || a.delay < a.good:
		if a.probing {
			a.gain = min(a.gain*2, maxProbeGain) // a faster rate held: the next probe goes further, at once
			a.misses = 0
		}
		a.prevGood, a.good, a.probing, a.held, a.upper = a.good, a.delay, false, 0, 0
		return a.next(floor, ceiling, now)
	case a.apart(floor) || a.creep() > max(a.bad, floor) || a.cruised(now):
		return a.next(floor, ceiling, now) // bisect, creep, or after a cruise probe
	}
	return 0
}

// spaceProbes spaces cruise probes by the cost of a refusal: a refused probe holds the host for hold
// (its Retry-After), so the wait before the next is at least probeCostShare⁻¹ × hold, and probing
// costs the crawl at most about probeCostShare of its time whatever the host's Retry-After.
// A hold beyond cruiseMaxTime × probeCostShare (3.75 s) lifts the wait's ceiling to that wait: with a
// Retry-After of 60 s, a probe every 75 s would hold the host most of the crawl.
func (a *adaptive) spaceProbes(hold time.Duration) {
	need := time.Duration(float64(hold) / probeCostShare)
	a.holdWait = 0
	if need > cruiseMaxTime {
		a.holdWait = uint16((min(need, maxHoldWait) + time.Second - 1) / time.Second) // rounded up
	}
	for a.misses < 8 && cruiseMinTime<<a.misses < need && cruiseMinTime<<a.misses < cruiseMaxTime {
		a.misses++
	}
}

// maxHoldWait bounds the probe wait a hold demands (a Retry-After up to the 10 min default cap asks
// at most 3 h 40 min; holdWait counts seconds up to 18 h).
const maxHoldWait = 4 * time.Hour

// cruised reports whether the model has cruised at good long enough to probe: cruiseBeforeProbe
// clean responses (doubled by each refused probe in a row, twice at most: a slow host, whose probe wait
// is in responses rather than seconds, sees at most a refused probe per 120 of its responses), and the probe wait since the last refusal (cruiseMinTime, doubled by each refused
// probe in a row, up to cruiseMaxTime), or what the last Retry-After hold demands, if longer.
func (a *adaptive) cruised(now time.Time) bool {
	wait := max(min(cruiseMinTime<<min(a.misses, 8), cruiseMaxTime), time.Duration(a.holdWait)*time.Second)
	return int(a.clean) >= cruiseBeforeProbe<<min(a.misses, 2) && time.Duration(now.UnixNano()-a.refused) >= wait
}

// probingFaster reports whether the delay tests an interval below the good one (a probe or a
// bisection step). Its departures go without jitter: a gap lengthened by jitter and accepted would
// confirm an interval the host never accepted, and the model would cruise below the host's limit.
// Jitter stays on at good, on top of the learnt limit, never below it.
func (a *adaptive) probingFaster() bool {
	return a.good > 0 && a.delay < a.good
}

// satInc is n+1, saturating.
func satInc(n uint8) uint8 {
	if n == math.MaxUint8 {
		return n
	}
	return n + 1
}

// creep is the next step of the creep towards the refused bound: creepStep below good.
func (a *adaptive) creep() time.Duration {
	return a.good - time.Duration(float64(a.good)*creepStep)
}

// confirmRun is how many clean responses confirm a probe on this host.
func (a *adaptive) confirmRun() int {
	return max(int(a.confirm), confirmRun)
}

// apart reports whether the bounds are too far apart to cruise: good above bisectUntil × the refused
// bound (the floor when nothing was refused).
func (a *adaptive) apart(floor time.Duration) bool {
	return float64(a.good) > float64(max(a.bad, floor))*bisectUntil
}

// next picks the interval to try at good: the midpoint towards bad (or the floor) while they are
// apart, the floor when it is close and nothing was refused, a creepStep below good while that stays
// above bad, and after a cruise (or right after an accepted probe) a step of gain below good. A bursty host (confirm raised) confirms each step with
// more responses, so a bucket's burst does not pass for its rate.
func (a *adaptive) next(floor, ceiling time.Duration, now time.Time) int {
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
	case a.gain <= probeGain && !a.cruised(now): // not climbing (the last probe accepted), nor cruised
		return 0
	}
	probe := max(a.good-a.good*time.Duration(a.gain)/100, floor)
	if probe >= a.bad-a.bad/25 {
		return 0 // the floor keeps the probe within 4% of what was refused: not worth a refusal
	}
	a.bad = min(a.bad, probe) // a probe below what was refused: forget the old bound
	a.probing = true
	return a.increase(max(probe, floor), floor, ceiling)
}

// outageProbe is how far an outage backs the delay off: 8 floors, at least 2 s, at most the ceiling.
func outageProbe(floor, ceiling time.Duration) time.Duration {
	return min(max(satMul(floor, outageProbeFloors), minOutageProbe), ceiling)
}

// stamp orders a change of the model across a fleet: its version becomes the unix nanoseconds of now,
// or one more than the last when the clock has not moved on.
func (a *adaptive) stamp(now time.Time) {
	a.version = max(a.version+1, now.UnixNano())
}

// capacityModel is what a fleet shares of a host's model, by version (its verdict on noise is
// shared apart: see adoptVerdict).
type capacityModel struct{ delay, good, bad time.Duration }

func (a *adaptive) model() capacityModel { return capacityModel{a.delay, a.good, a.bad} }

// verdict is the model's verdict on the host's refusals, which only moves forward: undecided, noise
// (noise mode), refuted (noise mode ended for good).
func (a *adaptive) verdict() audit.NoiseVerdict {
	switch {
	case a.noise.refuted:
		return audit.NoiseRefuted
	case a.noisy:
		return audit.NoiseSeen
	}
	return audit.NoiseUndecided
}

// adoptVerdict takes a verdict further along than this model's: another process of the fleet reached
// it, or an earlier run (a store's). Noise enters noise mode as if this model had seen it (the share
// refused it counted so far is its noise level); refuted leaves noise mode for good. The fleet reads
// the noise as one crawler: a process that has not seen it yet stops backing off, instead of
// writing its backoffs into the model the others adopt. It reports whether the verdict changed.
func (a *adaptive) adoptVerdict(v audit.NoiseVerdict, floor, ceiling time.Duration) bool {
	if v <= a.verdict() {
		return false
	}
	switch v {
	case audit.NoiseSeen:
		a.becomeNoisy(floor, ceiling)
	case audit.NoiseRefuted:
		a.noisy, a.noise = false, noise{refuted: true}
	default:
		return false // not a verdict this version knows (StoredHost.repair keeps it out)
	}
	return true
}

// adopt takes the fleet's newer model (a shared store's, another process's change): one model for the
// fleet. The outcomes in flight were sent under the old one: a new generation. A good interval the
// fleet holds counts as held a while here: a refusal at it is the edge, as in the process that learnt
// it, not a drop. A model that moved up (a refusal elsewhere) restarts the probe wait from its version
// (the unix nanoseconds of the change), a cruise probe refused elsewhere counts as refused here, and a
// cruise probe started elsewhere is one here: the fleet probes as one crawler, not once per member.
func (a *adaptive) adopt(delay, good, bad time.Duration, version int64, floor, ceiling time.Duration) {
	a.version = version
	if (capacityModel{delay, good, bad}) == a.model() {
		return
	}
	if good != a.good {
		a.held = dropRun
	}
	if delay > a.delay || bad > a.bad { // a refusal elsewhere: the probe wait counts from it
		a.refused = max(a.refused, version)
		if a.probing && good == a.good && delay == good {
			a.misses = min(a.misses+1, 8) // the cruise probe was refused elsewhere
		}
	}
	// A cruise probe (at or below the refused bound it set) started elsewhere is probing here too.
	a.probing = delay < good && bad > 0 && delay <= bad
	a.good, a.bad = min(max(good, 0), ceiling), min(max(bad, 0), ceiling)
	a.increase(delay, floor, ceiling)
}

// observeLatency feeds a clean response's latency to the rolling p95 and multiplies the delay by 1.25
// when slowRun consecutive samples are above it while the crawler kept one request in flight (a queue
// of its own making is the queueing signal's, not a slow host's). It reports whether the delay went up.
func (a *adaptive) observeLatency(gen uint32, latency time.Duration, inFlight int, floor, ceiling time.Duration) bool {
	p95, ok := a.lat.p95()
	a.lat.add(latency)
	if !ok || inFlight > 1 || latency <= satAdd(p95, max(satMul(p95, slowMargin), minSlowMargin)) {
		a.slow = 0
		return false
	}
	a.slow++
	if a.slow < slowRun || gen != a.gen {
		return false
	}
	a.slow = 0
	return a.increase(satMul(a.delay, slowFactor), floor, ceiling) > 0
}

// increase sets the delay to d (clamped) and starts a new generation, even when d is the delay
// already: the outcomes in flight were sent under the old model. It reports how the delay moved.
func (a *adaptive) increase(d, floor, ceiling time.Duration) int {
	moved := a.set(d, floor, ceiling)
	a.gen++
	a.clean = 0
	return moved
}

// set is the one write of the delay: d clamped to [floor, ceiling], and never under the governor's. It reports how the delay moved:
// 1 up, -1 down, 0 not at all, so a clamp is never reported as the opposite of what it did.
func (a *adaptive) set(d, floor, ceiling time.Duration) int {
	old := a.delay
	a.delay = clampDuration(max(d, a.govern.min), floor, ceiling)
	return cmp.Compare(a.delay, old)
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

// typicalLatency is how long the host's responses take: the rolling p95 once known, the base latency
// (the minimum) before that, 0 before any sample.
func (a *adaptive) typicalLatency() time.Duration {
	if p95, ok := a.lat.p95(); ok {
		return max(p95, a.queue.base())
	}
	return a.queue.base()
}

// noise tells refusals that speed does not cause (a flaky backend, random 503s, timeouts) from a rate
// limit's. It counts the outcomes of departures on each side of the last backoff (by generation) and
// compares them when a refusal would back off again (slowedInVain):
//   - without a Retry-After, the pace alone spaces the departures. A rate limit accepts its capacity
//     whatever the client's pace above it, so slowing down leaves the rate it accepts where it was;
//     noise refuses the same share at any pace, so the accepted rate falls with the pace. And a limiter
//     refuses a pace rateBackoff slower only if it refused at least a third of the faster one;
//   - with a Retry-After, the holds space the departures whatever the pace, so a limiter's share can
//     stay the same across a backoff: only a share that did not fall at all reads as noise, and a
//     refusal of a departure spaced by a whole hold (refusedSpaced), which no limiter refuses, twice.
//
// The model then (adaptive.noisy) stops backing off for refusals and decays to the floor. It treats
// refusals as a rate signal again when a window of them is clearly more frequent than that noise
// (noiseRise), and at least noiseExitShare of the outcomes; from then on the host is a limiter for the
// rest of the crawl (refuted): a limiter read as noise costs one window, not one a cycle.
type noise struct {
	gen     uint16 // outcomes of this generation (its low 16 bits) or later count after the last backoff
	spaced  uint8  // refusals of departures spaced by a whole Retry-After hold (saturating)
	refuted bool   // left noise mode once: its refusals depend on the pace
	before  counts // outcomes of departures before the last backoff
	after   counts // outcomes since (in noise mode: the current window)
}

// counts is a number of outcomes and how many of them were refusals.
type counts struct{ n, refused uint8 }

// bounded halves c until it holds fewer than 2×noiseWindow outcomes: the older outcomes weigh half.
func (c counts) bounded() counts {
	for c.n >= 2*noiseWindow {
		c = counts{c.n / 2, c.refused / 2}
	}
	return c
}

// plus is c and d together, bounded.
func (c counts) plus(d counts) counts { return counts{c.n + d.n, c.refused + d.refused}.bounded() }

func (c counts) share() float64 {
	if c.n == 0 {
		return 0
	}
	return float64(c.refused) / float64(c.n)
}

const (
	// noiseSamples is how many outcomes each side of a backoff needs before they compare; a refusal
	// before the side after a backoff holds them waits for them (tooSoon).
	noiseSamples = 3
	// noiseKeep: without Retry-After, noise when the rate accepted since the last backoff is at most
	// this share of the rate before it: it fell with the pace (a limiter's stays at its capacity).
	noiseKeep = 0.75
	// noiseMaxShare: without Retry-After, refusals are read as noise only while under this share at
	// the faster pace. A limiter refuses at a pace rateBackoff slower only if it refused at least
	// 1 - 1/rateBackoff of the faster one (a third), and nginx limit_req without burst refuses exactly
	// a half at every pace between half its interval and its interval: a half is a limiter's.
	noiseMaxShare = 0.5
	// noisePacedKeep: with Retry-After, noise when the share refused since the last backoff is at
	// least this share of the one before.
	noisePacedKeep = 0.9
	// noiseSpaced is how many refusals of departures spaced by a whole hold make the refusals noise.
	noiseSpaced = 2
	// noiseRise, noiseExitShare and noiseWindow: in noise mode, a window of noiseWindow outcomes
	// refused noiseRise (absolute) more than the noise before, and at least noiseExitShare of them,
	// is a rate signal again.
	noiseRise      = 0.15
	noiseExitShare = 0.4
	noiseWindow    = 32
	// noiseGenReach is how far (in generations) an outcome may lie from the last backoff's and still
	// be placed on its side; past it the backoff is long gone and the outcome counts after it.
	noiseGenReach = 1 << 14
)

// observe counts an outcome of a departure made in generation gen. In noise mode (noisy) it reports
// whether the last noiseWindow outcomes were refused clearly more often than the noise: a rate signal
// again.
func (n *noise) observe(gen uint32, refused, noisy bool) (rate bool) {
	c := &n.before
	if n.gen != 0 {
		// Serial arithmetic: generations wrap at 16 bits. The last backoff's generation is kept
		// within reach of the current one, so a long crawl without backoff never wraps past it.
		d := int16(uint16(gen) - n.gen)
		if d >= noiseGenReach {
			n.gen = max(uint16(gen)-noiseGenReach, 1)
		}
		if d >= 0 {
			c = &n.after
		}
	}
	c.n++
	if refused {
		c.refused++
	}
	n.before, n.after = n.before.bounded(), n.after.bounded() // in noise mode, after is a window: never this long
	if !noisy || n.after.n < noiseWindow {
		return false
	}
	if s := n.after.share(); s >= n.before.share()+noiseRise && s >= noiseExitShare {
		*n = noise{refuted: true}
		return true
	}
	n.after = counts{} // another window, against the same noise level
	return false
}

// backoff records a backoff; outcomes of generation gen on count after it. Without Retry-After the side
// before it becomes the outcomes at the pace just left, when there are enough of them: the comparison
// is between two paces, not between the crawl so far and the last pace. With Retry-After, whose holds
// pace the client, the sides accumulate.
func (n *noise) backoff(gen uint32, paced bool) {
	if paced || n.gen == 0 || n.after.n < noiseSamples {
		n.before = n.before.plus(n.after)
	} else {
		n.before = n.after
	}
	n.after, n.gen = counts{}, max(uint16(gen), 1)
}

// settle makes everything counted so far the noise level of noise mode, and starts its first window.
func (n *noise) settle() {
	n.before, n.after = n.before.plus(n.after), counts{}
}

// spacedRefusal counts a refusal of a departure spaced by a whole Retry-After hold, and reports whether
// there have been noiseSpaced of them on a host not known to be a limiter: noise, once refusals were
// seen at two paces (twoPaces).
func (n *noise) spacedRefusal() bool {
	n.spaced = satInc(n.spaced)
	return !n.refuted && n.spaced >= noiseSpaced
}

// twoPaces reports whether refusals were seen at two paces, each side of the last backoff holding
// noiseSamples outcomes, clean and refused: noise mode may only keep a pace whose refused share was
// measured at more than one (a window that counts every request, HAProxy's, refuses the departure
// after a hold when the pace before was too fast, as noise would).
func (n *noise) twoPaces() bool {
	mixed := func(c counts) bool { return c.n >= noiseSamples && c.refused > 0 && c.refused < c.n }
	return n.gen != 0 && mixed(n.before) && mixed(n.after)
}

// tooSoon reports whether a refusal came after the last backoff before noiseSamples of its outcomes:
// too soon to tell whether slowing down helped.
func (n *noise) tooSoon() bool {
	return n.gen != 0 && n.after.n < noiseSamples
}

// slowedInVain reports whether another backoff would buy nothing: both sides of the last backoff hold
// noiseSamples outcomes, clean ones and refusals (refusals in a row are an outage, which outageProbe
// bounds, not noise), and, paced by Retry-After holds, the share refused did not fall; else the share
// before is under noiseMaxShare and the rate accepted since fell with the pace (at most noiseKeep of
// the rate before times the backoff's slowdown, rateBackoff).
func (n *noise) slowedInVain(paced bool) bool {
	mixed := func(c counts) bool { return c.n >= noiseSamples && c.refused > 0 && c.refused < c.n }
	if n.refuted || n.gen == 0 || !mixed(n.before) || !mixed(n.after) {
		return false
	}
	if paced {
		return n.after.share() >= noisePacedKeep*n.before.share()
	}
	return n.before.share() < noiseMaxShare && 1-n.after.share() <= noiseKeep*rateBackoff*(1-n.before.share())
}

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

// interval is the maximum of the base delay, the Crawl-delay, the rate-limit interval and the adaptive
// delay, with the trigger that set it (ties go to the published constraint).
func interval(base, crawl, rate, adaptive time.Duration) (time.Duration, audit.Trigger) {
	d, why := base, audit.TriggerBase
	if adaptive > d {
		d, why = adaptive, audit.TriggerAdaptive
	}
	if rate > 0 && rate >= d {
		d, why = rate, audit.TriggerRateLimit
	}
	if crawl > 0 && crawl >= d {
		d, why = crawl, audit.TriggerCrawlDelay
	}
	return d, why
}

// jitter returns the extra added on top of an interval: up to fraction × interval, never negative,
// and never so much that interval + jitter overflows. r is a random number in [0, 1).
func jitter(d time.Duration, fraction, r float64) time.Duration {
	if fraction <= 0 || d <= 0 || r <= 0 {
		return 0
	}
	return min(satMul(d, fraction*min(r, 1)), maxDuration-d)
}

// governor bounds the share of a host's requests refused, whatever the model believes: a misreading
// (a limiter taken for noise, a clean response credited to the wrong interval, a fleet member's third
// of the evidence) must fail slow, never fast. It counts the last governWindow outcomes; once
// governJudge of them are known and at least governShare were refused, the delay's minimum becomes
// governSlow × the interval in force, and the window starts again. A window refused under half the bound halves that minimum. Every limiter flood
// measured (48-61% of requests refused) is over the bound within governJudge outcomes; a host refusing
// a third of first attempts at any pace (about a quarter of all requests) reaches it by chance in about
// one window in forty.
type governor struct {
	min    time.Duration // the delay's minimum (0: none)
	window uint32        // the last outcomes, a bit each (1: refused), newest lowest
	n      uint8         // outcomes in the window, up to governWindow
}

const (
	governWindow = 32
	governJudge  = 20
	governShare  = 0.4
	governSlow   = 1.5
)

// observe counts an outcome; interval is the host's interval in force. It reports whether
// the share refused crossed the bound: the minimum was raised, and the caller applies it.
func (g *governor) observe(refused bool, interval time.Duration) bool {
	g.window <<= 1
	if refused {
		g.window |= 1
	}
	g.n = min(g.n+1, governWindow)
	if g.n < governJudge {
		return false
	}
	n := bits.OnesCount32(g.window & (1<<g.n - 1))
	share := float64(n) / float64(g.n)
	switch {
	case share >= governShare:
		g.min = max(g.min, satMul(interval, governSlow))
		g.window, g.n = 0, 0
		return true
	case share < governShare/2 && g.n == governWindow && g.min > 0:
		g.min /= 2 // calm again: give the slowdown back, a half a window
		if g.min < time.Millisecond {
			g.min = 0
		}
		g.window, g.n = 0, 0
	}
	return false
}

// governed counts an outcome for the refusal governor and, when it trips, applies its minimum to the
// delay (a new generation: the outcomes in flight were sent faster). It reports whether it tripped.
func (a *adaptive) governed(refused bool, interval, floor, ceiling time.Duration) bool {
	if !a.govern.observe(refused, interval) {
		return false
	}
	a.increase(a.delay, floor, ceiling)
	return true
}
