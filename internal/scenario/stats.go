package scenario

import (
	"math"
	"net/http"
	"slices"
	"time"
)

// PageRequests returns the arrivals other than /robots.txt, in order.
func PageRequests(arrivals []Arrival) []Arrival {
	out := make([]Arrival, 0, len(arrivals))
	for _, a := range arrivals {
		if a.Path != RobotsPath {
			out = append(out, a)
		}
	}
	return out
}

// Gaps returns the start-to-start gaps between consecutive arrivals (sorted by time first).
func Gaps(arrivals []Arrival) []time.Duration {
	if len(arrivals) < 2 {
		return nil
	}
	at := make([]time.Time, len(arrivals))
	for i, a := range arrivals {
		at[i] = a.At
	}
	slices.SortFunc(at, time.Time.Compare)
	gaps := make([]time.Duration, len(at)-1)
	for i := 1; i < len(at); i++ {
		gaps[i-1] = at[i].Sub(at[i-1])
	}
	return gaps
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of ds by the nearest-rank method; 0 for no values.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// Median is Quantile(ds, 0.5).
func Median(ds []time.Duration) time.Duration { return Quantile(ds, 0.5) }

// P95 is Quantile(ds, 0.95).
func P95(ds []time.Duration) time.Duration { return Quantile(ds, 0.95) }

// Mean returns the arithmetic mean of ds; 0 for no values.
func Mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// Refused counts the arrivals answered 429 or 503.
func Refused(arrivals []Arrival) int {
	n := 0
	for _, a := range arrivals {
		if a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable {
			n++
		}
	}
	return n
}

// PagesOK counts the distinct page paths served 200 (robots.txt excluded).
func PagesOK(arrivals []Arrival) int {
	seen := map[string]bool{}
	for _, a := range arrivals {
		if a.Status == http.StatusOK && a.Path != RobotsPath {
			seen[a.Path] = true
		}
	}
	return len(seen)
}

// Span returns the time from the first arrival to the last; 0 for fewer than two.
func Span(arrivals []Arrival) time.Duration {
	if len(arrivals) < 2 {
		return 0
	}
	lo, hi := arrivals[0].At, arrivals[0].At
	for _, a := range arrivals[1:] {
		if a.At.Before(lo) {
			lo = a.At
		}
		if a.At.After(hi) {
			hi = a.At
		}
	}
	return hi.Sub(lo)
}

// InsideWindows counts the arrivals strictly inside a Retry-After window (Issued < At < Until):
// requests the client sent while told to wait. On loopback a request already on its way when the
// refusal was written arrives within microseconds of Issued; callers wanting to forgive those can
// drop arrivals closer to Issued than their round trip.
func InsideWindows(arrivals []Arrival, windows []Window) int {
	n := 0
	for _, a := range arrivals {
		for _, w := range windows {
			if a.At.After(w.Issued) && a.At.Before(w.Until) {
				n++
				break
			}
		}
	}
	return n
}

// FirstAfter returns the first arrival at or after t (arrivals sorted by time).
func FirstAfter(arrivals []Arrival, t time.Time) (Arrival, bool) {
	for _, a := range arrivals {
		if !a.At.Before(t) {
			return a, true
		}
	}
	return Arrival{}, false
}
