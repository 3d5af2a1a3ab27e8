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
