package ext

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/collypace/ext/audit"
)

// The adaptive delay policy (AIMD on the delay). The numbers are documented in the README.
const (
	// refusalFactor multiplies the adaptive delay on a refusal (429, 503, Retry-After, 5xx, timeout).
	refusalFactor = 2
	// slowFactor multiplies it when latency stays above the host's rolling p95.
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
	latencyWindowSize = 48
	// cleanRun is how many clean responses make one decrease step.
	cleanRun = 2
	// recoveryMargin puts the recovery target this far above the delay at which the host last refused
	// for being too fast (its known limit), so the delay settles just on the polite side of its
	// capacity. When a refusal comes within creepRatio of the known limit (the target was still too
	// fast), the margin doubles, up to maxMargin, so the limit is found in a few refusals, not in
	// 10% steps; clean responses at the target halve the extra margin again every marginDecayAfter.
	recoveryMargin   = 0.10
	maxMargin        = 1.0
	creepRatio       = 1.25
	marginDecayAfter = 10
	// probeAfter is how many clean responses at the target (with the margin back at its base) it
	// takes to lower the known limit by probeStep, so the pacer gives capacity back for good.
	probeAfter = 40
	probeStep  = 0.04
	// minBackoff is what a refusal doubles when the delay is smaller (a base delay of 0).
	minBackoff = 100 * time.Millisecond
	// outageProbeFloors and minOutageProbe bound how far an outage (503 without Retry-After, other 5xx,
	// broken connections) backs the delay off: to 8 floors, at least 2 s (never above the ceiling).
	// An outage says nothing about the host's speed: past that, slower probing only delays noticing
	// that it is back, while the breaker parks a host that keeps failing.
	outageProbeFloors = 8
	minOutageProbe    = 2 * time.Second
	// deliveryWindow is how far back the delivery rate is measured when a host refuses for speed: the
	// accepted departures of that window, as BBR measures a path's delivery rate; minDelivered is how
	// many it needs to say anything.
	deliveryWindow = 10 * time.Second
	minDelivered   = 8
)

// adaptive is the AIMD state of one host's adaptive delay. It is not safe for concurrent use:
// the host's mutex protects it.
type adaptive struct {
	delay    time.Duration // the adaptive delay, in [floor, ceiling]: written only by set
	limit    time.Duration // the delay in effect at the last rate refusal that followed a clean response
	margin   float64       // the recovery target's margin above limit (recoveryMargin and up)
	gen      uint64        // bumped on every increase; an outcome of an older generation cannot increase again
	clean    int           // clean responses of the current generation since the last step
	atTarget int           // clean responses at the recovery target since the last probe
	failures int           // consecutive refusals
	slow     int           // consecutive latency samples above p95
	probes   int           // probes since the last rate refusal: each lowers the limit twice as much
	lat      latencyWindow
	accepted deliveryRing
}

// deliveryRing holds the departure instants of the latest accepted responses, as unix milliseconds
// modulo 2^32 (they wrap every 49 days; only ages within deliveryWindow are read), to keep a tracked
// host small.
type deliveryRing struct {
	at   [12]uint32
	n    uint8
	next uint8
}

func (r *deliveryRing) add(t time.Time) {
	r.at[r.next] = uint32(t.UnixMilli())
	r.next = (r.next + 1) % uint8(len(r.at))
	r.n = min(r.n+1, uint8(len(r.at)))
}

// sustained is the interval the host sustained before now: the span from the oldest accepted
// departure of the last deliveryWindow to now, divided by their number (so a burst the host absorbed
// at the start of the window does not count as capacity), or 0 when fewer than minDelivered are known.
func (r *deliveryRing) sustained(now time.Time) time.Duration {
	nowMS := uint32(now.UnixMilli())
	count, oldest := 0, uint32(0)
	for i := range int(r.n) {
		if age := nowMS - r.at[i]; age <= uint32(deliveryWindow.Milliseconds()) {
			count++
			oldest = max(oldest, age)
		}
	}
	if count < minDelivered {
		return 0
	}
	return time.Duration(oldest) * time.Millisecond / time.Duration(count)
}

func newAdaptive(floor time.Duration) adaptive {
	return adaptive{delay: floor, margin: recoveryMargin}
}

// refuse doubles the delay for an outcome that departed in generation gen. Only the first refusal of a
// burst counts: the others departed before the increase took effect. rate says the host refused for
// being asked too fast (429, or a Retry-After): after clean responses, the delay in effect becomes
// its known limit. An outage (503 without Retry-After, 5xx, a broken connection) teaches nothing
// about speed. It reports whether the delay went up (not at the ceiling already).
//
// For a rate refusal at now, the known limit is the slower of the delay in effect and the interval the
// host sustained just before (deliveryRing.sustained): a host whose capacity fell is known at its new
// speed at the first refusal, not after a margin has crept up to it. An outage's backoff stops at the
// outage probe interval (outageProbeFloors), so the first request after it ends is not far behind.
func (a *adaptive) refuse(gen uint64, rate bool, floor, ceiling time.Duration, now time.Time) bool {
	if gen != a.gen {
		return false
	}
	if a.failures == 0 && rate {
		if a.limit > 0 && a.delay <= satMul(a.limit, creepRatio) {
			a.margin = min(a.margin*2, maxMargin) // refused again near the limit: the target was too fast
		}
		a.limit = max(a.delay, a.accepted.sustained(now))
		a.probes = 0
	}
	a.failures++
	next := satMul(max(a.delay, floor, minBackoff), refusalFactor)
	if !rate {
		next = min(next, max(a.delay, outageProbe(floor, ceiling)))
	}
	return a.increase(next, floor, ceiling)
}

// outageProbe is how far an outage backs the delay off: 8 floors, at least 2 s, at most the ceiling.
func outageProbe(floor, ceiling time.Duration) time.Duration {
	return min(max(satMul(floor, outageProbeFloors), minOutageProbe), ceiling)
}

// adopt takes the fleet's adaptive delay and known limit (a shared store's) where they are larger than
// this process's: a refusal one process met paces them all, once (a new generation, as an increase
// starts), and a limit one process learned is every process's recovery target.
func (a *adaptive) adopt(delay, limit, floor, ceiling time.Duration) {
	if limit > a.limit && limit <= ceiling {
		a.limit = limit
	}
	if delay > a.delay {
		a.increase(delay, floor, ceiling)
	}
}

// observeLatency feeds a clean response's latency to the rolling p95 and multiplies the delay by 1.25
// when slowRun consecutive samples are above it. It reports whether the delay went up.
func (a *adaptive) observeLatency(gen uint64, latency, floor, ceiling time.Duration) bool {
	p95, ok := a.lat.p95()
	a.lat.add(latency)
	if !ok || latency <= satAdd(p95, max(satMul(p95, slowMargin), minSlowMargin)) {
		a.slow = 0
		return false
	}
	a.slow++
	if a.slow < slowRun || gen != a.gen {
		return false
	}
	a.slow = 0
	return a.increase(satMul(a.delay, slowFactor), floor, ceiling)
}

// increase raises the delay to d (clamped) and starts a new generation, even at the ceiling: the
// outcomes in flight still count as one burst. It reports whether the delay went up.
func (a *adaptive) increase(d, floor, ceiling time.Duration) bool {
	up := a.set(d, floor, ceiling) > 0
	a.gen++
	a.clean, a.atTarget = 0, 0
	return up
}

// set is the one write of the delay: d clamped to [floor, ceiling]. It reports how the delay moved:
// 1 up, -1 down, 0 not at all, so a clamp is never reported as the opposite of what it did.
func (a *adaptive) set(d, floor, ceiling time.Duration) int {
	old := a.delay
	a.delay = clampDuration(d, floor, ceiling)
	return cmp.Compare(a.delay, old)
}

// succeed counts a clean response of generation gen and, after cleanRun of them, subtracts a step
// sized to the distance from the recovery target (three quarters of it), so a delay doubled by one
// refusal comes back in a few steps and a delay inflated by an outage falls to the floor within
// seconds of recovery, while it never undershoots the host's known limit. At the
// target, after probeAfter clean responses, the known limit is lowered a little to probe for capacity.
// It reports how the delay moved (see set): a target above the ceiling is met at the ceiling, and the
// margin shrinking can bring a delay below the target (a restored state) up to it.
func (a *adaptive) succeed(gen uint64, floor, ceiling time.Duration) int {
	if gen != a.gen {
		return 0
	}
	a.failures = 0
	target := a.target(floor)
	if a.delay <= target {
		old := a.delay
		a.set(a.delay, floor, ceiling)
		a.atTarget++
		switch {
		case a.margin > recoveryMargin && a.atTarget >= marginDecayAfter:
			a.atTarget = 0
			a.margin = recoveryMargin + (a.margin-recoveryMargin)/2
			if a.margin < recoveryMargin*1.05 {
				a.margin = recoveryMargin
			}
			a.set(a.target(floor), floor, ceiling)
		case a.atTarget >= probeAfter && a.limit > 0:
			// Each probe since the last refusal lowers the limit twice as much as the one before
			// (4%, 8%, 16%, 32%): a host whose capacity doubled is followed in a few probes.
			a.atTarget = 0
			a.limit -= satMul(a.limit, probeStep*float64(int(1)<<min(a.probes, 3)))
			a.probes++
			if a.limit < floor {
				a.limit = 0
			}
		}
		return cmp.Compare(a.delay, old)
	}
	a.clean++
	if a.clean < cleanRun {
		return 0
	}
	a.clean = 0
	step := max((a.delay-target)*3/4, time.Millisecond)
	return a.set(max(a.delay-step, target), floor, ceiling)
}

// target is where decreases stop: just above the host's known limit, never below the floor. It may
// be above the ceiling: the delay then stays at the ceiling.
func (a *adaptive) target(floor time.Duration) time.Duration {
	return max(floor, satMul(a.limit, 1+a.margin))
}

// latencyWindow is a ring of the latest latencies, in microseconds (saturating at 71 minutes) to keep
// a tracked host small.
type latencyWindow struct {
	samples [latencyWindowSize]uint32
	n       uint8 // samples held, up to the window size
	next    uint8
}

func (w *latencyWindow) add(d time.Duration) {
	w.samples[w.next] = uint32(min(max(d.Microseconds(), 0), math.MaxUint32))
	w.next = (w.next + 1) % latencyWindowSize
	w.n = min(w.n+1, latencyWindowSize)
}

// p95 returns the 95th percentile of the window; ok is false until it holds minLatencySamples.
func (w *latencyWindow) p95() (time.Duration, bool) {
	n := int(w.n)
	if n < minLatencySamples {
		return 0, false
	}
	var buf [latencyWindowSize]uint32
	s := buf[:n]
	copy(s, w.samples[:n])
	slices.Sort(s)
	return time.Duration(s[(n*95+99)/100-1]) * time.Microsecond, true
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
