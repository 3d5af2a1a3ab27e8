package ext

import (
	"testing"
	"time"
)

// A fleet member's sample carries the fleet's spacing and credit (its admission's facts), never its
// own (the others sent in between): without the fleet's facts both are unknown, which the model
// never reads as spaced (internal/capacity's TestFleetMemberDoesNotJudgeSpacingAlone).
func TestFleetMemberSampleCarriesTheFleetsSpacing(t *testing.T) {
	h := newHost("fleet.test", HostPolicy{BaseDelay: 100 * ms, MaxDelay: time.Minute})
	h.lastAccepted = t0
	refusal := outcomeSignals{o: Outcome{Status: 429}, v: classify(Outcome{Status: 429}), hold: t0.Add(10 * time.Second), retryAfterValid: true}
	// Departed after a hold, 3 s after this member's previous departure: by its own reading, spaced.
	at := t0.Add(3 * time.Second)
	res := Reservation{gen: h.delay.Gen(), afterHold: true, fleet: true, At: at, before: at.Add(-3 * time.Second).UnixNano()}
	smp := h.sampleLocked(res, refusal, at)
	if smp.Spacing != 0 || smp.Credited != 0 {
		t.Fatalf("a fleet member's sample without the fleet's facts: spacing %v, credited %v; want both unknown", smp.Spacing, smp.Credited)
	}
	res.facts = fleetFacts{seq: 10, since: 3 * time.Second}
	if smp = h.sampleLocked(res, refusal, at); smp.Spacing != 3*time.Second || !smp.Fleet {
		t.Fatalf("a fleet member's sample with the fleet's facts: spacing %v, fleet %v; want the fleet's 3s", smp.Spacing, smp.Fleet)
	}
}

// A fleet member's departure stands for the fleet's departures since its previous one under the same
// model (the others were paced by it too), up to maxFleetSpan, and for itself alone after a change of
// the model or as its first: three members sharing a host each see a third of its responses, and
// confirmed a step three times slower than one process.
func TestFleetDepartureSpansTheOthersSinceItsLast(t *testing.T) {
	h := newHost("fleet.test", HostPolicy{BaseDelay: 100 * ms, MaxDelay: time.Minute})
	depart := func(seq, refused uint64, gen uint32) uint8 {
		res := Reservation{gen: gen, fleet: true, facts: fleetFacts{seq: seq, since: 500 * ms, refusedSeq: refused}}
		h.departLocked(&res, t0, false)
		return res.facts.span
	}
	g := h.delay.Gen()
	for _, tc := range []struct {
		seq     uint64
		refused uint64 // the fleet's latest departure reported refused
		gen     uint32
		want    uint8
		why     string
	}{
		{5, 0, g, 1, "its first departure"},
		{8, 0, g, 3, "two others' departures since its last, same model"},
		{9, 0, g, 1, "no other departure since its last"},
		{30, 0, g, maxFleetSpan, "twenty others' departures since its last"},
		{33, 0, g + 1, 1, "the model changed since its last"},
		{2, 0, g + 1, 1, "a number below its last: the store lost its state and numbers again"},
		{4, 0, g + 1, 2, "one other departure since, counted from the store's new numbers"},
		{7, 6, g + 1, 1, "two others' departures since its last, one of them reported refused"},
		{10, 7, g + 1, 3, "two others' since its last, the refused one before its last"},
	} {
		if got := depart(tc.seq, tc.refused, tc.gen); got != tc.want {
			t.Errorf("departure %d (%s): span %d, want %d", tc.seq, tc.why, got, tc.want)
		}
	}
	refusal := outcomeSignals{o: Outcome{Status: 200}, v: classify(Outcome{Status: 200})}
	res := Reservation{gen: g, fleet: true, At: t0, facts: fleetFacts{seq: 36, since: 500 * ms, span: 3}}
	if smp := h.sampleLocked(res, refusal, t0); smp.Span != 3 {
		t.Errorf("a fleet member's sample: span %d, want its departure's 3", smp.Span)
	}
}
