package ext

import (
	"math"
	"testing"
	"time"
)

func TestSaturatingArithmetic(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"add", satAdd(time.Second, time.Second), 2 * time.Second},
		{"add overflows up", satAdd(maxDuration, 1), maxDuration},
		{"add overflows down", satAdd(minDuration, -1), minDuration},
		{"add mixed signs", satAdd(maxDuration, minDuration), -1},
		{"mul", satMul(time.Second, 2.5), 2500 * time.Millisecond},
		{"mul overflows up", satMul(maxDuration, 2), maxDuration},
		{"mul by the largest float", satMul(time.Second, math.MaxFloat64), maxDuration},
		{"mul overflows down", satMul(maxDuration, -2), minDuration},
		{"mul by infinity", satMul(time.Second, math.Inf(1)), maxDuration},
		{"mul NaN", satMul(time.Second, math.NaN()), 0},
		{"mul zero by infinity", satMul(0, math.Inf(1)), 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

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
		if prev != maxDuration {
			t.Errorf("adaptive delay %v after 70 refusals, want it saturated at %v", prev, maxDuration)
		}
	})
	t.Run("max Retry-After", func(t *testing.T) {
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithMaxRetryAfter(math.MaxInt64))
		if got := p.cfg.maxHold(); got != maxDuration {
			t.Errorf("maxHold = %v, want %v", got, maxDuration)
		}
		p.ObserveAt(p.ReserveAt("h", t0), Outcome{Status: 429, Header: header("Retry-After", "9223372036")}, t0)
		st, _ := p.HostAt("h", t0)
		if want := t0.Add(maxDuration); !st.RetryAfterUntil.Equal(want) {
			t.Errorf("hold until t0+%v, want it saturated at t0+%v", st.RetryAfterUntil.Sub(t0), maxDuration)
		}
	})
	t.Run("store repair", func(t *testing.T) {
		next := t0.Add(time.Hour)
		st, fixes := StoredHost{Version: StateVersion, AdaptiveDelay: time.Second, NextDeparture: next, HoldUntil: next}.
			repair(repairLimits{floor: time.Second, ceiling: maxDuration, maxHold: maxDuration, maxCrawlDelay: time.Minute}, t0)
		if len(fixes) != 0 || !st.NextDeparture.Equal(next) || !st.HoldUntil.Equal(next) {
			t.Errorf("repair with the largest limits changed a state an hour ahead: %q, next %v, hold %v", fixes, st.NextDeparture, st.HoldUntil)
		}
	})
}
