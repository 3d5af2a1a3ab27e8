package ext

import (
	"fmt"
	"time"

	"github.com/collypace/ext/audit"
)

// Observer receives the pacer's events as they happen, for metrics (see the pacemetrics package).
// Its methods are called on the goroutines that make the events, with no lock held: they must be
// safe for concurrent use and quick.
//
// An Observer that also has a method FleetChanged(audit.FleetStats) is told, by each Queue on a fleet's
// frontier, the member's figures at each heartbeat and when its Run ends (pacemetrics' Collector has).
type Observer interface {
	// Departed reports a departure to host after waiting waited for its slot (in-flight cap and schedule).
	Departed(host string, waited time.Duration)
	// Refused reports a refusal by host; trigger is refusal, server_error or transport_error.
	Refused(host string, trigger audit.Trigger)
	// RetryAfter reports a Retry-After window obeyed: no departure to host for wait.
	RetryAfter(host string, wait time.Duration)
	// BreakerChanged reports that host's circuit breaker entered state.
	BreakerChanged(host string, state audit.BreakerState)
}

// WithObserver sends the pacer's events to o, which must not be nil.
func WithObserver(o Observer) Option {
	return func(c *config) {
		if o == nil {
			c.reject("WithObserver", "nil", "no Observer", "")
			return
		}
		c.observer = o
		c.accept("WithObserver", fmt.Sprintf("%T", o))
	}
}

// nopObserver is the default Observer: it does nothing.
type nopObserver struct{}

func (nopObserver) Departed(string, time.Duration)            {}
func (nopObserver) Refused(string, audit.Trigger)             {}
func (nopObserver) RetryAfter(string, time.Duration)          {}
func (nopObserver) BreakerChanged(string, audit.BreakerState) {}
