package main

import (
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
)

// Measurement constants. Each is stated in BENCHMARKS.md.
const (
	// windowGrace forgives a request that arrives within this long after a Retry-After was
	// announced: it was already on its way (the client cannot know of a refusal before receiving
	// it). On loopback a round trip takes well under a millisecond.
	windowGrace = 10 * time.Millisecond
	// dateResolution is what an HTTP-date Retry-After can add to the wait a client computes: both
	// the date and the Date header have one-second resolution.
	dateResolution = time.Second
	// steadyFrom is the learning a crawl is granted (issue 26): its steady state is what follows,
	// from this long after the group's first page request.
	steadyFrom = 30 * time.Second
	// steadyWindow is the length of the windows the steady state is judged in, back to back from
	// steadyFrom, and how long after a capacity step the new rate is granted to be found.
	steadyWindow = 30 * time.Second
)

// Metrics are the measurements of one group of hosts in one crawl, all taken from the servers'
// arrival logs except Wall (when the crawler finished its last response of the group).
type Metrics struct {
	Hosts    int
	Requests int             // page requests received (robots.txt excluded), refused ones included
	Refused  int             // answered 429 or 503
	InWindow int             // arrived inside an announced Retry-After window, sent after the refusal was answered
	InFlight int             // arrived inside one but already on its way (not counted above)
	Windows  int             // Retry-After windows announced
	Pages    int             // pages of the group's hosts
	Lost     int             // pages never served 200
	Gaps     []time.Duration // start-to-start gaps between page requests, pooled over the hosts
	Median   time.Duration
	P1       time.Duration
	// MinSent is, for the two requests of the shortest gap at the server (Min), the gap between the
	// instants their clients handed them to the network (scenario.SentHeader); 0 when unknown. Above
	// Min, the difference is the requests' transit (dial, write, the server's scheduling).
	MinSent time.Duration
	P95     time.Duration
	Min     time.Duration
	Max     time.Duration
	// Capacity is the sum of the hosts' capacities in pages per second: a token bucket's rate, a
	// quota's limit per window, workers per service time; 0 when none.
	Capacity float64
	Goodput  float64 // pages served 200 per second at the server (see serverGoodput)
	// QueueWaits are the waits for a worker of the pages served 200 by hosts with workers (overload);
	// WaitMedian and WaitP95 summarize them.
	QueueWaits          []time.Duration
	WaitMedian, WaitP95 time.Duration
	Service             time.Duration  // the service time of the group's hosts with workers (0: none)
	Step                *StepMetrics   // hosts whose capacity steps mid-crawl; nil otherwise
	Steady              *SteadyMetrics // after the first steadyFrom; nil for a crawl too short to have one
	// SettledInterval is, on hosts refusing whatever the rate (scenario.Flaky), the largest interval the
	// adaptive pacer had in force (sampled) once its model had seen that slowing down does not help (its
	// refusals_uncorrelated event; a host without one: after its riSettleRefusals-th refusal); Settled says
	// some host had that many refusals and was sampled after.
	SettledInterval time.Duration
	Settled         bool
	Wall            time.Duration  // from the start of the crawl to the group's last response
	Lateness        []Lateness     // the first request after each Retry-After window
	Outage          *OutageMetrics // hosts with a scripted outage; nil otherwise
	Floor           time.Duration  // the interval the group should be paced at: the configured one or Crawl-delay
}

// GoodputShare is Goodput as a share of Capacity; NaN when the group has no capacity.
func (m *Metrics) GoodputShare() float64 {
	if m.Capacity <= 0 {
		return math.NaN()
	}
	return m.Goodput / m.Capacity
}

// RefusedShare is Refused as a share of Requests.
func (m *Metrics) RefusedShare() float64 {
	if m.Requests == 0 {
		return 0
	}
	return float64(m.Refused) / float64(m.Requests)
}

// MaxLateness returns the worst lateness, and how many HTTP-date windows were followed later than
// their allowance (the target is about HTTP-dates; see Lateness).
func (m *Metrics) MaxLateness() (worst Lateness, over int, ok bool) {
	for _, l := range m.Lateness {
		if !ok || l.Late > worst.Late {
			worst, ok = l, true
		}
		if l.Dated && l.Late > l.Allow {
			over++
		}
	}
	return worst, over, ok
}

// Lateness is how long after a Retry-After window ended the host's next request arrived.
type Lateness struct {
	End   time.Time     // end of the window (of the last of overlapping windows)
	Late  time.Duration // first arrival at or after End, minus End
	Dated bool          // the window was announced as an HTTP-date
	// Allow is the safety buffer on the wait the client can compute and, for an HTTP-date, the date's
	// one-second resolution. For delay-seconds it is the bare buffer: the request's transit comes on top,
	// so it is a reference, not a target.
	Allow time.Duration
}

// OutageMetrics describe a host's scripted outage: the request rate before and during it, and how long
// after it ended the gap came back to the floor.
type OutageMetrics struct {
	Before, During float64       // page requests per second
	DuringCount    int           // page requests during the outage
	FirstOK        time.Duration // from the outage's end to the first request served 200 after it
	FirstOKSeen    bool          // such a request exists
	Recovery       time.Duration // from the outage's end to the end of the first gap at the floor
	Recovered      bool          // such a gap exists
}

// StepMetrics measure a host whose capacity changes mid-crawl, before and after the step, at the server.
type StepMetrics struct {
	At                          time.Duration // the step, after the host's first page request
	CapBefore, CapAfter         float64       // the bucket's rate before and after
	Before, After               float64       // pages served 200 per second before and after
	RefusedBefore, RefusedAfter int           // refusals before and after
	// Settled is the rate of pages served 200 after the step, leaving out the steadyWindow that
	// follows it (granted to find the new rate): from then to the last 200. SettledOK says the crawl
	// went on past that window; Settled is 0 otherwise.
	Settled   float64
	SettledOK bool
}

// SteadyMetrics measure a group's crawl from steadyFrom after its first page request on, at the
// server: the steady state, once the capacity had time to be learnt.
type SteadyMetrics struct {
	// Goodput is the pages served 200 from steadyFrom on, per second from steadyFrom to the last 200.
	Goodput float64
	// Windows are the pages served 200 per second in each steadyWindow, back to back from steadyFrom,
	// of those that end by the last 200 (a window the crawl ran out of pages in is not counted).
	Windows []float64
	// Refused counts the refusals from steadyFrom on; RefusedPerMinute divides them by the minutes
	// from steadyFrom to the last page request.
	Refused          int
	RefusedPerMinute float64
}

// MinWindow returns the lowest goodput of Windows; ok is false when there is none.
func (s *SteadyMetrics) MinWindow() (rate float64, ok bool) {
	if len(s.Windows) == 0 {
		return 0, false
	}
	return slices.Min(s.Windows), true
}

// Drop is the request rate before the outage divided by the rate during it (+Inf for no request during).
func (o *OutageMetrics) Drop() float64 {
	if o.During == 0 {
		return math.Inf(1)
	}
	return o.Before / o.During
}

// measure computes the metrics of group g of a finished crawl.
func measure(sc *Scenario, g int, run *Run) *Metrics {
	m := &Metrics{}
	var lastDone time.Time
	var ok []scenario.Arrival  // pages served 200, pooled
	var all []scenario.Arrival // page requests, pooled
	var first time.Time        // the group's first page request
	var minGapSeen time.Duration
	reads := readsOf(run.Audit)
	for _, h := range run.Hosts {
		if h.Group != g {
			continue
		}
		m.Hosts++
		m.Floor = max(m.Floor, sc.floorFor(h.Config))
		pages := scenario.PageRequests(h.Arrivals)
		m.Requests += len(pages)
		all = append(all, pages...)
		m.Refused += scenario.Refused(pages)
		in, flight := insideWindows(reads.arrivals(h.Key, pages), reads.windows(h.Key, h.Windows), windowGrace)
		m.InWindow += in
		m.InFlight += flight
		m.Windows += len(h.Windows)
		m.Pages += h.Config.Pages
		m.Lost += h.Config.Pages - scenario.PagesOK(pages)
		for _, a := range pages {
			if a.Status != http.StatusOK {
				continue
			}
			if h.Config.Workers > 0 {
				m.Service = max(m.Service, h.Config.Latency)
				// A queued page is served when its worker finishes it: goodput counts completions.
				m.QueueWaits = append(m.QueueWaits, a.QueueWait)
				a.At = a.At.Add(a.QueueWait + h.Config.Latency)
			}
			ok = append(ok, a)
		}
		if len(pages) > 0 && (first.IsZero() || pages[0].At.Before(first)) {
			first = pages[0].At
		}
		m.Gaps = append(m.Gaps, scenario.Gaps(pages)...)
		if g, sent := minGapSent(pages); len(pages) > 1 && (minGapSeen == 0 || g < minGapSeen) {
			minGapSeen, m.MinSent = g, sent
		}
		m.Capacity += queueCapacity(h.Config) + quotaCapacity(h.Config) + slidingCapacity(h.Config)
		if c := h.Config.Capacity; c != nil {
			m.Capacity += c.Rate
			if c.StepAfter > 0 {
				m.Step = stepMetrics(pages, *c)
			}
		}
		m.Lateness = append(m.Lateness, lateness(pages, h.Windows, h.Config, ext.DefaultRetryAfterBuffer)...)
		if o := outageOf(h.Config); o != nil {
			m.Outage = outageMetrics(pages, *o, sc.floorFor(h.Config), sc.Jitter)
		}
		if h.Config.Flaky != nil {
			// From when the model said it had seen that slowing down does not help, or, for a host
			// whose model never did, from its riSettleRefusals-th refusal.
			d, ok := intervalAfterRefusals(pages, run.Samples[h.Key], riSettleRefusals)
			if from, seen := reads.noise[h.Key]; seen {
				d, ok = intervalFrom(run.Samples[h.Key], from)
			}
			if ok {
				m.SettledInterval, m.Settled = max(m.SettledInterval, d), true
			}
		}
		if h.LastDone.After(lastDone) {
			lastDone = h.LastDone
		}
	}
	m.Wall = run.Wall
	if !lastDone.IsZero() && lastDone.Sub(run.Start) < run.Wall {
		m.Wall = lastDone.Sub(run.Start)
	}
	var end time.Time // the group's last page request
	for _, a := range all {
		if a.At.After(end) {
			end = a.At
		}
	}
	m.Goodput = serverGoodput(ok, first, end)
	m.Steady = steadyMetrics(all, ok, first)
	if len(m.QueueWaits) > 0 {
		m.WaitMedian, m.WaitP95 = scenario.Median(m.QueueWaits), scenario.P95(m.QueueWaits)
	}
	if len(m.Gaps) > 0 {
		m.Median, m.P95 = scenario.Median(m.Gaps), scenario.P95(m.Gaps)
		m.P1 = scenario.Quantile(m.Gaps, 0.01)
		m.Min, m.Max = slices.Min(m.Gaps), slices.Max(m.Gaps)
	}
	return m
}

// minGapSent returns the shortest gap between consecutive arrivals (sorted by time) and the gap between
// the send instants of those two requests (0 when either is unknown).
func minGapSent(pages []scenario.Arrival) (gap, sent time.Duration) {
	for i := 1; i < len(pages); i++ {
		g := pages[i].At.Sub(pages[i-1].At)
		if i == 1 || g < gap {
			gap, sent = g, 0
			if !pages[i].Sent.IsZero() && !pages[i-1].Sent.IsZero() {
				sent = pages[i].Sent.Sub(pages[i-1].Sent)
			}
		}
	}
	return gap, sent
}

// queueCapacity is what a host with workers serves per second at most: workers / service time.
func queueCapacity(cfg scenario.HostConfig) float64 {
	if cfg.Workers <= 0 || cfg.Latency <= 0 {
		return 0
	}
	return float64(cfg.Workers) / cfg.Latency.Seconds()
}

// quotaCapacity is an enforced quota's rate: its limit per window, per second.
func quotaCapacity(cfg scenario.HostConfig) float64 {
	rl := cfg.RateLimit
	if rl == nil || !rl.Enforce || rl.Window <= 0 {
		return 0
	}
	return float64(rl.Limit) / rl.Window.Seconds()
}

// slidingCapacity is a sliding window's rate: the requests it lets through per period, per second.
func slidingCapacity(cfg scenario.HostConfig) float64 {
	w := cfg.Sliding
	if w == nil || w.Limit <= 0 {
		return 0
	}
	period := w.Period
	if period <= 0 {
		period = time.Second
	}
	return float64(w.Limit) / period.Seconds()
}

// serverGoodput is the rate of pages served 200 at the server: their number divided by the time from
// the first page request's arrival to the last 200's (to its completion on a host with workers, as
// measure passes it), or to the last page request's if that came later (end): a crawl that keeps being
// refused after its last 200 is still crawling, and a crawl whose few 200s all came at the start does
// not read as faster than the host. 0 when there are fewer than two.
func serverGoodput(ok []scenario.Arrival, first, end time.Time) float64 {
	if len(ok) < 2 {
		return 0
	}
	last := end
	for _, a := range ok {
		if a.At.After(last) {
			last = a.At
		}
	}
	if span := last.Sub(first); span > 0 {
		return float64(len(ok)) / span.Seconds()
	}
	return 0
}

// stepMetrics measures the rate of pages served 200 before and after a capacity step: those arriving
// from the first page request to the step, per second of that stretch, and those from the step to the
// last 200, per second of that one.
func stepMetrics(pages []scenario.Arrival, c scenario.Capacity) *StepMetrics {
	m := &StepMetrics{At: c.StepAfter, CapBefore: c.Rate, CapAfter: c.StepRate}
	if len(pages) == 0 {
		return m
	}
	step := pages[0].At.Add(c.StepAfter)
	var before, after int
	var last time.Time
	for _, a := range pages {
		refused := a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable
		switch {
		case a.At.Before(step) && a.Status == http.StatusOK:
			before++
		case a.At.Before(step) && refused:
			m.RefusedBefore++
		case a.Status == http.StatusOK:
			after++
			last = a.At
		case refused:
			m.RefusedAfter++
		}
	}
	m.Before = float64(before) / c.StepAfter.Seconds()
	if span := last.Sub(step); after > 0 && span > 0 {
		m.After = float64(after) / span.Seconds()
	}
	settled, settledOK := step.Add(steadyWindow), 0
	for _, a := range pages {
		if a.Status == http.StatusOK && !a.At.Before(settled) {
			settledOK++
		}
	}
	if span := last.Sub(settled); span > 0 {
		m.Settled, m.SettledOK = float64(settledOK)/span.Seconds(), true
	}
	return m
}

// steadyMetrics measures the steady state of a group: its page requests pooled (all, refused ones
// included), those served 200 (ok, at the instant they count for goodput) and its first page request.
// It returns nil unless the last 200 came at least steadyFrom + steadyWindow after first: a crawl
// shorter than that has no steady state to judge.
func steadyMetrics(all, ok []scenario.Arrival, first time.Time) *SteadyMetrics {
	if len(ok) == 0 || first.IsZero() {
		return nil
	}
	from := first.Add(steadyFrom)
	last := slices.MaxFunc(ok, func(a, b scenario.Arrival) int { return a.At.Compare(b.At) }).At
	if last.Sub(from) < steadyWindow {
		return nil
	}
	m := &SteadyMetrics{}
	n := len(ok) // a bound on the windows: each ends by the last 200
	for k := 0; k < n && !from.Add(time.Duration(k+1)*steadyWindow).After(last); k++ {
		m.Windows = append(m.Windows, 0)
	}
	served := 0
	for _, a := range ok {
		if a.At.Before(from) {
			continue
		}
		served++
		if k := int(a.At.Sub(from) / steadyWindow); k < len(m.Windows) {
			m.Windows[k]++
		}
	}
	for k := range m.Windows {
		m.Windows[k] /= steadyWindow.Seconds()
	}
	m.Goodput = float64(served) / last.Sub(from).Seconds()
	end := last
	for _, a := range all {
		if a.At.After(end) {
			end = a.At
		}
		if !a.At.Before(from) && refusal(a.Status) {
			m.Refused++
		}
	}
	m.RefusedPerMinute = float64(m.Refused) / end.Sub(from).Minutes()
	return m
}

// refusal reports whether a status refuses the request for its rate: 429 or 503.
func refusal(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable
}

// insideWindows counts the arrivals inside an announced Retry-After window (after Issued, before
// Until) that were sent after the refusal was answered. inFlight counts those inside one that were
// already on their way: sent before the refusal was answered, by the request's scenario.SentHeader
// and the window's Answered; where either is unknown, arriving within grace of the announcement.
func insideWindows(arrivals []scenario.Arrival, windows []scenario.Window, grace time.Duration) (inside, inFlight int) {
	for _, a := range arrivals {
		flight := false
		counted := false
		for _, w := range windows {
			if !a.At.After(w.Issued) || !a.At.Before(w.Until) {
				continue
			}
			onItsWay := a.At.Sub(w.Issued) <= grace
			if !a.Sent.IsZero() && !w.Answered.IsZero() {
				onItsWay = a.Sent.Before(w.Answered)
			}
			if !onItsWay {
				counted = true
				break
			}
			flight = true
		}
		switch {
		case counted:
			inside++
		case flight:
			inFlight++
		}
	}
	return inside, inFlight
}

// lateness measures, for each stretch of overlapping Retry-After windows, how late after its end the
// first request arrived. The allowance is the pacer's safety buffer on the wait the client can compute
// and, for an HTTP-date, the date's one-second resolution: buffer × (wait + 1 s) + 1 s.
func lateness(arrivals []scenario.Arrival, windows []scenario.Window, cfg scenario.HostConfig, buffer float64) []Lateness {
	if len(windows) == 0 {
		return nil
	}
	ws := slices.Clone(windows)
	slices.SortFunc(ws, func(a, b scenario.Window) int { return a.Issued.Compare(b.Issued) })
	var out []Lateness
	flush := func(end time.Time, wait time.Duration) {
		res := time.Duration(0)
		if cfg.RetryAfterDate {
			res = dateResolution
		}
		a, ok := scenario.FirstAfter(arrivals, end)
		if !ok {
			return // nothing left to send after the window
		}
		allow := time.Duration(buffer*float64(wait+res)) + res
		out = append(out, Lateness{End: end, Late: a.At.Sub(end), Dated: cfg.RetryAfterDate, Allow: allow})
	}
	end, wait := ws[0].Until, ws[0].Until.Sub(ws[0].Issued)
	for _, w := range ws[1:] {
		if w.Issued.Before(end) {
			if w.Until.After(end) {
				end, wait = w.Until, w.Until.Sub(w.Issued)
			}
			continue
		}
		flush(end, wait)
		end, wait = w.Until, w.Until.Sub(w.Issued)
	}
	flush(end, wait)
	return out
}

// outageOf returns the host's scripted outage: a refusal window of 503s without Retry-After.
func outageOf(cfg scenario.HostConfig) *scenario.Refusal {
	for _, r := range cfg.Refusals {
		if r.For > 0 && r.Repeat == 0 && r.Status == http.StatusServiceUnavailable {
			return &r
		}
	}
	return nil
}

// recoveryWindow is how many consecutive gaps must be back at the pre-outage pace.
const recoveryWindow = 5

// outageMetrics measures the request rate before and during an outage that starts o.After after the
// host's first page request, and how long after its end the host was crawled at its pre-outage pace
// again: the middle of the first run of recoveryWindow consecutive gaps whose median is no longer than
// the 75th percentile of the gaps before the outage (floor × (1 + 0.75 × jitter) if there were too few). A median
// over several gaps tells an interval at the floor (200 ms + 0–20 ms jitter) from one 10% above it
// (220 ms + jitter), which a single gap cannot; for static Colly, whose gap is latency + Delay
// throughout, it is the first gaps after the outage.
func outageMetrics(arrivals []scenario.Arrival, o scenario.Refusal, floor time.Duration, jitter float64) *OutageMetrics {
	if len(arrivals) == 0 {
		return &OutageMetrics{}
	}
	first := arrivals[0].At
	start, end := first.Add(o.After), first.Add(o.After+o.For)
	var before, during int
	for _, a := range arrivals {
		switch {
		case a.At.Before(start):
			before++
		case a.At.Before(end):
			during++
		}
	}
	m := &OutageMetrics{}
	if o.After > 0 {
		m.Before = float64(before) / o.After.Seconds()
	}
	m.During = float64(during) / o.For.Seconds()
	m.DuringCount = during
	for _, a := range arrivals {
		if !a.At.Before(end) && a.Status == http.StatusOK {
			m.FirstOK, m.FirstOKSeen = a.At.Sub(end), true
			break
		}
	}
	pace := floor + time.Duration(float64(floor)*jitter*0.75)
	if pre := scenario.Gaps(arrivals[:before]); len(pre) >= recoveryWindow {
		pace = scenario.Quantile(pre, 0.75)
	}
	for i := 0; i+recoveryWindow < len(arrivals); i++ {
		if arrivals[i].At.Before(end) {
			continue
		}
		if scenario.Median(scenario.Gaps(arrivals[i:i+recoveryWindow+1])) <= pace {
			m.Recovery, m.Recovered = arrivals[i+recoveryWindow/2].At.Sub(end), true
			break
		}
	}
	return m
}

// intervalAfterRefusals returns the largest interval in the samples taken after the n-th refusal
// among pages (a page request not served 200: refused, or never answered); ok is false when there were
// fewer refusals or no sample after.
func intervalAfterRefusals(pages []scenario.Arrival, samples []Sample, n int) (largest time.Duration, ok bool) {
	var from time.Time
	seen := 0
	for _, a := range pages {
		if a.Status != http.StatusOK {
			if seen++; seen == n {
				from = a.At
				break
			}
		}
	}
	if seen < n {
		return 0, false
	}
	return intervalFrom(samples, from)
}

// intervalFrom returns the largest interval in the samples taken from instant from on; ok is false
// when there is none.
func intervalFrom(samples []Sample, from time.Time) (largest time.Duration, ok bool) {
	for _, s := range samples {
		if !s.At.Before(from) {
			largest, ok = max(largest, s.Status.Interval), true
		}
	}
	return largest, ok
}
