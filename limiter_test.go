package ext

import (
	"testing"
	"testing/synctest"
	"time"
)

// When the delay comes down, requests already waiting on slots booked at the old, longer interval are
// woken and book again: a host recovering from an outage is not held back by stale bookings.
func TestWaitersRebookWhenDelayDecreases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
		h := p.host("h")
		h.delay.delay, h.delay.limit = 8*time.Second, time.Second
		res, done, err := p.Wait(t.Context(), "h")
		if err != nil {
			t.Fatal(err)
		}
		done()
		departed := make(chan time.Duration)
		go func() {
			_, done, err := p.Wait(t.Context(), "h") // booked at +8s
			if err != nil {
				t.Error(err)
			}
			done()
			departed <- time.Since(start)
		}()
		time.Sleep(time.Second)
		p.Observe(res, Outcome{Status: 200, Latency: 50 * time.Millisecond})
		p.Observe(res, Outcome{Status: 200, Latency: 50 * time.Millisecond}) // 8s → 2.825s
		if got, want := <-departed, 2825*time.Millisecond; got != want {
			t.Errorf("waiting request departed at +%v, want +%v (the new interval after the last departure)", got, want)
		}
	})
}

// A departure never follows the previous one by less than the interval, even when the previous one
// left late (timers firing together after a stall).
func TestLateDepartureKeepsSpacing(t *testing.T) {
	p := NewPacer(WithBaseDelay(time.Second), WithJitter(0))
	h := p.host("h")
	first, second := h.reserveAt(t0, 0, 0), h.reserveAt(t0, 0, 0) // slots +0s and +1s
	stall := t0.Add(1500 * time.Millisecond)
	if c, _, _ := h.confirmAt(first, stall); c != departed {
		t.Fatalf("first confirmation = %v, want departed", c)
	}
	c, until, _ := h.confirmAt(second, stall)
	if c != tooSoon || !until.Equal(stall.Add(time.Second)) {
		t.Errorf("second confirmation at the same instant = %v until +%v, want tooSoon until +2.5s", c, until.Sub(t0))
	}
}
