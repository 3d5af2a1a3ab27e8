package main

// Issue 32: the capacity model must never flood a rate limiter. The library's virtual-time version of
// the grid is lowRateCells (capacity_sim_test.go); this is the same grid on loopback scenario hosts and
// behind real nginx and HAProxy, measured at the server (for a real limiter, its own access log):
// limiters without burst at 0.5, 1 and 2 requests/s, crawled from floors (base delays) of 10, 50 and
// 100 ms, by one process and by a fleet of three sharing a redisstore, three minutes of pages a cell.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/scenario"
)

// The low-rate family: run only when asked (-scenarios low-rate, or a member by name).
const (
	lowRateSet = "low-rate" // -scenarios low-rate: every scenario of the family
	// lowRateSpan is how long each host's pages take at its limiter's rate (rate × span pages);
	// lowRateShortSpan is the quick version's (-short, the Go tests).
	lowRateSpan      = 3 * time.Minute
	lowRateShortSpan = 10 * time.Second
	// lowRateLimit bounds a crawl: one at half the rate still ends within it. The quick version's is
	// lowRateShortLimit.
	lowRateLimit      = 2*lowRateSpan + time.Minute
	lowRateShortLimit = time.Minute
	// lowRateLatency is each host's service time, behind its limiter.
	lowRateLatency = 20 * time.Millisecond
	// lowRateLateFrom is when refusals start to count as late: after the first minute of a host's crawl
	// (from its first page request), as lateRate in the library's grid.
	lowRateLateFrom = time.Minute
)

// Targets of issue 32, at the server, for the adaptive pacer in every cell: every page fetched, and
// besides:
const (
	targetLowRefused = 0.10 // at most 10% of the page requests refused over the crawl…
	targetLowLate    = 1.0  // …at most 1 refusal a minute after the first minute…
	targetLowSteady  = 0.85 // …at least 85% of the limiter's rate from 30 s on, and no noise verdict
)

// The grid: the limiters' rates and the crawlers' floors.
var (
	lowRates  = []float64{0.5, 1, 2}
	lowFloors = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
)

// lowRateShape is how a low-rate limiter refuses.
type lowRateShape int

// The three limiters of issue 32.
const (
	shapeNginx503 lowRateShape = iota // nginx limit_req without burst, its default 503 without Retry-After
	shapeNginx429                     // nginx limit_req without burst, 429 + Retry-After: 1
	shapeHAProxy                      // HAProxy's sliding window (http_req_rate), 429 + Retry-After: 1
)

var lowRateShapes = []lowRateShape{shapeNginx503, shapeNginx429, shapeHAProxy}

func (s lowRateShape) String() string {
	switch s {
	case shapeNginx503:
		return "nginx 503"
	case shapeNginx429:
		return "nginx 429 + RA 1"
	}
	return "HAProxy 429 + RA 1"
}

// key names the shape in host names: "503", "429", "haproxy".
func (s lowRateShape) key() string {
	switch s {
	case shapeNginx503:
		return "503"
	case shapeNginx429:
		return "429"
	}
	return "haproxy"
}

// lowRateCell places a group of a low-rate scenario in the grid: its limiter's rate and shape, real
// (nginx or HAProxy in front of the host) or simulated by the loopback host itself.
type lowRateCell struct {
	Rate  float64
	Shape lowRateShape
	Real  bool
}

// limiter is the cell's limiter as real software would run it; for a simulated cell, the one the host
// imitates.
func (c lowRateCell) limiter() Limiter {
	switch c.Shape {
	case shapeNginx503:
		return Limiter{Kind: Nginx, Rate: c.Rate, Status: http.StatusServiceUnavailable}
	case shapeNginx429:
		return Limiter{Kind: Nginx, Rate: c.Rate, Status: http.StatusTooManyRequests, RetryAfter: time.Second}
	}
	return Limiter{Kind: HAProxy, Rate: c.Rate, Status: http.StatusTooManyRequests, RetryAfter: time.Second}
}

// host is the cell's scenario host with its pages: without limit of its own behind a real limiter;
// otherwise a bucket without burst (nginx) or a sliding window of the same period and limit as the
// real HAProxy's.
func (c lowRateCell) host(pages int) scenario.HostConfig {
	h := scenario.HostConfig{Name: c.hostName(), Pages: pages, Latency: lowRateLatency}
	if c.Real {
		return h
	}
	l := c.limiter()
	switch c.Shape {
	case shapeNginx503, shapeNginx429:
		h.Capacity = &scenario.Capacity{Rate: c.Rate, Burst: 1, Status: l.Status, RetryAfter: l.RetryAfter}
	case shapeHAProxy:
		limit, period, _ := l.haproxyWindow()
		h.Sliding = &scenario.SlidingWindow{Limit: limit, Period: period, Status: l.Status, RetryAfter: l.RetryAfter}
	}
	return h
}

// hostName names the cell's host: "lr-0.5-503", "lr-real-2-haproxy".
func (c lowRateCell) hostName() string {
	if c.Real {
		return fmt.Sprintf("lr-real-%g-%s", c.Rate, c.Shape.key())
	}
	return fmt.Sprintf("lr-%g-%s", c.Rate, c.Shape.key())
}

// setting says where the limiter runs: "loopback" (the scenario host) or "nginx"/"HAProxy".
func (c lowRateCell) setting() string {
	if !c.Real {
		return "loopback"
	}
	if c.Shape == shapeHAProxy {
		return "HAProxy"
	}
	return "nginx"
}

// label is the group's label: "0.5/s nginx 503, loopback".
func (c lowRateCell) label() string {
	return fmt.Sprintf("%g/s %s, %s", c.Rate, c.Shape, c.setting())
}

// lowRateName names the family's scenario of a floor and a number of processes: "low-rate-10ms",
// "low-rate-fleet-10ms".
func lowRateName(floor time.Duration, procs int) string {
	if procs > 1 {
		return fmt.Sprintf("%s-fleet-%dms", lowRateSet, floor.Milliseconds())
	}
	return fmt.Sprintf("%s-%dms", lowRateSet, floor.Milliseconds())
}

// lowRateScenarios returns the family at size sz (full or short): a scenario for each floor, by one
// process then by a fleet of fleetSize, each holding every cell of the grid side by side, one host a
// cell: the three rates × the three shapes, simulated on loopback, then behind real nginx and HAProxy
// (a group is skipped where its limiter is not installed). Both crawlers of a scenario get the floor:
// static Colly as LimitRule{Delay}, the adaptive pacer as its base delay.
func lowRateScenarios(sz size) []Scenario {
	span, limit := lowRateSpan, lowRateLimit
	if sz == sizeShort {
		span, limit = lowRateShortSpan, lowRateShortLimit
	}
	var out []Scenario
	for _, procs := range []int{1, fleetSize} {
		for _, floor := range lowFloors {
			who := "one process"
			if procs > 1 {
				who = fmt.Sprintf("a fleet of %d processes on one redisstore", procs)
			}
			sc := Scenario{
				Name: lowRateName(floor, procs),
				Title: fmt.Sprintf("Low rates (issue 32): limiters without burst at 0.5, 1 and 2/s (nginx 503, nginx 429 + Retry-After 1, HAProxy's window 429 + Retry-After 1), loopback and real, from a %s floor, %s",
					fmtLabel(floor), who),
				Interval: floor, Jitter: ext.DefaultJitter, Limit: limit, NoChart: true,
			}
			if procs > 1 {
				sc.Processes = procs
			}
			for _, real := range []bool{false, true} {
				for _, shape := range lowRateShapes {
					for _, rate := range lowRates {
						c := lowRateCell{Rate: rate, Shape: shape, Real: real}
						g := Group{Label: c.label(), LowRate: &c, Hosts: []scenario.HostConfig{c.host(int(rate * span.Seconds()))}}
						if real {
							l := c.limiter()
							g.Limiter = &l
						}
						sc.Groups = append(sc.Groups, g)
					}
				}
			}
			out = append(out, sc)
		}
	}
	return out
}

// isLowRate reports whether a scenario is of the low-rate family.
func isLowRate(sc *Scenario) bool {
	return len(sc.Groups) > 0 && sc.Groups[0].LowRate != nil
}

// lowRateFigures are issue 32's measurements of one cell's crawl, at the server.
type lowRateFigures struct {
	Pages, Fetched    int // the cell's pages, and those served 200
	Requests, Refused int // page requests, and those not served 200
	// Late counts the refusals from lowRateLateFrom after the first page request on; LatePerMin
	// divides them by the minutes from then to the last page request (a crawl of two minutes or less:
	// the count itself), as lateRate in the library's grid.
	Late       int
	LatePerMin float64
	// Steady is the goodput from steadyFrom on as a share of the limiter's rate: the pages first served
	// 200 from then on, per second from then to the last one plus one interval of the rate (its slot),
	// as the library's grid measures it; NaN when the crawl did not last past steadyFrom.
	Steady   float64
	Noise    int           // refusals_uncorrelated events of the cell's hosts in the audit trail
	InWindow int           // arrivals inside a Retry-After window, sent after the refusal was read
	Span     time.Duration // from the first page request to the last
	TimedOut bool          // the crawl reached the scenario's Limit
}

// RefusedShare is Refused as a share of Requests.
func (f lowRateFigures) RefusedShare() float64 {
	if f.Requests == 0 {
		return 0
	}
	return float64(f.Refused) / float64(f.Requests)
}

// missed lists the targets of issue 32 the figures miss.
func (f lowRateFigures) missed() []string {
	var out []string
	if f.Fetched < f.Pages {
		out = append(out, fmt.Sprintf("%d pages lost", f.Pages-f.Fetched))
	}
	if f.RefusedShare() > targetLowRefused {
		out = append(out, fmt.Sprintf("refused %.1f%% > 10%%", f.RefusedShare()*100))
	}
	if f.LatePerMin > targetLowLate {
		out = append(out, fmt.Sprintf("%.1f late refusals/min > 1", f.LatePerMin))
	}
	if !(f.Steady >= targetLowSteady) { // NaN misses: no figure is no evidence
		out = append(out, fmt.Sprintf("goodput from 30 s %s < 85%%", fmtPct(f.Steady)))
	}
	if f.Noise > 0 {
		out = append(out, fmt.Sprintf("%d noise verdicts", f.Noise))
	}
	return out
}

// measureLowRate computes issue 32's figures of group g of a finished crawl; m is the group's Metrics
// (for the arrivals inside Retry-After windows, judged as everywhere else).
func measureLowRate(sc *Scenario, g int, run *Run, m *Metrics) lowRateFigures {
	f := lowRateFigures{Steady: math.NaN(), InWindow: m.InWindow, TimedOut: run.TimedOut}
	rate := sc.Groups[g].LowRate.Rate
	var pages []scenario.Arrival
	hosts := 0
	for _, h := range run.Hosts {
		if h.Group != g {
			continue
		}
		hosts++
		f.Pages += h.Config.Pages
		pages = append(pages, scenario.PageRequests(h.Arrivals)...)
		f.Noise += noiseVerdicts(run.Audit, h.Key)
	}
	pages = sortArrivals(pages)
	f.Requests = len(pages)
	f.Fetched = scenario.PagesOK(pages)
	if len(pages) == 0 {
		return f
	}
	first, last := pages[0].At, pages[len(pages)-1].At
	f.Span = last.Sub(first)
	seen := map[string]bool{}
	var accepted []time.Time // the first 200 of each page
	for _, a := range pages {
		if a.Status != http.StatusOK {
			f.Refused++
			if a.At.Sub(first) >= lowRateLateFrom {
				f.Late++
			}
			continue
		}
		if !seen[a.Path] {
			seen[a.Path] = true
			accepted = append(accepted, a.At)
		}
	}
	f.LatePerMin = float64(f.Late)
	if f.Span >= lowRateLateFrom+time.Minute {
		f.LatePerMin = float64(f.Late) / (f.Span - lowRateLateFrom).Minutes()
	}
	capacity := rate * float64(hosts)
	if len(accepted) == 0 || capacity <= 0 {
		return f
	}
	warm := first.Add(steadyFrom)
	end := accepted[len(accepted)-1].Add(time.Duration(float64(time.Second) / capacity))
	if end.After(warm) {
		n := 0
		for _, at := range accepted {
			if !at.Before(warm) {
				n++
			}
		}
		f.Steady = float64(n) / end.Sub(warm).Seconds() / capacity
	}
	return f
}

// noiseVerdicts counts the refusals_uncorrelated events of host in an audit trail (JSON lines): the
// capacity model reading the host's refusals as noise, which a rate limiter's never are.
func noiseVerdicts(trail []byte, host string) int {
	n := 0
	for line := range bytes.SplitSeq(trail, []byte("\n")) {
		if !bytes.Contains(line, []byte(audit.EventRefusalsUncorrelated)) {
			continue
		}
		var e struct {
			Event string `json:"event"`
			Host  string `json:"target_domain"`
		}
		if json.Unmarshal(line, &e) == nil && e.Event == string(audit.EventRefusalsUncorrelated) && e.Host == host {
			n++
		}
	}
	return n
}

// lowRateRow is one cell of one crawl of the family, for the table and the targets.
type lowRateRow struct {
	Scenario     string
	Floor        time.Duration
	Processes    int
	Cell         lowRateCell
	Adaptive     lowRateFigures
	Static       lowRateFigures
	Limit        time.Duration
	AdaptiveWall time.Duration // the adaptive crawl's whole wall time (all cells)
}

// lowRateRows collects the cells of every low-rate scenario among results, sorted by processes,
// setting, shape, rate and floor.
func lowRateRows(results []*ScenarioResult) []lowRateRow {
	var rows []lowRateRow
	for _, r := range results {
		sc := &r.Scenario
		if !isLowRate(sc) {
			continue
		}
		for g, grp := range sc.Groups {
			rows = append(rows, lowRateRow{
				Scenario: sc.Name, Floor: sc.Interval, Processes: max(sc.Processes, 1), Cell: *grp.LowRate,
				Adaptive: measureLowRate(sc, g, r.Runs[Adaptive], r.Metrics[Adaptive][g]),
				Static:   measureLowRate(sc, g, r.Runs[Static], r.Metrics[Static][g]),
				Limit:    sc.Limit, AdaptiveWall: r.Runs[Adaptive].Wall,
			})
		}
	}
	slices.SortStableFunc(rows, func(a, b lowRateRow) int {
		return cmp.Or(cmp.Compare(a.Processes, b.Processes), boolCompare(a.Cell.Real, b.Cell.Real),
			cmp.Compare(a.Cell.Shape, b.Cell.Shape), cmp.Compare(a.Cell.Rate, b.Cell.Rate), cmp.Compare(a.Floor, b.Floor))
	})
	return rows
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// renderLowRate renders issue 32's table of the low-rate cells among results; "" when there is none.
func renderLowRate(results []*ScenarioResult) string {
	rows := lowRateRows(results)
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Measured at the server (a real limiter's own access log). Refused: page requests not served 200, " +
		"over the crawl. Late: refusals a minute after the first 60 s of the cell's crawl. Goodput: pages first served 200 " +
		"from 30 s on, per second to the last one plus one interval of the rate, as a share of the rate. Noise: " +
		"refusals_uncorrelated events in the audit trail. Targets (adaptive): every page, ≤ 10% refused, ≤ 1 late/min, " +
		"goodput ≥ 85%, no noise verdict.\n\n")
	b.WriteString("| Processes | Limiter | Setting | Rate | Floor | Fetched | Refused | Late/min | Goodput from 30 s | Noise | In Retry-After window | Crawl | Targets missed | Static Colly |\n")
	b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		a, s := r.Adaptive, r.Static
		missed := "none"
		if m := a.missed(); len(m) > 0 {
			missed = "**" + strings.Join(m, "; ") + "**"
		}
		crawl := fmtDur(a.Span)
		if a.TimedOut {
			crawl += fmt.Sprintf(" (stopped at the %s limit)", fmtDur(r.Limit))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %g/s | %s | %d/%d | %.1f%% (%d of %d) | %.1f (%d) | %s | %d | %d | %s | %s | %d/%d fetched, %.0f%% refused |\n",
			r.Processes, r.Cell.Shape, r.Cell.setting(), r.Cell.Rate, fmtLabel(r.Floor),
			a.Fetched, a.Pages, a.RefusedShare()*100, a.Refused, a.Requests, a.LatePerMin, a.Late,
			fmtPct(a.Steady), a.Noise, a.InWindow, crawl, missed,
			s.Fetched, s.Pages, s.RefusedShare()*100)
	}
	return b.String()
}

// evaluateLowRate checks issue 32's targets on each cell of a low-rate scenario.
func evaluateLowRate(r *ScenarioResult) []Target {
	var out []Target
	sc := &r.Scenario
	for g, grp := range sc.Groups {
		a := measureLowRate(sc, g, r.Runs[Adaptive], r.Metrics[Adaptive][g])
		s := measureLowRate(sc, g, r.Runs[Static], r.Metrics[Static][g])
		out = append(out, Target{
			Scenario: sc.Name,
			Text:     grp.Label + ": every page fetched, ≤ 10% refused, ≤ 1 refusal a minute after the first 60 s, ≥ 85% of the rate from 30 s on, no noise verdict",
			Adaptive: a.String(), Static: s.staticString(), Met: len(a.missed()) == 0,
		})
	}
	return out
}

// String renders the figures in a line: "90/90 fetched, 6.2% refused, 0.4 late/min, 92% from 30 s, 0 noise".
func (f lowRateFigures) String() string {
	return fmt.Sprintf("%d/%d fetched, %.1f%% refused, %.1f late/min, %s from 30 s, %d noise", f.Fetched, f.Pages,
		f.RefusedShare()*100, f.LatePerMin, fmtPct(f.Steady), f.Noise)
}

// staticString renders static Colly's figures, which have no audit trail: "12/20 fetched, 79.3% refused,
// 0.0 late/min, — from 30 s".
func (f lowRateFigures) staticString() string {
	return fmt.Sprintf("%d/%d fetched, %.1f%% refused, %.1f late/min, %s from 30 s", f.Fetched, f.Pages,
		f.RefusedShare()*100, f.LatePerMin, fmtPct(f.Steady))
}

// fmtPct renders a share as a percentage, "—" for NaN.
func fmtPct(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", x*100)
}
