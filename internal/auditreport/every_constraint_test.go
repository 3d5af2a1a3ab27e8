package auditreport

import (
	"strings"
	"testing"
	"time"

	"github.com/collypace/ext/audit"
)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// windowed is a hold event of the given kind from t0+fromMS to t0+toMS; computedMS is its
// computed_delay_ms (for retry_after_too_long: the Retry-After the server sent).
func windowed(host string, event audit.Event, fromMS, toMS, computedMS int) string {
	return line(host, event, at(fromMS), map[string]any{audit.FieldStatusCode: 503, audit.FieldComputedDelay: computedMS,
		audit.FieldWindowStart: at(fromMS).Format(time.RFC3339Nano), audit.FieldWindowEnd: at(toMS).Format(time.RFC3339Nano)})
}

// depRate is a departure at t0+ms with the floor of 1 s and the rate-limit interval in force.
func depRate(host string, ms int, path string, rateMS int) string {
	return line(host, audit.EventDelayApplied, at(ms), map[string]any{
		audit.FieldURL: "https://" + host + path, audit.FieldWaitMS: 0, audit.FieldIntervalMS: max(1000, rateMS),
		audit.FieldCrawlDelayMS: 0, audit.FieldRateIntervalMS: rateMS,
	})
}

func event(host string, e audit.Event, ms int, fields map[string]any) string {
	return line(host, e, at(ms), fields)
}

// TestReportChecksEveryConstraintAtEveryGap: every doctored violation the report once passed (a departure in a park window, in a robots-unavailable hold, in an open-breaker period, a
// bypass, a gap under the earlier departure's constraint, a gap under a constraint another process
// learned) is reported, by the departure to /x; the same trails without the doctored line are clean.
// Each case is one or two trails (processes).
func TestReportChecksEveryConstraintAtEveryGap(t *testing.T) {
	h := "shop.example"
	const hour = 3600 * 1000
	for _, tc := range []struct {
		name   string
		trails []string
		bad    string // a phrase of the violation of /x; "" = none
	}{
		{"departure 200 ms into another process's 2 h park",
			[]string{dep(h, -1000, "/a", 0) + windowed(h, audit.EventRetryAfterTooLong, 100, 2*hour+100, 2*hour) + event(h, audit.EventBreakerOpened, 100, nil),
				dep(h, 300, "/x", 0)},
			"inside the retry_after_too_long window"},
		{"departure after the park", []string{dep(h, 0, "/a", 0) + windowed(h, audit.EventRetryAfterTooLong, 100, 2*hour+100, 2*hour), dep(h, 2*hour+100, "/b", 0)}, ""},
		// IgnoreCaps: the pacer held to its maximum (1 h) only; the server asked for 2 h.
		{"departure after a capped hold, inside the Retry-After sent",
			[]string{dep(h, 0, "/a", 0) + windowed(h, audit.EventRetryAfterTooLong, 100, hour+100, 2*hour) + dep(h, hour+200, "/x", 0)},
			"inside the retry_after_too_long window"},
		{"departure in a robots-unavailable hold",
			[]string{dep(h, 0, "/robots.txt", 0) + windowed(h, audit.EventRobotsUnavailable, 100, 5100, 5000) + dep(h, 2000, "/x", 0)},
			"inside the robots_unavailable window"},
		{"robots.txt unavailable, its cached rules still apply: no hold",
			[]string{dep(h, 0, "/robots.txt", 0) + event(h, audit.EventRobotsUnavailable, 100, map[string]any{audit.FieldStatusCode: 503}) + dep(h, 2000, "/b", 0)}, ""},
		{"departure while the breaker was open",
			[]string{dep(h, 0, "/a", 0) + event(h, audit.EventBreakerOpened, 100, nil) + dep(h, 2000, "/x", 0) + event(h, audit.EventBreakerHalfOpen, 3000, nil)},
			"while its process's breaker was open"},
		{"the half-open probe and after",
			[]string{dep(h, 0, "/a", 0) + event(h, audit.EventBreakerOpened, 100, nil) + event(h, audit.EventBreakerHalfOpen, 3000, nil) + dep(h, 3000, "/b", 0) +
				event(h, audit.EventBreakerClosed, 3100, nil) + dep(h, 4000, "/c", 0)}, ""},
		{"open at the end of the trail",
			[]string{dep(h, 0, "/a", 0) + event(h, audit.EventBreakerOpened, 100, nil) + dep(h, 60000, "/x", 0)},
			"while its process's breaker was open"},
		// The breaker is the process's own (a shared store does not admit by it).
		{"another process departs while one process's breaker is open",
			[]string{dep(h, 0, "/a", 0) + event(h, audit.EventBreakerOpened, 100, nil) + event(h, audit.EventBreakerHalfOpen, 9000, nil), dep(h, 2000, "/b", 0)}, ""},
		{"pacing bypassed",
			[]string{dep(h, 0, "/a", 0) + event(h, audit.EventPacingBypassed, 1500, map[string]any{audit.FieldURL: "https://shop.example/x", audit.FieldDetail: "transport replaced"}) + dep(h, 1500, "/b", 0)},
			"pacing_bypassed"},
		{"a gap under the earlier departure's rate-limit interval, in another process",
			[]string{depRate(h, 0, "/a", 5000), depRate(h, 1200, "/x", 0)},
			"1.2s after the previous departure, under the " + ConstraintRateLimit + " of 5s in force at the previous departure"},
		{"a gap under the earlier departure's Crawl-delay, in another process",
			[]string{dep(h, 0, "/a", 3000), dep(h, 1500, "/x", 0)},
			"1.5s after the previous departure, under the " + ConstraintCrawlDelay + " of 3s in force at the previous departure"},
		// One process's rate-limit interval shrinks as the quota refills: its latest word binds.
		{"a process's own interval, shrunk since its previous departure", []string{depRate(h, 0, "/a", 1200) + depRate(h, 1040, "/b", 1040)}, ""},
		{"a gap under the earlier departure's floor, in another process",
			[]string{dep(h, 0, "/a", 0), line(h, audit.EventDelayApplied, at(300), map[string]any{audit.FieldBaseDelayMS: 200,
				audit.FieldURL: "https://shop.example/x", audit.FieldWaitMS: 0, audit.FieldIntervalMS: 200, audit.FieldCrawlDelayMS: 0, audit.FieldRateIntervalMS: 0})},
			"300ms after the previous departure, under the " + ConstraintFloor + " of 1s in force at the previous departure"},
		{"a gap under a rate-limit interval another process learned",
			[]string{depRate(h, 0, "/a", 0) + event(h, audit.EventRateLimitApplied, 100, map[string]any{audit.FieldComputedDelay: 5000}) + depRate(h, 6300, "/a2", 5000),
				depRate(h, 1300, "/x", 0)},
			"1.3s after the previous departure, under the " + ConstraintRateLimit + " of 5s learned by trail1.jsonl at 2026-12-02T12:00:00.100Z"},
		{"a rate-limit interval learned after the departure",
			[]string{depRate(h, 0, "/a", 0) + event(h, audit.EventRateLimitApplied, 1400, map[string]any{audit.FieldComputedDelay: 5000}) + depRate(h, 6300, "/a2", 5000),
				depRate(h, 1300, "/b", 0)}, ""},
		{"a rate-limit interval another process learned ends at its quota's reset",
			[]string{depRate(h, 0, "/a", 0) + event(h, audit.EventRateLimitApplied, 100, map[string]any{audit.FieldComputedDelay: 5000,
				audit.FieldUntil: at(1200).Format(time.RFC3339Nano)}) + depRate(h, 9000, "/a2", 0),
				depRate(h, 1300, "/b", 0)}, ""},
		{"... and binds before it",
			[]string{depRate(h, 0, "/a", 0) + event(h, audit.EventRateLimitApplied, 100, map[string]any{audit.FieldComputedDelay: 5000,
				audit.FieldUntil: at(1400).Format(time.RFC3339Nano)}) + depRate(h, 9000, "/a2", 0),
				depRate(h, 1300, "/x", 0)},
			"1.3s after the previous departure, under the " + ConstraintRateLimit + " of 5s learned by trail1.jsonl"},
		{"what a process learned binds until its trail ends",
			[]string{depRate(h, 0, "/a", 0) + event(h, audit.EventRateLimitApplied, 100, map[string]any{audit.FieldComputedDelay: 5000}),
				depRate(h, 5100, "/b", 0) + depRate(h, 6100, "/c", 0)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := make([][]byte, len(tc.trails))
			for i, s := range tc.trails {
				bs[i] = []byte(s)
			}
			r := checkBytes(t, DefaultTolerance, bs...)
			switch {
			case tc.bad == "" && !r.OK():
				t.Errorf("violations: %v", r.Violations)
			case tc.bad != "" && (len(r.Violations) != 1 || !strings.Contains(r.Violations[0].String(), "https://shop.example/x: "+tc.bad)):
				t.Errorf("violations %v, want one by /x: %s", r.Violations, tc.bad)
			}
			if len(tc.trails) == 2 && tc.bad != "" {
				for i, b := range bs {
					if r := checkBytes(t, DefaultTolerance, b); !r.OK() {
						t.Errorf("trail %d alone: %v; the violation needs the other process's constraint", i+1, r.Violations)
					}
				}
			}
		})
	}
}

// A trail without a departure proves nothing, whatever else it holds.
func TestTrailWithoutDepartureProvesNothing(t *testing.T) {
	h := "shop.example"
	for name, trail := range map[string]string{
		"empty":          "",
		"garbage":        "not json\n{\"a\":1}\n",
		"no departure":   hold(h, 0, 1000) + event(h, audit.EventBreakerOpened, 100, nil),
		"one departure":  dep(h, 0, "/a", 0),
		"two departures": dep(h, 0, "/a", 0) + dep(h, 1000, "/b", 0),
	} {
		r := checkBytes(t, DefaultTolerance, []byte(trail))
		if want := strings.Contains(name, "departure") && !strings.HasPrefix(name, "no "); r.Proves() != want {
			t.Errorf("%s: Proves() = %v, want %v", name, r.Proves(), want)
		}
	}
}
