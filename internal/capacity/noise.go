package capacity

import (
	"math"
	"time"
)

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
// Either way, slowedInVain reads noise only once a refusal came clearly later after the host's
// previous accepted request than a request it accepted (refusedPastAccepted): a limiter that counts
// from its last accepted request never refuses so, whatever its share at two paces suggests.
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

// counts is a number of outcomes, how many of them were refusals, and the extremes of the gaps since
// the host's previous accepted request (Sample.Credited) they came at: the shortest the host accepted
// and the longest it refused, in milliseconds (0: none known).
type counts struct {
	n, refused                    uint8
	shortestClean, longestRefused uint32
}

// bounded halves c until it holds fewer than 2×noiseWindow outcomes: the older outcomes weigh half.
func (c counts) bounded() counts {
	for c.n >= 2*noiseWindow {
		c.n, c.refused = c.n/2, c.refused/2
	}
	return c
}

// plus is c and d together, bounded.
func (c counts) plus(d counts) counts {
	c.n, c.refused = c.n+d.n, c.refused+d.refused
	c.shortestClean = minKnown(c.shortestClean, d.shortestClean)
	c.longestRefused = max(c.longestRefused, d.longestRefused)
	return c.bounded()
}

// add counts one outcome, credited (0: unknown) since the host's previous accepted request.
func (c *counts) add(refused bool, credited time.Duration) {
	c.n++
	ms := uint32(min(credited.Milliseconds(), math.MaxUint32))
	switch {
	case refused:
		c.refused++
		c.longestRefused = max(c.longestRefused, ms)
	case ms > 0:
		c.shortestClean = minKnown(c.shortestClean, ms)
	}
}

// minKnown is the smaller of two extremes, 0 standing for none known.
func minKnown(a, b uint32) uint32 {
	if a == 0 || b == 0 {
		return max(a, b)
	}
	return min(a, b)
}

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
	// creditSeparation and creditSeparationMin (ms): a refusal is clearly later after the host's last
	// accepted request than an accepted one when later by a tenth of it and at least 10 ms.
	creditSeparation    = 10
	creditSeparationMin = 10
)

// observe counts an outcome of a departure made in generation gen, credited (0: unknown, or only a
// lower bound) since the host's previous accepted request. In noise mode (noisy) it reports whether the
// last noiseWindow outcomes were refused clearly more often than the noise: a rate signal again.
func (n *noise) observe(gen uint32, refused, noisy bool, credited time.Duration) (rate bool) {
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
	c.add(refused, credited)
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

// refusedPastAccepted reports whether, on the outcomes each side of the last backoff, a refusal came
// clearly later after the host's previous accepted request than a request the host accepted (by
// creditSeparation, for the network's and the clocks' noise). A limiter that counts from its last
// accepted request (nginx, a token bucket without burst) never does so: it refuses under its interval
// and accepts from it on, whatever the pace, so however its refused share moves with the pace it is
// never read as noise (in a few outcomes, nginx's share can fall as little as noise's would).
func (n *noise) refusedPastAccepted() bool {
	c := n.before.plus(n.after)
	if c.shortestClean == 0 || c.longestRefused == 0 {
		return false
	}
	return c.longestRefused >= c.shortestClean+max(c.shortestClean/creditSeparation, creditSeparationMin)
}

// slowedInVain reports whether another backoff would buy nothing: both sides of the last backoff hold
// noiseSamples outcomes, clean ones and refusals (refusals in a row are an outage, which outageProbe
// bounds, not noise), and, paced by Retry-After holds, the share refused did not fall; else the share
// before is under noiseMaxShare and the rate accepted since fell with the pace (at most noiseKeep of
// the rate before times the backoff's slowdown, rateBackoff).
func (n *noise) slowedInVain(paced bool) bool {
	mixed := func(c counts) bool { return c.n >= noiseSamples && c.refused > 0 && c.refused < c.n }
	if n.refuted || n.gen == 0 || !mixed(n.before) || !mixed(n.after) || !n.refusedPastAccepted() {
		return false
	}
	if paced {
		return n.after.share() >= noisePacedKeep*n.before.share()
	}
	return n.before.share() < noiseMaxShare && 1-n.after.share() <= noiseKeep*rateBackoff*(1-n.before.share())
}

// Pool is what a shared store counted of a fleet's outcomes on a host, on each side of the fleet's last
// backoff: the noise test's two paces, read from every member's departures rather than one member's
// third of them (a limiter judged on a third was read as noise, and flooded). Departures count as they
// are admitted, refusals as they are reported: a departure still in flight counts as accepted, which
// makes the pace after a backoff look better than it is, as a limiter's would (fail slow).
type Pool struct {
	Mark          uint64 // the fleet's departure number at the last backoff (0: none yet)
	Before, After PoolCounts
}

// PoolCounts is a number of the fleet's departures and how many of them were reported refused.
type PoolCounts struct{ N, Refused uint32 }

// counts is c as the noise test reads it, halved until it holds fewer than 2×noiseWindow outcomes.
func (c PoolCounts) counts() counts {
	n, r := c.N, min(c.Refused, c.N)
	for n >= 2*noiseWindow {
		n, r = n/2, r/2
	}
	return counts{n: uint8(n), refused: uint8(r)}
}

// pooledSlowedInVain is slowedInVain read from the fleet's pooled outcomes (p), for a fleet member whose
// refusal would back off: the shares at the two paces are the fleet's; whether a refusal came clearly
// later after the host's last accepted request than an accepted one is this member's own reading (its
// exact credits: a member never credits the others' outcomes), which only errs towards a limiter.
// Refusals with a Retry-After (paced) are not read so in a fleet: their holds space the departures
// whatever the pace, and on the fleet's counts a window limiter's shares looked like noise (HAProxy's
// window at 2/s, read as noise and flooded in 5 of 40 virtual draws). They read as noise only after
// whole holds (RefusedSpaced, pooledTwoPaces); until then the fleet backs off (it fails slow).
func (a *Model) pooledSlowedInVain(p Pool, paced bool) bool {
	if p.Mark == 0 || a.noise.refuted || paced {
		return false
	}
	own := a.noise.before.plus(a.noise.after)
	n := p.noise()
	n.before.shortestClean, n.before.longestRefused = own.shortestClean, own.longestRefused
	return n.slowedInVain(paced)
}

// pooledTwoPaces is twoPaces on the fleet's pooled outcomes (p): a fleet member reads refusals after
// whole holds (RefusedSpaced) as noise only once the fleet saw refusals at two paces.
func pooledTwoPaces(p Pool) bool {
	n := p.noise()
	return p.Mark != 0 && n.twoPaces()
}

// noise is the fleet's counts as the noise test's two sides of a backoff.
func (p Pool) noise() noise {
	return noise{gen: 1, before: p.Before.counts(), after: p.After.counts()}
}
