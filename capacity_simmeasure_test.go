package ext

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// The figures of one virtual-time crawl, measured at the server (each modelled host's own log of
// arrivals), plus what the pacer's snapshots showed. A cell's figures are over its hosts: pages and
// refusals summed, goodputs averaged, worst cases (the lowest window, the largest interval) taken.

// simWarmup is the start of a crawl left out of its steady state: the model's learning.
const simWarmup = 30 * time.Second

// simWindow is the length of the windows whose minimum the steady state reports.
const simWindow = 30 * time.Second

// simSample is one snapshot of a host's pacing state, taken every second of virtual time.
type simSample struct {
	at   time.Time
	snap HostSnapshot
}

// simFigures are one host's (or, merged, one cell's) figures. Ratios are of the host's capacity; NaN
// when the crawl was too short to have one.
type simFigures struct {
	pages, accepted, lost, deferred int
	requests                        int           // page requests that reached the server
	span                            time.Duration // from the first page request to the last
	refusals                        int           // page requests refused (429, 503, dropped)
	makespan                        time.Duration // from the crawl's start to the last page arrival
	cut                             bool          // the crawl reached its cell's limit
	whole, steady, minWindow        float64       // goodput over the crawl, from simWarmup on, lowest simWindow
	refusalsPerMin                  float64       // after simWarmup
	before, after                   float64       // a capacity step's sides (NaN without a step)
	maxInterval                     time.Duration // largest interval in force once settled (see simCell.settled)
	endInterval                     time.Duration // the interval of the last snapshot
	maxInFlight                     int           // most requests in flight in a snapshot
	queueMedian, queueP95           float64       // queue wait of accepted pages, in service times (NaN without workers)
	insideWindow                    int           // arrivals sent after a refusal was read, inside its Retry-After window
	underFloor                      int           // departures closer than the base delay to the one before
	lateRefusals                    []time.Duration
	explained                       []simRefusal // a limiter's refusals from simLearnt on, with their causes
	noise                           simNoise
}

// simNoise is when the models read the refusals as noise (refusals_uncorrelated): how many times over
// the cell's hosts, and after how many refusals at the server the first time (the most of any host).
type simNoise struct{ entries, after int }

func (n simNoise) String() string {
	if n.entries == 0 {
		return "-"
	}
	return fmt.Sprintf("%d×, after ≤ %d refusals", n.entries, n.after)
}

// noiseFigures reads from a host's trail when its model read the refusals as noise.
func noiseFigures(arrivals []scenario.Arrival, trail []simEvent) simNoise {
	var n simNoise
	for _, e := range trail {
		if e.event != audit.EventRefusalsUncorrelated {
			continue
		}
		if n.entries++; n.entries == 1 {
			for _, a := range scenario.PageRequests(arrivals) {
				if a.Status != 200 && a.At.Before(e.at) {
					n.after++
				}
			}
		}
	}
	return n
}

// simEvent is an audit event of one host: its name and instant.
type simEvent struct {
	event audit.Event
	at    time.Time
}

// hostEvents returns the events of host key from a trail, in order.
func hostEvents(trail []map[string]any, key string) []simEvent {
	var out []simEvent
	for _, e := range trail {
		if e[audit.FieldTargetDomain] != key {
			continue
		}
		ts, _ := e[audit.FieldTimestamp].(string)
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		name, _ := e[audit.FieldEvent].(string)
		out = append(out, simEvent{audit.Event(name), at})
	}
	slices.SortStableFunc(out, func(a, b simEvent) int { return a.at.Compare(b.at) })
	return out
}

// firstEvent returns the instant of the first event named name.
func firstEvent(trail []simEvent, name audit.Event) (time.Time, bool) {
	for _, e := range trail {
		if e.event == name {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// measureHost computes the figures of one host crawled from start.
func measureHost(cfg scenario.HostConfig, capacity float64, base time.Duration, start time.Time,
	arrivals []scenario.Arrival, windows []scenario.Window, samples []simSample, settled time.Time) simFigures {
	f := simFigures{pages: cfg.Pages, before: math.NaN(), after: math.NaN(), queueMedian: math.NaN(), queueP95: math.NaN()}
	pages := scenario.PageRequests(arrivals)
	var first time.Time // the first page request: the host's own origin (a step counts from it)
	if len(pages) > 0 {
		first = pages[0].At
		f.makespan = pages[len(pages)-1].At.Sub(start)
	}
	seen := map[string]bool{}
	var accepted []time.Time
	var waits []time.Duration
	for _, a := range pages {
		if a.Status == http.StatusOK && !seen[a.Path] {
			seen[a.Path] = true
			accepted = append(accepted, a.At)
			waits = append(waits, a.QueueWait)
		}
		if a.Status != http.StatusOK {
			f.refusals++
			if !first.IsZero() && a.At.Sub(first) >= simWarmup {
				f.lateRefusals = append(f.lateRefusals, a.At.Sub(first))
			}
		}
	}
	f.accepted, f.requests = len(accepted), len(pages)
	if len(pages) > 0 {
		f.span = pages[len(pages)-1].At.Sub(first)
	}
	f.lost = f.pages - f.accepted
	if f.accepted == 0 || capacity <= 0 {
		f.whole, f.steady, f.minWindow, f.refusalsPerMin = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		return f
	}
	slot := time.Duration(float64(time.Second) / capacity)
	end := accepted[len(accepted)-1].Add(slot) // the last accepted page used its slot
	rate := func(from, to time.Time, capacity float64) float64 {
		if !to.After(from) {
			return math.NaN()
		}
		n := 0
		for _, at := range accepted {
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
		return float64(n) / to.Sub(from).Seconds() / capacity
	}
	f.whole = rate(first, end, capacity)
	warm := first.Add(simWarmup)
	f.steady = rate(warm, end, capacity)
	f.minWindow = math.NaN()
	if c := cfg.Capacity; c != nil && c.StepAfter > 0 {
		step := first.Add(c.StepAfter)
		f.before = rate(warm, step, c.Rate)
		f.after = rate(step.Add(simWarmup), end, c.StepRate)
		f.steady = math.NaN() // of which capacity? the sides say it
	} else {
		for w := warm; !w.Add(simWindow).After(end); w = w.Add(simWindow) {
			if g := rate(w, w.Add(simWindow), capacity); math.IsNaN(f.minWindow) || g < f.minWindow {
				f.minWindow = g
			}
		}
	}
	if last := pages[len(pages)-1].At; last.Sub(warm) >= 10*time.Second {
		f.refusalsPerMin = float64(len(f.lateRefusals)) / last.Sub(warm).Minutes()
	} else {
		f.refusalsPerMin = math.NaN()
	}
	if cfg.Workers > 0 && cfg.Latency > 0 {
		f.queueMedian = float64(scenario.Median(waits)) / float64(cfg.Latency)
		f.queueP95 = float64(scenario.P95(waits)) / float64(cfg.Latency)
	}
	for _, s := range samples {
		if !s.at.Before(settled) {
			f.maxInterval = max(f.maxInterval, s.snap.Interval)
		}
		f.maxInFlight = max(f.maxInFlight, s.snap.InFlight)
		f.endInterval = s.snap.Interval
	}
	for _, a := range pages {
		for _, w := range windows {
			if !w.Answered.IsZero() && a.Sent.After(w.Answered) && a.At.After(w.Issued) && a.At.Before(w.Until) {
				f.insideWindow++
				break
			}
		}
	}
	sent := make([]time.Time, 0, len(arrivals))
	for _, a := range arrivals {
		sent = append(sent, a.Sent)
	}
	slices.SortFunc(sent, time.Time.Compare)
	for i := 1; i < len(sent); i++ {
		if sent[i].Sub(sent[i-1]) < base {
			f.underFloor++
		}
	}
	return f
}

// refusedShare is the share of page requests refused.
func (f simFigures) refusedShare() float64 {
	if f.requests == 0 {
		return 0
	}
	return float64(f.refusals) / float64(f.requests)
}

// lateRate is the refusals a minute after the first minute of the crawl (0 when it lasted under two).
func (f simFigures) lateRate() float64 {
	n := 0
	for _, at := range f.lateRefusals {
		if at >= time.Minute {
			n++
		}
	}
	if f.span < 2*time.Minute {
		return float64(n) // a minute or less: the count is the rate's bound
	}
	return float64(n) / (f.span - time.Minute).Minutes()
}

// merge folds the figures of another host of the same cell into f.
func (f simFigures) merge(g simFigures, hosts int) simFigures {
	avg := func(a, b float64) float64 { // a running mean over hosts; NaN stays NaN
		return a + (b-a)/float64(hosts)
	}
	lowest := func(a, b float64) float64 {
		if math.IsNaN(a) || b < a {
			return b
		}
		return a
	}
	if g.noise.entries > 0 {
		f.noise.after = max(f.noise.after, g.noise.after) // the slowest host to see it
	}
	f.noise.entries += g.noise.entries
	f.pages += g.pages
	f.requests += g.requests
	f.span = max(f.span, g.span)
	f.accepted += g.accepted
	f.lost += g.lost
	f.deferred += g.deferred
	f.explained = append(f.explained, g.explained...)
	f.refusals += g.refusals
	f.makespan = max(f.makespan, g.makespan)
	f.cut = f.cut || g.cut
	f.whole, f.steady = avg(f.whole, g.whole), avg(f.steady, g.steady)
	f.minWindow = lowest(f.minWindow, g.minWindow)
	f.refusalsPerMin = avg(f.refusalsPerMin, g.refusalsPerMin)
	f.before, f.after = avg(f.before, g.before), avg(f.after, g.after)
	f.maxInterval = max(f.maxInterval, g.maxInterval)
	f.endInterval = min(f.endInterval, g.endInterval)
	f.maxInFlight = max(f.maxInFlight, g.maxInFlight)
	f.queueMedian, f.queueP95 = max(f.queueMedian, g.queueMedian), max(f.queueP95, g.queueP95)
	f.insideWindow += g.insideWindow
	f.underFloor += g.underFloor
	f.lateRefusals = append(f.lateRefusals, g.lateRefusals...)
	return f
}

// simRow is one cell's line in the report.
type simRow struct {
	cell   string
	shape  string
	fig    simFigures
	failed []string // the targets missed
}

// simHeader and simCells are the report's columns.
var simHeader = []string{"cell", "whole", "steady", "min 30 s", "before/after step", "refusals/min", "refused", "late/min", "lost", "deferred",
	"makespan", "refusals from 10 s", "max interval", "noise seen", "max in flight", "queue p50/p95", "in window", "< floor", "targets missed"}

func (r simRow) cells() []string {
	f := r.fig
	pct := func(x float64) string {
		if math.IsNaN(x) {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", x*100)
	}
	num := func(x float64, format string) string {
		if math.IsNaN(x) {
			return "-"
		}
		return fmt.Sprintf(format, x)
	}
	step := "-"
	if !math.IsNaN(f.before) {
		step = pct(f.before) + " / " + pct(f.after)
	}
	queue := "-"
	if !math.IsNaN(f.queueMedian) {
		queue = num(f.queueMedian, "%.2f") + " / " + num(f.queueP95, "%.2f")
	}
	makespan := f.makespan.Round(100 * time.Millisecond).String()
	if f.cut {
		makespan += " (cut)"
	}
	missed := strings.Join(r.failed, "; ")
	if missed == "" {
		missed = "none"
	}
	return []string{r.cell, pct(f.whole), pct(f.steady), pct(f.minWindow), step, num(f.refusalsPerMin, "%.1f"), pct(f.refusedShare()), fmt.Sprintf("%.1f", f.lateRate()),
		fmt.Sprintf("%d/%d", f.lost, f.pages), fmt.Sprint(f.deferred), makespan, causeCounts(f.explained),
		f.maxInterval.Round(time.Millisecond).String(), f.noise.String(), fmt.Sprint(f.maxInFlight), queue, fmt.Sprint(f.insideWindow), fmt.Sprint(f.underFloor), missed}
}

// simTable renders rows as a markdown table, with each cell's shape listed below it.
func simTable(rows []simRow) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(simHeader, " | ") + " |\n|")
	b.WriteString(strings.Repeat("---|", len(simHeader)) + "\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r.cells(), " | ") + " |\n")
	}
	b.WriteString("\nShapes:\n\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "- `%s`: %s\n", r.cell, r.shape)
	}
	return b.String()
}
