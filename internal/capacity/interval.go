package capacity

import (
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/duration"
)

// interval is the maximum of the base delay, the Crawl-delay, the rate-limit interval and the adaptive
// delay, with the trigger that set it (ties go to the published constraint).
func Interval(base, crawl, rate, adaptive time.Duration) (time.Duration, audit.Trigger) {
	d, why := base, audit.TriggerBase
	if adaptive > d {
		d, why = adaptive, audit.TriggerAdaptive
	}
	if rate > 0 && rate >= d {
		d, why = rate, audit.TriggerRateLimit
	}
	if crawl > 0 && crawl >= d {
		d, why = crawl, audit.TriggerCrawlDelay
	}
	return d, why
}

// jitter returns the extra added on top of an interval: up to fraction × interval, never negative,
// and never so much that interval + jitter overflows. r is a random number in [0, 1).
func Jitter(d time.Duration, fraction, r float64) time.Duration {
	if fraction <= 0 || d <= 0 || r <= 0 {
		return 0
	}
	return min(duration.Mul(d, fraction*min(r, 1)), duration.Max-d)
}
