package breaker

import (
	"testing"
	"time"

	"github.com/collypace/ext/audit"
)

// t0 is the tests' instant zero.
var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// The breaker trips when the interval stays at or above the threshold for the sustained time.
func TestTripsOnSustainedDelay(t *testing.T) {
	var b Breaker
	pol := Rule{Threshold: 45 * time.Second, Sustain: 2 * time.Minute, Failures: 10}
	if ch := b.Observe(false, true, false, 50*time.Second, pol, t0); ch != nil {
		t.Fatal("tripped at once")
	}
	if ch := b.Observe(false, true, false, 50*time.Second, pol, t0.Add(time.Minute)); ch != nil {
		t.Fatal("tripped before the sustained time")
	}
	ch := b.Observe(false, true, false, 50*time.Second, pol, t0.Add(2*time.Minute))
	if ch == nil || ch.Reason != string(audit.TripSustainedDelay) || b.state != audit.BreakerOpen {
		t.Errorf("after 2 min at 50s: change %+v, state %v; want open for sustained_delay", ch, b.state)
	}
}

// A dip below the threshold restarts the sustained-time clock.
func TestSustainRestartsBelowThreshold(t *testing.T) {
	var b Breaker
	pol := Rule{Threshold: 45 * time.Second, Sustain: 2 * time.Minute}
	b.Observe(false, true, false, 50*time.Second, pol, t0)
	b.Observe(false, true, false, 10*time.Second, pol, t0.Add(time.Minute))
	if ch := b.Observe(false, true, false, 50*time.Second, pol, t0.Add(2*time.Minute)); ch != nil {
		t.Errorf("tripped although the interval dipped below the threshold: %+v", ch)
	}
}
