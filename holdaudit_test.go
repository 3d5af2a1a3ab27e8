package ext

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// Issue 33, item 4: the events about one refused response carry one number, the hold applied (the
// wait with its 10% buffer, or a park's length), whether the Retry-After is honoured, above the
// maximum, or so large that it overflows (a park until the last instant a time.Time can hold, in
// 2262): retry_after_honoured or retry_after_too_long, and retry_scheduled. With IgnoreCaps the hold
// applied is the maximum's, while the window stays the one the server announced (window_end), which
// pacereport judges the later departures by.
func TestOneNumberForOneHold(t *testing.T) {
	for _, tc := range []struct {
		value  string
		ignore bool                              // BreakerPolicy.IgnoreCaps
		about  audit.Event                       // the event of the hold itself
		hold   func(now time.Time) time.Duration // the hold applied to a response read at now
		window time.Duration                     // the window's length (window_end), when not the hold's
	}{
		{value: "5", about: audit.EventRetryAfterHonoured, hold: func(time.Time) time.Duration { return withRetryAfterBuffer(5 * time.Second) }},
		{value: "86400", about: audit.EventRetryAfterTooLong, hold: func(time.Time) time.Duration { return withRetryAfterBuffer(24 * time.Hour) }},
		{value: "99999999999999999999", about: audit.EventRetryAfterTooLong, hold: func(now time.Time) time.Duration { return maxInstant.Sub(now) }},
		{value: "86400", ignore: true, about: audit.EventRetryAfterTooLong, hold: func(time.Time) time.Duration { return withRetryAfterBuffer(defaultMaxRetryAfter) },
			window: 24 * time.Hour},
	} {
		t.Run(fmt.Sprintf("%s ignore caps %v", tc.value, tc.ignore), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := newFakeNet(t)
				var first atomic.Bool
				var refusedAt time.Time
				_, base := n.host("ra.test", func(w http.ResponseWriter, r *http.Request) {
					if !first.Swap(true) {
						refusedAt = time.Now()
						w.Header().Set("Retry-After", tc.value)
						w.WriteHeader(http.StatusTooManyRequests)
						return
					}
					fmt.Fprint(w, "ok")
				})
				var buf auditBuf
				c, p := pacedCollector(n, WithBaseDelay(time.Second), WithLogger(zerolog.New(&buf)), WithoutRobots(),
					WithBreaker(BreakerPolicy{IgnoreCaps: tc.ignore}))
				defer p.Close()
				c.Async = false
				_ = c.Visit(base + "/p/0")
				c.Wait()
				want := float64(tc.hold(refusedAt).Milliseconds())
				seen := 0
				for _, e := range events(t, &buf) {
					switch audit.Event(e[audit.FieldEvent].(string)) {
					case tc.about, audit.EventRetryScheduled:
						seen++
						if got := e[audit.FieldComputedDelay]; got != want {
							t.Errorf("%s: computed_delay_ms %v, want the hold applied, %v", e[audit.FieldEvent], got, want)
						}
						if end, ok := e[audit.FieldWindowEnd].(string); ok {
							wantEnd := refusedAt.Add(tc.hold(refusedAt))
							if tc.window > 0 {
								wantEnd = refusedAt.Add(tc.window)
							}
							if got, err := time.Parse(time.RFC3339Nano, end); err != nil || !got.Equal(wantEnd) {
								t.Errorf("%s: window_end %s, want %v", e[audit.FieldEvent], end, wantEnd.UTC())
							}
						}
					}
				}
				if seen != 2 {
					t.Errorf("%d events about the hold, want %s and retry_scheduled:\n%s", seen, tc.about, buf.String())
				}
			})
		})
	}
}
