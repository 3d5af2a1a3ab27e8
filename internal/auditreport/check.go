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
	Process  string // the trail (file) it was read from
	Source   string // file:line

	Wait         time.Duration
	Interval     time.Duration // the interval in force, jitter excluded
	Floor        time.Duration // base_delay_ms
	CrawlDelay   time.Duration // in force; from crawl_delay_applied events when the departure lacks it
	RateInterval time.Duration // in force (0: none or unknown)

	Gap time.Duration // since the host's previous departure; 0 for the first
	// Required is the largest constraint binding the gap before this departure: in force at either
	// departure of the pair, or learned by any process of the fleet before this one left.
	Required time.Duration
	Binding  string // the constraint Required comes from
	From     string // where it was in force: "" (this departure), the previous departure, or the process that learned it
}

// Window is a period with no departure allowed, for any process of the fleet: a Retry-After, a park
// (a Retry-After above the maximum), an exhausted rate-limit quota or a robots.txt that could not be
// read.
type Window struct {
	Kind       string // the event: retry_after_honoured, retry_after_too_long, rate_limit_applied or robots_unavailable
	Start, End time.Time
	Status     int
	Detail     string
	Inside     []Departure // departures at or after Start and before End: violations
	Source     string
	Derived    bool // the event had no window fields: [timestamp, timestamp+computed_delay_ms)
}

// BreakerPeriod is a time one process's breaker for the host was open: that process deferred the
// host's requests, and none of its departures may fall inside. The breaker is the process's own (a
// shared store does not admit by it), so it binds that process only.
type BreakerPeriod struct {
	Process string
	Opened  time.Time
	Ended   time.Time   // the half-open probe or the closing; zero when the trail ends with the breaker open
	EndedBy audit.Event // breaker_half_open or breaker_closed; "" when open at the end
	Detail  string
	Inside  []Departure
}

// ConstraintStat compares the gaps with one constraint, over the gaps it was in force for.
type ConstraintStat struct {
	Name              string
	Least, Most       time.Duration // the constraint's values over those gaps
	Gaps              int
	MinGap, MedianGap time.Duration
	Short             int // gaps under the constraint beyond the tolerance
}

// Violation is a departure (or an event) the trail shows was impolite.
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
	Name         string // what the caller calls the host (NameHosts), shown beside its key; "" for none
	Pipelines    []string
	Departures   []Departure
	Constraints  []ConstraintStat
	Windows      []Window
	NonCompliant []Event // compliance_flag=false events other than departures
	// NonCompliantDepartures counts departures flagged compliance_flag=false (a constraint clamped).
	NonCompliantDepartures int
	Breaker                []BreakerPeriod
	Bypassed               []Event  // pacing_bypassed: requests left without the pacer's transport
	Deferred               []string // URLs (or the event's detail when it has none)
	// WithoutURL counts departures without schema 2 fields (url, interval_ms): older trails.
	WithoutURL int
}

// Title is the host's key, followed by its name in parentheses when it has one.
func (h *Host) Title() string {
	if h.Name == "" || h.Name == h.Key {
		return h.Key
	}
	return h.Key + " (" + h.Name + ")"
}

// NameHosts gives hosts names to show beside their keys (a demo's 127.0.0.1 ports, say): names maps a
// host key to its name.
func (r *Report) NameHosts(names map[string]string) {
	for _, h := range r.Hosts {
		h.Name = names[h.Key]
	}
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
	// Unhosted are the events of no host (an empty target_domain): the pacer's own, such as
	// option_invalid, callbacks_before_pacer or a store's recovery. They are listed apart, not as a host.
	Unhosted []Event
}

// OK reports whether the trail shows no violation. A trail without departures shows none and proves
// nothing: see Proves.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Proves reports whether the trail records at least one departure: without one, "no violation" says
// nothing about the crawl (an empty file, a file of other lines, the wrong file).
func (r *Report) Proves() bool { return r.Departures() > 0 }

// Departures counts the departures of every host.
func (r *Report) Departures() int {
	n := 0
	for _, h := range r.Hosts {
		n += len(h.Departures)
	}
	return n
}

// Check reads the merged trail as one schedule per host and checks it. Each file of the trail is one
// process of a fleet.
func Check(t *Trail, tol Tolerance) *Report {
	r := &Report{Files: t.Files, Events: len(t.Events), Warnings: t.Warnings, Tolerance: tol}
	ends := map[string]time.Time{} // each process's last event: what it learned binds until then
	for _, e := range t.Events {
		ends[e.File] = e.At
	}
	hosts := map[string]*hostCheck{}
	for _, e := range t.Events {
		if e.Host == "" {
			r.Unhosted = append(r.Unhosted, e)
			continue
		}
		hc := hosts[e.Host]
		if hc == nil {
			hc = newHostCheck(e.Host, ends, tol)
			hosts[e.Host] = hc
		}
		hc.add(e)
	}
	for _, hc := range hosts {
		r.Violations = append(r.Violations, hc.finish()...)
		r.Hosts = append(r.Hosts, hc.h)
	}
	sort.Slice(r.Hosts, func(i, j int) bool { return r.Hosts[i].Key < r.Hosts[j].Key })
	slices.SortStableFunc(r.Violations, func(a, b Violation) int { return a.At.Compare(b.At) })
	return r
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
