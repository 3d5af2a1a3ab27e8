package capacity

import (
	"math/bits"
	"time"

	"github.com/collypace/ext/internal/duration"
)

// governor bounds the share of a host's requests refused, whatever the model believes: a misreading
// (a limiter taken for noise, a clean response credited to the wrong interval, a fleet member's third
// of the evidence) must fail slow, never fast. It counts the last governWindow outcomes; once
// governJudge of them are known and at least governShare were refused, the delay's minimum becomes
// governSlow × the interval in force, and the window starts again. A window refused under half the bound halves that minimum. Every limiter flood
// measured (48-61% of requests refused) is over the bound within governJudge outcomes; a host refusing
// a third of first attempts at any pace (about a quarter of all requests) reaches it by chance in about
// one window in forty.
//
// A refusal the model's search from below answered by slowing governSlow or more (a limiter's rate
// sought from a floor far under it: a refusal a step, each step a slowdown of rateBackoff or more) is
// not counted: the model already did what the governor would, and counting the search's refusals held
// a host found within seconds 1.5× slower for a minute after. A model that stops slowing (at its cap,
// in noise mode, or once anything good is known) is counted as before.
type governor struct {
	min    time.Duration // the delay's minimum (0: none)
	window uint32        // the last outcomes, a bit each (1: refused), newest lowest
	n      uint8         // outcomes in the window, up to governWindow
	// answered: the last refusal was answered by the model's search from below (nothing good known)
	// slowing by governSlow or more, as the governor would: it is not counted (see Model.Refuse).
	answered bool
}

const (
	governWindow = 32
	GovernJudge  = 20
	GovernShare  = 0.4
	governSlow   = 1.5
)

// observe counts an outcome; interval is the host's interval in force. It reports whether
// the share refused crossed the bound: the minimum was raised, and the caller applies it.
func (g *governor) observe(refused bool, interval time.Duration) bool {
	g.window <<= 1
	if refused {
		g.window |= 1
	}
	g.n = min(g.n+1, governWindow)
	if g.n < GovernJudge {
		return false
	}
	n := bits.OnesCount32(g.window & (1<<g.n - 1))
	share := float64(n) / float64(g.n)
	switch {
	case share >= GovernShare:
		g.min = max(g.min, duration.Mul(interval, governSlow))
		g.window, g.n = 0, 0
		return true
	case share < GovernShare/2 && g.n == governWindow && g.min > 0:
		g.min /= 2 // calm again: give the slowdown back, a half a window
		if g.min < time.Millisecond {
			g.min = 0
		}
		g.window, g.n = 0, 0
	}
	return false
}

// governed counts an outcome for the refusal governor and, when it trips, applies its minimum to the
// delay (a new generation: the outcomes in flight were sent faster). It reports whether it tripped.
func (a *Model) Governed(refused bool, interval, floor, ceiling time.Duration) bool {
	if refused && a.govern.answered {
		a.govern.answered = false
		return false
	}
	if !a.govern.observe(refused, interval) {
		return false
	}
	a.increase(a.delay, floor, ceiling)
	return true
}
