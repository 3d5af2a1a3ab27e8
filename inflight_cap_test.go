package ext

import (
	"testing"
	"testing/synctest"
	"time"
)

// The in-flight cap the queueing signal learns holds requests at the head of the host's line.

// The cap holds departures: with the cap at 1, a second request waits for the first to land, even
// when its interval has come.
func TestInFlightCapHoldsTheHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPacer(WithBaseDelay(20*ms), WithJitter(0), WithoutRobots())
		h := p.host("h")
		h.delay.ObserveQueue(5*ms, 1, 20*ms, h.policy.MaxInFlight, time.Now()) // the first response: a cap of what the interval needs, 1
		_, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		second := make(chan time.Duration)
		go func() {
			_, done, err := p.Wait(t.Context(), "h")
			if err == nil {
				done()
			}
			second <- time.Since(start)
		}()
		time.Sleep(100 * ms) // the first request's response takes 100 ms
		done()
		if got := <-second; got != 100*ms {
			t.Errorf("second request departed after %v, want 100ms (when the first landed)", got)
		}
	})
}
