package ext

import (
	"fmt"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// The pacer's interval, as reservations and the audit trail show it (the capacity model's own rules
// are internal/capacity's tests).

// ms is a millisecond, for the tests' durations.
const ms = time.Millisecond

// A reservation's jitter lengthens the gap to the next departure.
func TestReservationAddsJitter(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0.1), withRandom(func() float64 { return 0.5 }))
	p.ReserveAt("h", t0)
	if got := p.ReserveAt("h", t0).At.Sub(t0); got != 1050*ms {
		t.Errorf("second departure at +%v, want +1.05s", got)
	}
}

// Departures are booked one interval apart, from the previous departure, whatever the latency.
func TestReservationsAreStartBased(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	for i := range 5 {
		res := p.ReserveAt("h", t0)
		if want := t0.Add(time.Duration(i) * time.Second); !res.At.Equal(want) {
			t.Fatalf("reservation %d at +%v, want +%v", i, res.At.Sub(t0), want.Sub(t0))
		}
	}
}

// issue 10 item 4: the adaptive delay never exceeds the ceiling, whatever moves it. Refusals at the
// ceiling widen the margin until the recovery target (known limit × (1 + margin)) is above the
// ceiling; clean responses then decayed the margin and set the delay to that target unclamped (46.5 s
// with a 30 s ceiling), logged as a decrease. A 301 with Retry-After: 0 is a rate refusal too and
// ratcheted the same way. Every audit event also says which way the delay went.
func TestAdaptiveDelayNeverExceedsCeiling(t *testing.T) {
	for _, refusal := range []Outcome{
		{Status: 429},
		{Status: 301, Header: header("Retry-After", "0")},
	} {
		t.Run(fmt.Sprint(refusal.Status), func(t *testing.T) {
			var buf auditBuf
			p := NewPacer(WithBaseDelay(time.Second), WithMaxDelay(30*time.Second), WithJitter(0),
				WithLogger(zerolog.New(&buf)), withRandom(func() float64 { return 0 }))
			now := t0
			observe := func(o Outcome) {
				t.Helper()
				before, _ := p.HostAt("h", now)
				seen := len(events(t, &buf))
				p.ObserveAt(p.ReserveAt("h", now), o, now)
				after, _ := p.HostAt("h", now)
				if after.AdaptiveDelay > 30*time.Second {
					t.Fatalf("adaptive delay %v above the 30s ceiling", after.AdaptiveDelay)
				}
				for _, e := range events(t, &buf)[seen:] {
					switch e[audit.FieldEvent] { // a JSON string: compared as one
					case string(audit.EventDelayDecreased):
						if after.AdaptiveDelay >= before.AdaptiveDelay {
							t.Fatalf("delay_decreased logged for %v → %v", before.AdaptiveDelay, after.AdaptiveDelay)
						}
					case string(audit.EventDelayIncreased):
						if after.AdaptiveDelay <= before.AdaptiveDelay {
							t.Fatalf("delay_increased logged for %v → %v", before.AdaptiveDelay, after.AdaptiveDelay)
						}
					}
				}
				now = now.Add(after.Interval)
			}
			for range 5 { // 1 s doubled to the ceiling
				observe(refusal)
			}
			for range 5 { // refused at the ceiling after a clean response
				observe(Outcome{Status: 200})
				observe(refusal)
			}
			for range 12 { // clean responses at the ceiling (four confirmation runs): confirmed, then probes below it
				observe(Outcome{Status: 200})
			}
			if st, _ := p.HostAt("h", now); st.AdaptiveDelay > 30*time.Second || st.Breaker != audit.BreakerClosed {
				t.Errorf("after clean responses: delay %v, breaker %v; want at most the 30s ceiling, closed", st.AdaptiveDelay, st.Breaker)
			}
		})
	}
}

// The first departure after a Retry-After hold is marked afterHold (the model reads its refusal as
// RefusedSpaced: internal/capacity's TestRefusalAfterAHoldTeachesNothingAboutSpeed); a later one is not.
func TestFirstDepartureAfterAHoldIsMarked(t *testing.T) {
	h := newHost("h", HostPolicy{BaseDelay: 100 * ms, MaxDelay: time.Minute, MaxInFlight: 8})
	h.lastDeparture, h.holdUntil = t0, t0.Add(2*time.Second)
	if _, res := h.earliestLocked(t0.Add(time.Second), 0, 0); !res.afterHold {
		t.Error("the first departure after a hold is not marked afterHold")
	}
	h.lastDeparture = t0.Add(3 * time.Second)
	if _, res := h.earliestLocked(t0.Add(4*time.Second), 0, 0); res.afterHold {
		t.Error("a departure after another since the hold is marked afterHold")
	}
}
