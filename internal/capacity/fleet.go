package capacity

import (
	"time"

	"github.com/collypace/ext/audit"
)

// What a fleet shares of a host's model: its bounds by version, and its verdict on noise.

// stamp orders a change of the model across a fleet: its version becomes the unix nanoseconds of now,
// or one more than the last when the clock has not moved on.
func (a *Model) Stamp(now time.Time) {
	a.version = max(a.version+1, now.UnixNano())
}

// capacityModel is what a fleet shares of a host's model, by version (its verdict on noise is
// shared apart: see adoptVerdict).
type Bounds struct{ Delay, Good, Bad time.Duration }

func (a *Model) Bounds() Bounds { return Bounds{a.delay, a.good, a.bad} }

// verdict is the model's verdict on the host's refusals, which only moves forward: undecided, noise
// (noise mode), refuted (noise mode ended for good).
func (a *Model) Verdict() audit.NoiseVerdict {
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
func (a *Model) AdoptVerdict(v audit.NoiseVerdict, floor, ceiling time.Duration) bool {
	if v <= a.Verdict() {
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
// (the unix nanoseconds of the change), a refusal elsewhere that leaves the fleet cruising (a probe's,
// the edge's) doubles the probe wait here as it did there, and a
// cruise probe started elsewhere is one here: the fleet probes as one crawler, not once per member.
func (a *Model) Adopt(delay, good, bad time.Duration, version int64, floor, ceiling time.Duration) {
	a.version = version
	halfOf := a.halfOf // a climbing probe refused elsewhere, adopted before this: is this its half step?
	a.halfOf = 0
	// The fleet's model moved and came back to cruising at the good interval this member cruises at: a
	// cruise probe started and was refused elsewhere between two of its admissions (a member that kept
	// its own wait probed 26-46 s after the fleet's refused probe). The refused bound may have come back
	// as it was (at the creep already) or moved: the creep below good may lie a hair under the gap an
	// edge refusal left (by 2 µs: the member read no refusal and probed 42 s after the fleet's at the
	// server).
	recruised := delay == good && good == a.good && a.delay == a.good && a.good > 0
	if (Bounds{delay, good, bad}) == a.Bounds() {
		if recruised {
			a.refusedElsewhere(version, true)
		}
		return
	}
	if good != a.good {
		a.held = dropRun
	}
	if bad != a.bad || delay > a.delay {
		// The bound a hold set here (holdBound) was probed or moved by the fleet since: this member's
		// next clean response is no reason to probe at once (members that kept it probed in turn, a
		// refused probe every 35-48 s rather than 60-75).
		a.holdBound = false
	}
	if delay > a.delay || bad > a.bad || recruised { // a refusal elsewhere
		// Cruising again after it (a cruise probe or the edge refused) doubles the probe wait here,
		// whether or not this member saw the probe start (one that had not probed every 30 s in turn,
		// each refused: 1.7 refusals a minute). A creep step refused elsewhere doubles it here too, not
		// in the member that met it (see learnRefusal): that member probes next, one wait on, and
		// the others only err slow.
		a.refusedElsewhere(version, delay == good && good >= a.good && a.good > 0)
		if a.probing && a.gain > 2*probeGain {
			// The refused probe was a climbing one, this member's as much as its prober's: the next
			// probe, half as far, is its half step (below).
			halfOf, a.halfOf = a.gain, a.gain
		}
		// It ends this member's climb too: a step twice the last, or half a refused one, is the
		// prober's to take (members with a climbing gain left probed at once, in turn: 8 refusals in
		// two minutes on HAProxy's window at 2/s).
		a.gain = probeGain
	}
	// A cruise probe (at or below the refused bound it set) started elsewhere is probing here too, with
	// its step as the gain: a member that confirms it climbs from the prober's step, not from its own
	// (a climb's 32% step confirmed by another member was followed by a 16% one, refused and read as a
	// cruise probe: a minute at 16% below the rate on HAProxy's window).
	a.probing = delay < good && bad > 0 && delay <= bad
	// A half step marks this member only while it runs here: once the fleet's model moved on (the half
	// step confirmed or refused elsewhere), a marker kept would make the next clean response here a
	// climbing step (loopback HAProxy at 2/s: a member that had adopted the half step probed 11% further
	// at once after another member confirmed it, and was refused).
	a.regain = 0
	if a.probing {
		a.gain = uint8(min(max(int64(good-delay)*100/int64(good), probeGain), maxProbeGain))
		// The half step after a refused climbing probe, started by its prober: confirmed, it ends the
		// climb here as there (a member that confirmed another's half step went twice as far again and
		// was refused: HAProxy's window at 2/s).
		if a.gain < halfOf {
			a.regain, a.halfOf = a.gain, 0
		}
	}
	a.good, a.bad = min(max(good, 0), ceiling), min(max(bad, 0), ceiling)
	a.increase(delay, floor, ceiling)
}

// refusedElsewhere takes a refusal another member met (version: the instant of its change) into this
// member's probe wait, which counts from it; one that left the fleet cruising (a cruise probe's or the
// edge's) doubles the wait, as it did in the member that met it.
func (a *Model) refusedElsewhere(version int64, cruising bool) {
	a.refused = max(a.refused, version)
	if cruising {
		a.missed()
	}
}
