package auditreport

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// hostCheck walks one host's events in time order and checks its schedule.
type hostCheck struct {
	h   *Host
	tol Tolerance
	// What each process (trail) has in force for the host's published constraints, and since when: a
	// constraint one process learned binds every process from that instant until the process that
	// learned it records another value (a later departure's fields, a later event) or its trail ends.
	// A process's own later record replaces its earlier one: a rate-limit interval that shrinks as the
	// quota refills binds its next departure at its new value.
	crawl, rate map[string]learned
	ends        map[string]time.Time
	open        map[string]int // process → index in h.Breaker of its open period
	out         []Violation
	stats       map[string]*ConstraintStat
	gaps        map[string][]time.Duration
}

// learned is a constraint's value as one process had it, from the instant it recorded it.
type learned struct {
	value   time.Duration
	at      time.Time
	process string
	until   time.Time // when the constraint ends (zero: when its process says another value)
}

func newHostCheck(key string, ends map[string]time.Time, tol Tolerance) *hostCheck {
	return &hostCheck{h: &Host{Key: key}, tol: tol, crawl: map[string]learned{}, rate: map[string]learned{}, ends: ends,
		open: map[string]int{}, stats: map[string]*ConstraintStat{}, gaps: map[string][]time.Duration{}}
}

// add takes the host's next event.
func (c *hostCheck) add(e Event) {
	h := c.h
	if e.Pipeline != "" && !slices.Contains(h.Pipelines, e.Pipeline) {
		h.Pipelines = append(h.Pipelines, e.Pipeline)
	}
	if !e.Compliant {
		if e.Name == audit.EventDelayApplied {
			h.NonCompliantDepartures++
		} else {
			h.NonCompliant = append(h.NonCompliant, e)
		}
	}
	switch e.Name {
	case audit.EventDelayApplied:
		c.depart(e)
	case audit.EventCrawlDelayApplied:
		c.crawl[e.File] = learned{value: e.Computed, at: e.At, process: e.File}
	case audit.EventRetryAfterHonoured, audit.EventRetryAfterTooLong, audit.EventRateLimitApplied, audit.EventRobotsUnavailable:
		if w, ok := window(e); ok {
			h.Windows = append(h.Windows, w)
		} else if e.Name == audit.EventRateLimitApplied && e.Computed > 0 {
			c.rate[e.File] = learned{value: e.Computed, at: e.At, process: e.File, until: e.Until} // an interval, not a hold, until the quota's reset
		}
	case audit.EventBreakerOpened:
		if _, ok := c.open[e.File]; !ok {
			c.open[e.File] = len(h.Breaker)
			h.Breaker = append(h.Breaker, BreakerPeriod{Process: e.File, Opened: e.At, Detail: e.Detail})
		}
	case audit.EventBreakerHalfOpen, audit.EventBreakerClosed:
		if i, ok := c.open[e.File]; ok {
			h.Breaker[i].Ended, h.Breaker[i].EndedBy = e.At, e.Name
			delete(c.open, e.File)
		}
	case audit.EventPacingBypassed:
		h.Bypassed = append(h.Bypassed, e)
		c.out = append(c.out, Violation{Host: h.Key, At: e.At, URL: e.URL, Pipeline: e.Pipeline, Source: e.Source,
			What: "pacing_bypassed: requests reached the network without the pacer's transport, so the pacer could not pace them: " + e.Detail})
	case audit.EventRequestDeferred:
		d := e.URL
		if d == "" {
			d = e.Detail
		}
		h.Deferred = append(h.Deferred, d)
	}
}

// depart reads a delay_applied event, checks the gap before it against every constraint binding it,
// and checks it against the open breaker of its own process.
func (c *hostCheck) depart(e Event) {
	h := c.h
	d := Departure{At: e.At, URL: e.URL, Pipeline: e.Pipeline, Process: e.File, Source: e.Source, Wait: e.Wait,
		Interval: e.Computed, Floor: e.Base, CrawlDelay: c.crawl[e.File].value}
	if e.HasDeparture {
		d.Interval, d.CrawlDelay, d.RateInterval = e.Interval, e.CrawlDelay, e.RateInterval
	}
	if !e.HasDeparture || e.URL == "" {
		h.WithoutURL++
	}
	d.Required, d.Binding = d.Floor, ConstraintFloor
	raise := func(v time.Duration, name, from string) {
		if v > d.Required {
			d.Required, d.Binding, d.From = v, name, from
		}
	}
	raise(d.CrawlDelay, ConstraintCrawlDelay, "")
	raise(d.RateInterval, ConstraintRateLimit, "")
	if n := len(h.Departures); n > 0 {
		prev := h.Departures[n-1]
		d.Gap = d.At.Sub(prev.At)
		// The floor in force at either departure binds the gap. A published constraint binds as the
		// latest word of each process: d's own (what d's process knew when d left, learned after any
		// earlier departure of its own), and what every other process knew then (the previous departure's,
		// or what its process learned since).
		floor, crawl, rate := max(d.Floor, prev.Floor), d.CrawlDelay, d.RateInterval
		raise(prev.Floor, ConstraintFloor, "in force at the previous departure")
		if l, ok := c.fleet(c.crawl, prev, d); ok {
			crawl = max(crawl, l.value)
			raise(l.value, ConstraintCrawlDelay, l.from(prev))
		}
		if l, ok := c.fleet(c.rate, prev, d); ok {
			rate = max(rate, l.value)
			raise(l.value, ConstraintRateLimit, l.from(prev))
		}
		c.note(ConstraintFloor, floor, d.Gap)
		if crawl > 0 {
			c.note(ConstraintCrawlDelay, crawl, d.Gap)
		}
		if rate > 0 {
			c.note(ConstraintRateLimit, rate, d.Gap)
		}
		if d.Gap+c.tol.of(d.Required) < d.Required {
			what := fmt.Sprintf("%s after the previous departure, under the %s of %s", FormatDuration(d.Gap), d.Binding, FormatDuration(d.Required))
			if d.From != "" {
				what += " " + d.From
			}
			c.out = append(c.out, h.violation(d, what))
		}
	}
	if e.HasDeparture {
		until := time.Time{}
		if l := c.rate[e.File]; l.value == d.RateInterval {
			until = l.until // the interval learned last, still in force: it ends at its reset
		}
		c.rate[e.File] = learned{value: d.RateInterval, at: d.At, process: e.File, until: until}
		c.crawl[e.File] = learned{value: d.CrawlDelay, at: d.At, process: e.File}
	}
	if i, ok := c.open[e.File]; ok {
		b := &h.Breaker[i]
		b.Inside = append(b.Inside, d)
		c.out = append(c.out, h.violation(d, fmt.Sprintf("while its process's breaker was open (since %s: %s)", FormatTime(b.Opened), b.Detail)))
	}
	h.Departures = append(h.Departures, d)
}

// fleet is the largest value of a constraint that another process than d's has in force when d
// leaves: the previous departure's process, and every process whose trail still runs.
func (c *hostCheck) fleet(m map[string]learned, prev, d Departure) (learned, bool) {
	var best learned
	for p, l := range m {
		if p == d.Process || l.value <= best.value || (p != prev.Process && c.ends[p].Before(d.At)) ||
			!l.until.IsZero() && !d.At.Before(l.until) { // the interval ended with its quota's reset
			continue
		}
		best = l
	}
	return best, best.value > 0
}

// from says where a constraint binding the gap before a departure came from.
func (l learned) from(prev Departure) string {
	if l.process == prev.Process && l.at.Equal(prev.At) {
		return "in force at the previous departure"
	}
	return "learned by " + l.process + " at " + FormatTime(l.at)
}

func (c *hostCheck) note(name string, value, gap time.Duration) {
	s := c.stats[name]
	if s == nil {
		s = &ConstraintStat{Name: name, Least: value, Most: value}
		c.stats[name] = s
	}
	s.Least, s.Most = min(s.Least, value), max(s.Most, value)
	s.Gaps++
	c.gaps[name] = append(c.gaps[name], gap)
	if gap+c.tol.of(value) < value {
		s.Short++
	}
}

// finish gathers the constraint statistics, finds the departures inside windows and returns the
// host's violations.
func (c *hostCheck) finish() []Violation {
	h := c.h
	for _, name := range []string{ConstraintFloor, ConstraintCrawlDelay, ConstraintRateLimit} {
		if s := c.stats[name]; s != nil {
			s.MinGap, s.MedianGap = scenario.Quantile(c.gaps[name], 0), scenario.Median(c.gaps[name])
			h.Constraints = append(h.Constraints, *s)
		}
	}
	for i := range h.Windows {
		w := &h.Windows[i]
		j := sort.Search(len(h.Departures), func(k int) bool { return !h.Departures[k].At.Before(w.Start) })
		for ; j < len(h.Departures) && h.Departures[j].At.Before(w.End); j++ {
			d := h.Departures[j]
			w.Inside = append(w.Inside, d)
			c.out = append(c.out, h.violation(d, fmt.Sprintf("inside the %s window %s – %s", w.Kind, FormatTime(w.Start), FormatTime(w.End))))
		}
	}
	return c.out
}

// window reads a hold, from when the process that read it applied it or, in a fleet, from when it was in
// the shared store (shared). A retry_after_honoured without window fields (schema 1) lasts computed_delay_ms
// from its timestamp; a rate_limit_applied or robots_unavailable without them is not a hold (an
// interval, or robots.txt rules still cached) and is not a window. A retry_after_too_long lasts until
// the time the server announced, even when the pacer held only to its maximum (IgnoreCaps): its
// window_end, and at least computed_delay_ms (the hold applied; in trails before issue 33, the
// Retry-After the server sent, with a window_end at the maximum under IgnoreCaps).
func window(e Event) (Window, bool) {
	w := Window{Kind: string(e.Name), Start: e.WindowStart, End: e.WindowEnd, Status: e.Status, Detail: e.Detail, Source: e.Source}
	if e.Shared.After(w.Start) && e.Shared.Before(w.End) {
		// A fleet's hold: its other processes read it from the shared store, where it was from then
		// on; the refusing process itself admitted nothing after window_start.
		w.Start = e.Shared
	}
	switch {
	case e.Name == audit.EventRetryAfterTooLong:
		if w.Start.IsZero() {
			w.Start, w.Derived = e.At, true
		}
		w.End = later(w.End, w.Start.Add(e.Computed))
	case w.End.IsZero() && e.Name == audit.EventRetryAfterHonoured && e.Computed > 0:
		w.Start, w.End, w.Derived = e.At, e.At.Add(e.Computed), true
	}
	return w, !w.End.IsZero() && w.End.After(w.Start)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
