package auditreport

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// Tolerance is how far a gap may fall short of a constraint and still count as honoured: the audit's
// timestamps are taken in the crawling process, a little apart from the instant the server reads the
// request, and processes of a fleet read different clocks. The allowance is the larger of Abs and Frac
// of the constraint. Windows get no allowance: a departure at or after a window's start and before its
// end is a violation.
type Tolerance struct {
	Abs  time.Duration
	Frac float64
}

// DefaultTolerance allows 1 ms or 0.5 % of the constraint, whichever is larger.
var DefaultTolerance = Tolerance{Abs: time.Millisecond, Frac: 0.005}

func (t Tolerance) of(d time.Duration) time.Duration {
	return max(t.Abs, time.Duration(float64(d)*t.Frac))
}

// Constraint names, in the order the report lists them.
const (
	ConstraintFloor      = "floor (base delay)"
	ConstraintCrawlDelay = "Crawl-delay"
	ConstraintRateLimit  = "rate-limit interval"
)

// Departure is one request leaving for its host, as the audit recorded it.
type Departure struct {
	At       time.Time
	URL      string // "" when the trail predates schema 2
	Pipeline string
	Source   string // file:line

	Wait         time.Duration
	Interval     time.Duration // the interval in force, jitter excluded
	Floor        time.Duration // base_delay_ms
	CrawlDelay   time.Duration // in force; from crawl_delay_applied events when the departure lacks it
	RateInterval time.Duration // in force (0: none or unknown)

	Gap      time.Duration // since the host's previous departure; 0 for the first
	Required time.Duration // the largest of Floor, CrawlDelay and RateInterval
	Binding  string        // the constraint Required comes from
}

// Window is a period with no departure allowed: a Retry-After or an exhausted rate-limit quota.
type Window struct {
	Kind       string // the event: retry_after_honoured or rate_limit_applied
	Start, End time.Time
	Status     int
	Detail     string
	Inside     []Departure // departures at or after Start and before End: violations
	Source     string
	Derived    bool // the event had no window fields: [timestamp, timestamp+computed_delay_ms)
}

// BreakerPeriod is a time the host's breaker was open (its requests deferred).
type BreakerPeriod struct {
	Opened, Closed time.Time // Closed is zero when the trail ends with the breaker open
	Detail         string
}

// ConstraintStat compares the gaps with one constraint, over the gaps it was in force for.
type ConstraintStat struct {
	Name              string
	Least, Most       time.Duration // the constraint's values over those gaps
	Gaps              int
	MinGap, MedianGap time.Duration
	Short             int // gaps under the constraint beyond the tolerance
}

// Violation is a departure the trail shows was impolite.
type Violation struct {
	Host     string
	At       time.Time
	URL      string
	Pipeline string
	Source   string
	What     string
}

// String returns the violation on one line: host, time, URL, what was broken and where it was read.
func (v Violation) String() string {
	u := v.URL
	if u == "" {
		u = "(URL not recorded)"
	}
	return fmt.Sprintf("%s at %s: %s: %s (%s)", v.Host, FormatTime(v.At), u, v.What, v.Source)
}

// Host is everything the report says about one host key.
type Host struct {
	Key          string
	Pipelines    []string
	Departures   []Departure
	Constraints  []ConstraintStat
	Windows      []Window
	NonCompliant []Event // compliance_flag=false events other than departures
	// NonCompliantDepartures counts departures flagged compliance_flag=false (a constraint clamped).
	NonCompliantDepartures int
	Breaker                []BreakerPeriod
	Deferred               []string // URLs (or the event's detail when it has none)
	// WithoutURL counts departures without schema 2 fields (url, interval_ms): older trails.
	WithoutURL int
}

// MinGap and MedianGap are over every gap of the host; 0 with fewer than two departures.
func (h *Host) MinGap() time.Duration    { return quantileGap(h.Departures, 0) }
func (h *Host) MedianGap() time.Duration { return quantileGap(h.Departures, 0.5) }

func quantileGap(ds []Departure, q float64) time.Duration {
	if len(ds) < 2 {
		return 0
	}
	gaps := make([]time.Duration, 0, len(ds)-1)
	for _, d := range ds[1:] {
		gaps = append(gaps, d.Gap)
	}
	return scenario.Quantile(gaps, q)
}

// Report is the result of checking a trail.
type Report struct {
	Files      []string
	Events     int
	Hosts      []*Host // by key
	Violations []Violation
	Warnings   []Warning
	Tolerance  Tolerance
}

// OK reports whether the trail shows no violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Departures counts the departures of every host.
func (r *Report) Departures() int {
	n := 0
	for _, h := range r.Hosts {
		n += len(h.Departures)
	}
	return n
}

// Check reads the merged trail as one schedule per host and checks it.
func Check(t *Trail, tol Tolerance) *Report {
	r := &Report{Files: t.Files, Events: len(t.Events), Warnings: t.Warnings, Tolerance: tol}
	hosts := map[string]*Host{}
	crawlDelay := map[string]time.Duration{} // from crawl_delay_applied, for departures without the field
	for _, e := range t.Events {
		h := hosts[e.Host]
		if h == nil {
			h = &Host{Key: e.Host}
			hosts[e.Host] = h
		}
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
			h.Departures = append(h.Departures, departure(e, crawlDelay[e.Host]))
			if !e.HasDeparture || e.URL == "" {
				h.WithoutURL++
			}
		case audit.EventCrawlDelayApplied:
			crawlDelay[e.Host] = e.Computed
		case audit.EventRetryAfterHonoured, audit.EventRateLimitApplied:
			if w, ok := window(e); ok {
				h.Windows = append(h.Windows, w)
			}
		case audit.EventBreakerOpened:
			if n := len(h.Breaker); n == 0 || !h.Breaker[n-1].Closed.IsZero() {
				h.Breaker = append(h.Breaker, BreakerPeriod{Opened: e.At, Detail: e.Detail})
			}
		case audit.EventBreakerClosed:
			if n := len(h.Breaker); n > 0 && h.Breaker[n-1].Closed.IsZero() {
				h.Breaker[n-1].Closed = e.At
			}
		case audit.EventRequestDeferred:
			d := e.URL
			if d == "" {
				d = e.Detail
			}
			h.Deferred = append(h.Deferred, d)
		}
	}
	for _, h := range hosts {
		r.Violations = append(r.Violations, h.check(tol)...)
		r.Hosts = append(r.Hosts, h)
	}
	sort.Slice(r.Hosts, func(i, j int) bool { return r.Hosts[i].Key < r.Hosts[j].Key })
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return a.At.Compare(b.At) })
	return r
}

// departure reads a delay_applied event; crawlDelay is the Crawl-delay last applied to its host, used
// when the event predates the departure fields.
func departure(e Event, crawlDelay time.Duration) Departure {
	d := Departure{At: e.At, URL: e.URL, Pipeline: e.Pipeline, Source: e.Source, Wait: e.Wait,
		Interval: e.Computed, Floor: e.Base, CrawlDelay: crawlDelay}
	if e.HasDeparture {
		d.Interval, d.CrawlDelay, d.RateInterval = e.Interval, e.CrawlDelay, e.RateInterval
	}
	d.Required, d.Binding = d.Floor, ConstraintFloor
	if d.CrawlDelay > d.Required {
		d.Required, d.Binding = d.CrawlDelay, ConstraintCrawlDelay
	}
	if d.RateInterval > d.Required {
		d.Required, d.Binding = d.RateInterval, ConstraintRateLimit
	}
	return d
}

// window reads a hold. A retry_after_honoured without window fields (schema 1) lasts computed_delay_ms
// from its timestamp; a rate_limit_applied without them is an interval, not a hold, or cannot be told
// apart from one, and is not a window.
func window(e Event) (Window, bool) {
	w := Window{Kind: string(e.Name), Start: e.WindowStart, End: e.WindowEnd, Status: e.Status, Detail: e.Detail, Source: e.Source}
	if w.End.IsZero() {
		if e.Name != audit.EventRetryAfterHonoured || e.Computed <= 0 {
			return Window{}, false
		}
		w.Start, w.End, w.Derived = e.At, e.At.Add(e.Computed), true
	}
	return w, w.End.After(w.Start)
}

// check measures the gaps and finds the departures inside windows.
func (h *Host) check(tol Tolerance) []Violation {
	var out []Violation
	stats := map[string]*ConstraintStat{}
	gaps := map[string][]time.Duration{}
	note := func(name string, value, gap time.Duration) {
		s := stats[name]
		if s == nil {
			s = &ConstraintStat{Name: name, Least: value, Most: value}
			stats[name] = s
		}
		s.Least, s.Most = min(s.Least, value), max(s.Most, value)
		s.Gaps++
		gaps[name] = append(gaps[name], gap)
		if gap+tol.of(value) < value {
			s.Short++
		}
	}
	for i := 1; i < len(h.Departures); i++ {
		d := &h.Departures[i]
		d.Gap = d.At.Sub(h.Departures[i-1].At)
		note(ConstraintFloor, d.Floor, d.Gap)
		if d.CrawlDelay > 0 {
			note(ConstraintCrawlDelay, d.CrawlDelay, d.Gap)
		}
		if d.RateInterval > 0 {
			note(ConstraintRateLimit, d.RateInterval, d.Gap)
		}
		if d.Gap+tol.of(d.Required) < d.Required {
			out = append(out, h.violation(*d, fmt.Sprintf("%s after the previous departure, under the %s of %s",
				FormatDuration(d.Gap), d.Binding, FormatDuration(d.Required))))
		}
	}
	for _, name := range []string{ConstraintFloor, ConstraintCrawlDelay, ConstraintRateLimit} {
		if s := stats[name]; s != nil {
			s.MinGap, s.MedianGap = scenario.Quantile(gaps[name], 0), scenario.Median(gaps[name])
			h.Constraints = append(h.Constraints, *s)
		}
	}
	for i := range h.Windows {
		w := &h.Windows[i]
		j := sort.Search(len(h.Departures), func(k int) bool { return !h.Departures[k].At.Before(w.Start) })
		for ; j < len(h.Departures) && h.Departures[j].At.Before(w.End); j++ {
			d := h.Departures[j]
			w.Inside = append(w.Inside, d)
			out = append(out, h.violation(d, fmt.Sprintf("inside the %s window %s – %s", w.Kind, FormatTime(w.Start), FormatTime(w.End))))
		}
	}
	return out
}

func (h *Host) violation(d Departure, what string) Violation {
	return Violation{Host: h.Key, At: d.At, URL: d.URL, Pipeline: d.Pipeline, Source: d.Source, What: what}
}

// FormatTime formats an instant for the report: UTC, milliseconds.
// FormatTime is how the report writes an instant.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// FormatDuration formats a duration to 0.1 ms below 10 s, to 1 ms above.
// FormatDuration is how the report writes a duration.
func FormatDuration(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
