package ext

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A fleet member told to wait because another member departed first draws its jitter again, as the
// departed member's next request does. A request that kept its first draw lost every slot to members
// that drew again after each departure: a member that drew 57 ms of 59.6 sent nothing to a HAProxy
// host for 95 s, and the fleet cruised at 84% of the host's rate while its probes waited for it.
func TestFleetRequestToldToWaitDrawsItsJitterAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "turn.test"
		shared := newSimShared()
		var draws atomic.Int32
		high := func() float64 { // the first draw the highest, the next ones below the other member's
			if draws.Add(1) == 1 {
				return 0.99
			}
			return 0.2
		}
		opts := []Option{WithBaseDelay(time.Second), WithJitter(0.5), WithoutRobots()}
		a := NewPacer(append(opts, WithStore(shared.view(1)), withRandom(high))...)
		defer a.Close()
		b := NewPacer(append(opts, WithStore(shared.view(2)), withRandom(func() float64 { return 0.5 }))...)
		defer b.Close()

		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		var bDepartures atomic.Int32
		bDone := make(chan struct{})
		go func() { // member b departs at every slot it is given
			defer close(bDone)
			for ctx.Err() == nil {
				if _, release, err := b.Wait(ctx, key); err == nil {
					bDepartures.Add(1)
					release()
				}
			}
		}()
		for bDepartures.Load() == 0 { // b holds the host's line first
			time.Sleep(10 * time.Millisecond)
		}
		asked := time.Now()
		_, release, err := a.Wait(ctx, key)
		waited := time.Since(asked)
		cancel()
		<-bDone
		if err != nil {
			t.Fatalf("member a never departed in %v while member b departed %d times: %v", waited, bDepartures.Load(), err)
		}
		release()
		if waited > 3*time.Second { // b's gap is 1.25 s, a's after its first denial 1.1 s
			t.Errorf("member a departed %v after asking, want within 3 s: its next slot once it drew again", waited)
		}
	})
}
