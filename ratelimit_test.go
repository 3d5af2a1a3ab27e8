package ext

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// issue 15's quota target: a server allowing 10 requests per fixed 5 s window, announcing what is
// left and the time to its reset on every response, gets all 10 requests of each window before that
// window's reset and none refused. Spreading reset / remaining instead would leave one unused: after
// the window's first request, 9 remain in 5 s, 556 ms apart, and the 9th of them lands at the reset.
func TestQuotaWindowUsedInFull(t *testing.T) {
	const (
		quota  = 10
		window = 5 * time.Second
	)
	p := NewPacer(WithBaseDelay(100*time.Millisecond), WithJitter(0))
	perWindow := map[int]int{} // departures by window index
	now := t0
	for range 3 * quota {
		res := p.ReserveAt("quota.test", now)
		w := int(res.At.Sub(t0) / window)
		perWindow[w]++
		if perWindow[w] > quota {
			t.Fatalf("request %d of window %d departed at t0+%v: above the quota of %d", perWindow[w], w, res.At.Sub(t0), quota)
		}
		reset := t0.Add(time.Duration(w+1) * window).Sub(res.At)
		h := header("X-RateLimit-Limit", strconv.Itoa(quota),
			"X-RateLimit-Remaining", strconv.Itoa(quota-perWindow[w]),
			"X-RateLimit-Reset", strconv.FormatFloat(reset.Seconds(), 'f', 3, 64))
		p.ObserveAt(res, Outcome{Status: http.StatusOK, Header: h}, res.At)
		now = res.At
	}
	for w := range 3 {
		if perWindow[w] != quota {
			t.Errorf("window %d (t0+%v to t0+%v): %d departures, want all %d of its quota (by window: %v)",
				w, time.Duration(w)*window, time.Duration(w+1)*window, perWindow[w], quota, perWindow)
		}
	}
}
