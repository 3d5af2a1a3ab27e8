package ext

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Issue 9, point 1: when the delay comes down, a request already waiting departs at the new interval
// after the last departure, at once: nothing was booked at the old, longer interval.
func TestDecreaseShortensWaitersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
		h := p.host("h")
		h.delay.Restore(8*time.Second, time.Second, 0, 0)
		res, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		done()
		departed := make(chan time.Duration)
		go func() {
			_, done, err := p.Wait(t.Context(), "h") // would be +8s
			if err != nil {
				t.Error(err)
			}
			done()
			departed <- time.Since(start)
		}()
		time.Sleep(time.Second)
		p.Observe(res, Outcome{Status: 200, Latency: 50 * time.Millisecond})
		p.Observe(res, Outcome{Status: 200, Latency: 50 * time.Millisecond}) // 8s → 4.5s → 2.75s
		if got, want := <-departed, 2750*time.Millisecond; got != want {
			t.Errorf("waiting request departed at +%v, want +%v (the new interval after the last departure)", got, want)
		}
	})
}

// Issue 9, point 1: an increase, or a hold, applies to the waiting head at once.
func TestIncreaseAndHoldStopWaitingHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithRetryAfterBuffer(0))
		res, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		departed := make(chan time.Duration)
		go func() {
			_, done, err := p.Wait(t.Context(), "h") // would be +1s
			if err != nil {
				t.Error(err)
			}
			done()
			departed <- time.Since(start)
		}()
		time.Sleep(500 * time.Millisecond)
		p.Observe(res, Outcome{Status: 429, Header: header("Retry-After", "3")}) // hold until +3.5s
		done()
		if got, want := <-departed, 3500*time.Millisecond; got != want {
			t.Errorf("waiting request departed at +%v, want +%v (the end of the hold learned while it waited)", got, want)
		}
	})
}

// Issue 9, point 1: waiting requests depart in the order they arrived, each an interval after the other.
func TestWaitersDepartInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
		order := make(chan int, 5)
		for i := range 5 {
			go func() {
				_, done, err := p.Wait(t.Context(), "h")
				if err != nil {
					t.Error(err)
					return
				}
				done()
				order <- i
				if got, want := time.Since(start), time.Duration(i)*time.Second; got != want {
					t.Errorf("request %d departed at +%v, want +%v", i, got, want)
				}
			}()
			synctest.Wait() // request i has joined the queue before request i+1
		}
		for i := range 5 {
			if got := <-order; got != i {
				t.Errorf("departure %d was request %d", i, got)
			}
		}
	})
}

// Issue 9, point 2: a wait ends when the request departs or its context ends, never earlier because
// of where the schedule is projected: an interval longer than the time left is waited out, and a
// decrease before the deadline lets the request go.
func TestNoWaitFailsBeforeItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
		h := p.host("h")
		h.delay.Restore(20*time.Second, time.Second, 0, 0) // an outage inflated it
		res, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		done()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		errc := make(chan error)
		go func() {
			_, done, err := p.Wait(ctx, "h")
			if err == nil {
				done()
			}
			errc <- err
		}()
		time.Sleep(9 * time.Second)
		select {
		case err := <-errc:
			t.Fatalf("the wait ended after %v with %v, before its context", time.Since(start), err)
		default:
		}
		for range 2 { // the outage is over: 20s comes down to 5.75s (halfway to 1s, twice), within the deadline
			p.Observe(res, Outcome{Status: 200})
		}
		if err := <-errc; err != nil {
			t.Errorf("wait failed with %v; the interval came down before its deadline", err)
		}

		// And a wait whose time does not come fails when its context ends, not before.
		h.delay.Restore(time.Minute, h.delay.Good(), h.delay.Bad(), h.delay.Version())
		h.wakeHeadLocked()
		ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel2()
		start = time.Now()
		if _, _, err := p.Wait(ctx2, "h"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 10*time.Second {
			t.Errorf("wait ended after %v with %v, want the deadline after 10s", time.Since(start), err)
		}
	})
}

// Issue 9, point 4: the departure instant is the wire. A request whose headers reach the wire 400 ms
// after its admission (a slow dial) moves the next departure an interval after the wire instant, and
// until the wire instant is known the next one does not leave.
func TestLateWireWriteDelaysNextDeparture(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	h := p.host("h")
	h.mu.Lock()
	_, res := h.earliestLocked(t0, 0, 0)
	h.departLocked(&res, t0, true) // admitted at t0, its dial still running
	h.mu.Unlock()
	if _, ok := p.AdmitAt("h", t0.Add(1100*time.Millisecond)); ok {
		t.Fatal("admitted at +1.1s while the previous departure had not reached the wire")
	}
	h.wired(t0.Add(400*time.Millisecond), true)
	if _, ok := p.AdmitAt("h", t0.Add(1399*time.Millisecond)); ok {
		t.Error("admitted at +1.399s: less than the interval after the wire instant +0.4s")
	}
	if res, ok := p.AdmitAt("h", t0.Add(1400*time.Millisecond)); !ok {
		t.Errorf("not admitted at +1.4s, told to ask at +%v", res.At.Sub(t0))
	}
}

// Issue 18: with no interval in force the wire instant moves nothing, so a departure is not traced
// (net/http would copy the request for it) and the next one does not wait for it.
func TestNoIntervalNoWireWait(t *testing.T) {
	p := NewPacer(WithBaseDelay(0), WithJitter(0))
	h := p.host("h")
	h.mu.Lock()
	_, res := h.earliestLocked(t0, 0, 0)
	h.departLocked(&res, t0, true)
	h.mu.Unlock()
	if res.traced {
		t.Error("a departure with no interval is traced")
	}
	if _, ok := p.AdmitAt("h", t0); !ok {
		t.Error("with no interval, the next departure waits for the previous one's wire instant")
	}
}

// Issue 10 item 11: the first departure after a hold is at max(hold end, last departure + interval),
// with a Crawl-delay as without: not a whole interval after the window ends.
func TestFirstDepartureAfterHoldIsAtHoldEnd(t *testing.T) {
	for _, crawl := range []time.Duration{0, 2 * time.Second} {
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0), WithRetryAfterBuffer(0.1))
		h := p.host("h")
		h.crawlDelay = crawl
		res := p.ReserveAt("h", t0)
		p.ObserveAt(res, Outcome{Status: 429, Header: header("Retry-After", "2")}, t0) // hold until +2.2s
		if got := p.ReserveAt("h", t0.Add(100*time.Millisecond)).At.Sub(t0); got != 2200*time.Millisecond {
			t.Errorf("Crawl-delay %v: first departure after the 2.2s hold at +%v, want +2.2s", crawl, got)
		}
	}
}
