package scenario

import "time"

// SlidingWindow is HAProxy's request-rate limiter: a stick table tracking http_req_rate(Period) per
// client, and a request denied when the rate read exceeds Limit:
//
//	stick-table type ip size 1k expire 10s store http_req_rate(1s)
//	http-request track-sc0 src
//	http-request return status 429 hdr Retry-After 1 if { sc_http_req_rate(0) gt 4 }
//
// HAProxy's frequency counter keeps two buckets: cur, the requests of the current period (this one
// included, for tracking comes before the check), and prev, those of the period before. The rate it
// reads is cur + prev × (Period − elapsed) / Period, elapsed being the time into the current period,
// in whole milliseconds and rounded down: a sliding window over the last Period, interpolated. Every
// request counts, refused ones too, so a client that keeps asking while refused stays refused; a
// burst of Limit inside one period is let through. Periods follow each other from the first page request.
type SlidingWindow struct {
	Limit  int           // requests let through per Period, ≥ 1 (the `gt` operand)
	Period time.Duration // the counter's period, 1 s when zero; whole milliseconds
	// Status answers a request over the limit: a 4xx or 5xx, 429 when zero.
	Status int
	// RetryAfter is announced with each refusal, rounded up to whole seconds. Zero sends none.
	RetryAfter time.Duration
}

// freqCounter is HAProxy's freq_ctr_period with explicit time. The zero value is ready to use.
type freqCounter struct {
	start      time.Time // start of the current period; zero before the first event
	cur, prev  int
	periodMsec int64
}

// addAt counts one event at now and returns the rate read just after it: cur + prev × remaining/period.
// A now earlier than the current period's start counts in the current period.
func (f *freqCounter) addAt(now time.Time) int {
	period := time.Duration(f.periodMsec) * time.Millisecond
	if f.start.IsZero() {
		f.start = now
	}
	if elapsed := now.Sub(f.start); elapsed >= period {
		n := elapsed / period // whole periods gone by
		if n == 1 {
			f.prev = f.cur
		} else {
			f.prev = 0
		}
		f.cur = 0
		f.start = f.start.Add(n * period)
	}
	f.cur++
	elapsed := max(now.Sub(f.start).Milliseconds(), 0)
	return f.cur + int(int64(f.prev)*(f.periodMsec-elapsed)/f.periodMsec)
}
