package pacemetrics

import (
	"sync/atomic"

	"github.com/collypace/ext/audit"
)

// Refusal triggers with a counter of their own; any other trigger string counts under "other".
const (
	trigRefusal = iota
	trigServerError
	trigTransportError
	trigOther
	numTriggers
)

var triggerNames = [numTriggers]string{string(audit.TriggerRefusal), string(audit.TriggerServerError), string(audit.TriggerTransportError), OtherHost}

func triggerIndex(trigger audit.Trigger) int {
	switch trigger {
	case audit.TriggerRefusal:
		return trigRefusal
	case audit.TriggerServerError:
		return trigServerError
	case audit.TriggerTransportError:
		return trigTransportError
	}
	return trigOther
}

// numStates is the number of breaker states; audit.BreakerState values are 0 … numStates-1.
const numStates = int(audit.BreakerHalfOpen) + 1

var stateNames = [numStates]string{
	audit.BreakerClosed.String(), audit.BreakerOpen.String(), audit.BreakerHalfOpen.String(),
}

// hostStats is what the Collector counts for one host (or, as Collector.other, for the hosts
// without series of their own). The Observer methods update its atomic counters with no lock; the
// fields after them belong to the scrape and are protected by Collector.mu. 144 bytes.
type hostStats struct {
	key         string
	member      atomic.Bool  // the host has series of its own (top-N)
	breaker     atomic.Int32 // the last audit.BreakerState reported
	departures  atomic.Uint64
	waitNanos   atomic.Int64 // total waited before departures
	refusals    [numTriggers]atomic.Uint64
	retryWaits  atomic.Uint64
	retryNanos  atomic.Int64 // total Retry-After holds
	transitions [numStates]atomic.Uint64

	score          float64 // departures, decayed with a half-life of activityHalfLife
	prevDepartures uint64  // departures at the previous scrape
	prevEvents     uint64  // events at the previous scrape
	lastActive     int64   // Unix nanoseconds of the first scrape that saw the events change
}

// events is the number of events counted for the host, to tell an idle host.
func (s *hostStats) events() uint64 {
	n := s.departures.Load() + s.retryWaits.Load()
	for i := range s.refusals {
		n += s.refusals[i].Load()
	}
	for i := range s.transitions {
		n += s.transitions[i].Load()
	}
	return n
}
