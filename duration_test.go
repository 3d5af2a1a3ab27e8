package ext

import (
	"math"
	"testing"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// issue 10 item 12: durations from options and headers saturate instead of wrapping negative.
// WithMaxDelay(math.MaxInt64) let 34 doublings of 1 s turn the adaptive delay negative; a huge
// WithMaxRetryAfter let the Retry-After buffer overflow into a hold in the past, and the derived
// limits (maxHold, the store repair's interval bound) overflow the same way.
func TestHugeDurationsSaturate(t *testing.T) {
	t.Run("max delay", func(t *testing.T) {
		p := NewPacer(WithBaseDelay(time.Second), WithMaxDelay(math.MaxInt64), withRandom(func() float64 { return 0.5 }))
		now, prev := t0, time.Duration(0)
		for i := range 70 {
			res := p.ReserveAt("h", now)
			if res.At.Before(now) || res.Interval < 0 || res.Jitter < 0 {
				t.Fatalf("refusal %d: reservation at now%+v, interval %v, jitter %v", i, res.At.Sub(now), res.Interval, res.Jitter)
			}
			p.ObserveAt(res, Outcome{Status: 429}, now) // rate refusals: an outage's backoff stops early
			st, _ := p.HostAt("h", now)
			if st.AdaptiveDelay < prev {
				t.Fatalf("refusal %d: adaptive delay %v after %v", i, st.AdaptiveDelay, prev)
			}
			prev = st.AdaptiveDelay
		}
		if prev != duration.Max {
			t.Errorf("adaptive delay %v after 70 refusals, want it saturated at %v", prev, duration.Max)
		}
	})
	t.Run("max Retry-After", func(t *testing.T) {
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithMaxRetryAfter(math.MaxInt64))
		if got := p.cfg.maxHold(); got != duration.Max {
			t.Errorf("maxHold = %v, want %v", got, duration.Max)
		}
		p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: header("Retry-After", "9223372036")}, t0)
		st, _ := p.HostAt("h", t0)
		if want := t0.Add(duration.Max); !st.RetryAfterUntil.Equal(want) {
			t.Errorf("hold until t0+%v, want it saturated at t0+%v", st.RetryAfterUntil.Sub(t0), duration.Max)
		}
	})
	t.Run("store repair", func(t *testing.T) {
		next := t0.Add(time.Hour)
		st, fixes := StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, NextDeparture: next, HoldUntil: next}.
			repair(repairLimits{floor: time.Second, ceiling: duration.Max, maxHold: duration.Max, maxCrawlDelay: time.Minute}, t0)
		if len(fixes) != 0 || !st.NextDeparture.Equal(next) || !st.HoldUntil.Equal(next) {
			t.Errorf("repair with the largest limits changed a state an hour ahead: %q, next %v, hold %v", fixes, st.NextDeparture, st.HoldUntil)
		}
	})
}
