package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/internal/scenario"
)

// Scenario is one benchmark scenario: the hosts both crawlers meet and the interval both are
// configured with. The static crawler uses one LimitRule{Delay: Interval, Parallelism: 1} per host;
// the adaptive crawler ext.AdaptivePacing with WithBaseDelay(Interval) and WithJitter(Jitter).
type Scenario struct {
	Name     string        // the -scenarios name
	Title    string        // a heading for the table and the chart
	Interval time.Duration // the configured interval (static Delay, adaptive base delay)
	Jitter   float64       // the adaptive pacer's jitter
	Groups   []Group       // the hosts, in groups reported on separate rows
	Limit    time.Duration // the collector's context deadline and the hard bound of one crawl; reaching it is reported as a timeout
	// Processes, when above 1, crawls with that many crawler processes (this program re-executed),
	// each crawling its share of every host's pages; the adaptive ones share one redisstore on a
	// private redis-server, the static ones nothing.
	Processes int
	// NoChart leaves the scenario out of the charts: a scenario of many hosts (limiter-grid) is
	// reported as a table only.
	NoChart bool
	// Limiter, when set, puts real rate-limiting software in front of each host (nginx, HAProxy):
	// the hosts serve every page without limit, and arrivals are read from the limiter's access log.
	Limiter *Limiter
	// Long marks the long version of a limiter scenario (-long): at least longSpan of crawl per host,
	// judged by the steady-state targets of issue 26.
	Long bool
}

// Group is a set of hosts of the same character, measured together (their gaps are pooled).
type Group struct {
	Label string
	Hosts []scenario.HostConfig
	Cell  *gridCell // limiter-grid's cell of the group; nil elsewhere
	// Limiter, when set, puts real rate-limiting software in front of each of the group's hosts, in
	// place of the scenario's Limiter: one scenario can then hold limiters of several kinds and rates
	// side by side (low-rate).
	Limiter *Limiter
	LowRate *lowRateCell // low-rate's cell of the group; nil elsewhere
}

// limiterOf returns the real limiter in front of group g's hosts: the group's own, or the scenario's;
// nil for none.
func (s *Scenario) limiterOf(g int) *Limiter {
	if l := s.Groups[g].Limiter; l != nil {
		return l
	}
	return s.Limiter
}

// Scenario names, in the order they run.
const (
	scLatency    = "latency"
	scCapacity   = "capacity"
	scHTTPDate   = "http-date"
	scCrawlDelay = "crawl-delay"
	scOutage     = "outage"
	scTenHosts   = "ten-hosts"

	// The scenarios of issue 9 (admission at the moment of departure).
	scFleetCapacity  = "fleet-capacity"
	scFleetFloor     = "fleet-floor"
	scOutageDeadline = "outage-deadline"
	scSteadyCapacity = "steady-capacity"
	scCapacityStep   = "capacity-step"

	// The scenarios of issue 15 (one capacity model per host): a server that queues instead of
	// refusing, and limiters without burst (nginx limit_req), quota headers.
	scOverload      = "overload"
	scOverload4x200 = "overload-4x200"
	scSteadyNoBurst = "steady-nb"
	scStepNoBurst   = "step-nb"
	scNginx503      = "nginx-503"
	scStepUpNoBurst = "step-up-nb" // issue 26: a capacity that rises
	scFleetNoBurst  = "fleet-nb"
	scLimiterGrid   = "limiter-grid"
	scWorkersGrid   = "workers-grid"
	scQuota         = "quota"
)

// issue4 reports whether a scenario is one of issue 4's six (the whole-suite time target covers those).
func issue4(name string) bool {
	switch name {
	case scLatency, scCapacity, scHTTPDate, scCrawlDelay, scOutage, scTenHosts:
		return true
	}
	return false
}

// fleetSize is the number of crawler processes of the fleet scenarios.
const fleetSize = 3

// sizes returns the pickers of a scenario's page counts and durations: the full one, or with short
// the brief one.
func sizes(short bool) (pick func(full, brief int) int, dur func(full, brief time.Duration) time.Duration) {
	return choose[int](short), choose[time.Duration](short)
}

func choose[T any](short bool) func(full, brief T) T {
	return func(full, brief T) T {
		if short {
			return brief
		}
		return full
	}
}

// allScenarios returns the six scenarios of issue 4, the five of issue 9, then the eight of issue 15. The short versions keep each scenario's
// character with fewer pages and shorter waits, so each runs in a few seconds (the Go tests).
func allScenarios(short bool) []Scenario {
	pick, dur := sizes(short)
	limit := dur(90*time.Second, 60*time.Second)
	fast := 20 * time.Millisecond

	quick, slow := dur(200*time.Millisecond, 100*time.Millisecond), dur(2*time.Second, time.Second)
	latency := Scenario{
		Name: scLatency, Title: fmt.Sprintf("Latency: hosts answering in %s and %s", fmtLabel(quick), fmtLabel(slow)),
		Interval: dur(500*time.Millisecond, 250*time.Millisecond), Jitter: 0, Limit: limit,
		Groups: []Group{
			{Label: fmtLabel(quick), Hosts: []scenario.HostConfig{{Name: "latency-fast", Pages: pick(40, 10), Latency: quick}}},
			{Label: fmtLabel(slow), Hosts: []scenario.HostConfig{{Name: "latency-slow", Pages: pick(16, 5), Latency: slow}}},
		},
	}
	capacity := Scenario{
		Name: scCapacity, Title: "Hidden capacity: token bucket of 4 requests/s, 429 + Retry-After: 1",
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "4/s bucket", Hosts: []scenario.HostConfig{{
			Name: "capacity", Pages: pick(200, 20), Latency: fast,
			Capacity: &scenario.Capacity{Rate: 4, Burst: 4, RetryAfter: time.Second},
		}}}},
	}
	httpDate := Scenario{
		Name: scHTTPDate, Title: "Retry-After as an HTTP-date, server clock +1 h",
		Interval: 250 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "2/s bucket, clock +1 h", Hosts: []scenario.HostConfig{{
			Name: "http-date", Pages: pick(40, 12), Latency: fast,
			Capacity:  &scenario.Capacity{Rate: 2, Burst: 2, RetryAfter: dur(2*time.Second, time.Second)},
			ClockSkew: time.Hour, RetryAfterDate: true,
		}}}},
	}
	crawlDelay := dur(2*time.Second, time.Second)
	robots := Scenario{
		Name: scCrawlDelay, Title: fmt.Sprintf("robots.txt Crawl-delay: %g", crawlDelay.Seconds()),
		Interval: 500 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: fmt.Sprintf("Crawl-delay %g s", crawlDelay.Seconds()), Hosts: []scenario.HostConfig{{
			Name: "crawl-delay", Pages: pick(16, 6), Latency: fast,
			Robots: fmt.Sprintf("User-agent: *\nCrawl-delay: %g\n", crawlDelay.Seconds()),
		}}}},
	}
	outageAfter, outageFor := dur(5*time.Second, time.Second), dur(10*time.Second, 2*time.Second)
	outage := Scenario{
		Name: scOutage, Title: fmt.Sprintf("Outage: 503s without Retry-After for %s, then healthy", fmtLabel(outageFor)),
		Interval: dur(200*time.Millisecond, 100*time.Millisecond), Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: fmtLabel(outageFor) + " outage", Hosts: []scenario.HostConfig{{
			Name: "outage", Pages: pick(120, 40), Latency: fast,
			Refusals: []scenario.Refusal{scenario.Outage(outageAfter, outageFor, 0)},
		}}}},
	}
	var fastHosts []scenario.HostConfig
	for i := range 9 {
		fastHosts = append(fastHosts, scenario.HostConfig{Name: fmt.Sprintf("fast-%d", i+1), Pages: pick(16, 5), Latency: 50 * time.Millisecond})
	}
	ten := Scenario{
		Name: scTenHosts, Title: "Ten hosts at once, one of them slow",
		Interval: dur(500*time.Millisecond, 250*time.Millisecond), Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{
			{Label: "9 fast (50 ms)", Hosts: fastHosts},
			{Label: "1 slow (" + fmtLabel(slow) + ")", Hosts: []scenario.HostConfig{{Name: "slow", Pages: pick(16, 5), Latency: slow}}},
		},
	}

	bucket4 := &scenario.Capacity{Rate: 4, Burst: 4, RetryAfter: time.Second}
	fleetCapacity := Scenario{
		Name: scFleetCapacity, Title: fmt.Sprintf("Fleet of %d processes on one redisstore: token bucket of 4 requests/s, 429 + Retry-After: 1", fleetSize),
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Processes: fleetSize,
		Groups: []Group{{Label: fmt.Sprintf("4/s bucket, %d processes", fleetSize), Hosts: []scenario.HostConfig{{
			Name: "fleet-capacity", Pages: pick(120, 24), Latency: fast, Capacity: bucket4,
		}}}},
	}
	fleetFloor := Scenario{
		Name: scFleetFloor, Title: fmt.Sprintf("Fleet of %d processes on one redisstore at a 300 ms floor, jitter 0", fleetSize),
		Interval: 300 * time.Millisecond, Jitter: 0, Limit: limit, Processes: fleetSize,
		Groups: []Group{{Label: fmt.Sprintf("300 ms floor, %d processes", fleetSize), Hosts: []scenario.HostConfig{{
			Name: "fleet-floor", Pages: pick(90, 15), Latency: fast,
		}}}},
	}
	deadlineAfter, deadlineFor := dur(3*time.Second, time.Second), dur(10*time.Second, 2*time.Second)
	outageDeadline := Scenario{
		Name:     scOutageDeadline,
		Title:    fmt.Sprintf("Outage of %s (503, no Retry-After) under a %s context deadline", fmtLabel(deadlineFor), fmtLabel(dur(50*time.Second, 20*time.Second))),
		Interval: dur(300*time.Millisecond, 100*time.Millisecond), Jitter: ext.DefaultJitter, Limit: dur(50*time.Second, 20*time.Second),
		Groups: []Group{{Label: fmtLabel(deadlineFor) + " outage", Hosts: []scenario.HostConfig{{
			Name: "outage-deadline", Pages: pick(40, 20), Latency: fast,
			Refusals: []scenario.Refusal{scenario.Outage(deadlineAfter, deadlineFor, 0)},
		}}}},
	}
	steady := Scenario{
		Name: scSteadyCapacity, Title: "Steady hidden capacity: token bucket of 4 requests/s, 429 + Retry-After: 1",
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "4/s bucket", Hosts: []scenario.HostConfig{{
			Name: "steady-capacity", Pages: pick(120, 20), Latency: fast, Capacity: bucket4,
		}}}},
	}
	stepAt := dur(20*time.Second, 3*time.Second)
	step := Scenario{
		Name: scCapacityStep, Title: fmt.Sprintf("Capacity step: token bucket of 4 requests/s, 2/s from %s on", fmtLabel(stepAt)),
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "4/s then 2/s", Hosts: []scenario.HostConfig{{
			Name: "capacity-step", Pages: pick(120, 20), Latency: fast,
			Capacity: &scenario.Capacity{Rate: 4, Burst: 4, RetryAfter: time.Second, StepAfter: stepAt, StepRate: 2},
		}}}},
	}
	all := []Scenario{latency, capacity, httpDate, robots, outage, ten, fleetCapacity, fleetFloor, outageDeadline, steady, step}
	return append(all, issue15Scenarios(short, limit)...)
}

// issue15Scenarios returns the scenarios of issue 15: a server that never refuses but queues (one
// worker × 100 ms, and four × 200 ms), limiters without burst (burst 1: nginx's limit_req without
// burst) steady, stepping, answering nginx's default 503 without Retry-After, shared by a fleet and
// over a grid of rates and Retry-After values, and an enforced quota of 10 per 5 s. The limiter shapes
// come from limiterShapes, which also builds their long versions.
func issue15Scenarios(short bool, limit time.Duration) []Scenario {
	pick, _ := sizes(short)
	sz := sizeFull
	if short {
		sz = sizeShort
	}
	shapes := map[string]Scenario{}
	for _, sc := range limiterShapes(sz) {
		shapes[sc.Name] = sc
	}
	fast := 20 * time.Millisecond
	overload := Scenario{
		Name: scOverload, Title: "Overload: 1 worker × 100 ms behind a FIFO queue, never refusing",
		Interval: 20 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "1 worker × 100 ms", Hosts: []scenario.HostConfig{{
			Name: scOverload, Pages: pick(120, 30), Workers: 1, Latency: 100 * time.Millisecond,
		}}}},
	}
	overload4 := Scenario{
		Name: scOverload4x200, Title: "Overload: 4 workers × 200 ms behind a FIFO queue, never refusing",
		Interval: 20 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "4 workers × 200 ms", Hosts: []scenario.HostConfig{{
			Name: scOverload4x200, Pages: pick(120, 60), Workers: 4, Latency: 200 * time.Millisecond,
		}}}},
	}
	quota := Scenario{
		Name: scQuota, Title: "Quota headers: X-RateLimit 10 per 5 s, enforced (429 + Retry-After once spent)",
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit,
		Groups: []Group{{Label: "10 per 5 s", Hosts: []scenario.HostConfig{{
			Name: scQuota, Pages: pick(60, 20), Latency: fast,
			RateLimit: &scenario.RateLimit{Limit: 10, Window: 5 * time.Second, Style: scenario.XRateLimit, Enforce: true},
		}}}},
	}
	return []Scenario{overload, overload4, shapes[scSteadyNoBurst], shapes[scStepNoBurst], shapes[scStepUpNoBurst],
		shapes[scNginx503], shapes[scFleetNoBurst], shapes[scLimiterGrid], quota}
}

// size is how long a scenario runs: its full version, its quick one (-short) or, for the limiter
// shapes, its long one (-long).
type size int

const (
	sizeFull size = iota
	sizeShort
	sizeLong
)

func (sz size) String() string {
	switch sz {
	case sizeShort:
		return "short"
	case sizeLong:
		return "long"
	}
	return "full"
}

// Lengths of the long scenarios (issue 26): at least three minutes of crawl per host.
const (
	// longSpan is how long each host's pages take at its capacity. No crawl can be faster, so each
	// lasts at least that long; the first 30 s are learning, the rest is the steady state.
	longSpan = 200 * time.Second
	// longStepAt is when a long scenario's capacity steps: 90 s of one rate, then 110 s of the other,
	// each side measured outside the 30 s after the step.
	longStepAt = 90 * time.Second
	// longLimit bounds a long crawl: a crawler at half of capacity still finishes within it.
	longLimit = 2*longSpan + 100*time.Second
)

// noBurst is a limiter without burst (nginx limit_req without burst): rate per second, 429 with
// retryAfter; see scenario.Capacity.
func noBurst(rate float64, retryAfter time.Duration) *scenario.Capacity {
	return &scenario.Capacity{Rate: rate, Burst: 1, RetryAfter: retryAfter}
}

// limiterShapes returns the limiters without burst at size sz: steady at 4/s, stepping from 4/s to
// 2/s and from 2/s to 4/s, answering nginx's default 503 without Retry-After, and a grid of rates ×
// refusals. The long versions crawl longSpan of pages per host (rate × longSpan), step at longStepAt,
// and have a grid of 2, 4 and 10/s.
func limiterShapes(sz size) []Scenario {
	pick, dur := sizes(sz == sizeShort)
	limit := dur(90*time.Second, 60*time.Second)
	stepAt := dur(20*time.Second, 3*time.Second)
	gridSpan := dur(27*time.Second, 3*time.Second) // each host's pages take about this long at its rate
	rates := gridRates
	steady := func(rate float64) int { return pick(120, 20) }
	stepped := func(before, after float64) int { return pick(120, 20) }
	if sz == sizeLong {
		limit, stepAt, gridSpan, rates = longLimit, longStepAt, longSpan, gridRatesLong
		steady = func(rate float64) int { return int(rate * longSpan.Seconds()) }
		stepped = func(before, after float64) int {
			return int(before*longStepAt.Seconds() + after*(longSpan-longStepAt).Seconds())
		}
	}
	fast := 20 * time.Millisecond
	long := sz == sizeLong
	steadyNB := Scenario{
		Name: scSteadyNoBurst, Title: "Limiter without burst (nginx limit_req): 4 requests/s, 429 + Retry-After: 1",
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Long: long,
		Groups: []Group{{Label: "4/s, no burst", Hosts: []scenario.HostConfig{{
			Name: scSteadyNoBurst, Pages: steady(4), Latency: fast, Capacity: noBurst(4, time.Second),
		}}}},
	}
	step := func(name string, before, after float64) Scenario {
		c := noBurst(before, time.Second)
		c.StepAfter, c.StepRate = stepAt, after
		return Scenario{
			Name: name, Title: fmt.Sprintf("Capacity step without burst: %g requests/s, %g/s from %s on, 429 + Retry-After: 1", before, after, fmtLabel(stepAt)),
			Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Long: long,
			Groups: []Group{{Label: fmt.Sprintf("%g/s then %g/s, no burst", before, after), Hosts: []scenario.HostConfig{{
				Name: name, Pages: stepped(before, after), Latency: fast, Capacity: c,
			}}}},
		}
	}
	nginx := Scenario{
		Name: scNginx503, Title: "nginx limit_req defaults: 4 requests/s without burst, 503 without Retry-After",
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Long: long,
		Groups: []Group{{Label: "4/s, no burst, 503", Hosts: []scenario.HostConfig{{
			Name: scNginx503, Pages: steady(4), Latency: fast,
			Capacity: &scenario.Capacity{Rate: 4, Burst: 1, Status: 503},
		}}}},
	}
	fleetPages := pick(120, 24)
	if long {
		fleetPages = steady(4)
	}
	fleet := Scenario{
		Name: scFleetNoBurst, Title: fmt.Sprintf("Fleet of %d processes on one redisstore: 4 requests/s without burst, 429 + Retry-After: 1", fleetSize),
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Processes: fleetSize, Long: long,
		Groups: []Group{{Label: fmt.Sprintf("4/s, no burst, %d processes", fleetSize), Hosts: []scenario.HostConfig{{
			Name: scFleetNoBurst, Pages: fleetPages, Latency: fast, Capacity: noBurst(4, time.Second),
		}}}},
	}
	var rateNames []string
	for _, r := range rates {
		rateNames = append(rateNames, fmt.Sprintf("%g", r))
	}
	grid := Scenario{
		Name: scLimiterGrid, Title: fmt.Sprintf("Limiters without burst: %s requests/s × 429 + Retry-After: 1 and 3, and 503 without Retry-After, one host each", strings.Join(rateNames, ", ")),
		Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, NoChart: true, Long: long,
	}
	for _, rate := range rates {
		for _, col := range gridColumns {
			c := noBurst(rate, col.RetryAfter)
			c.Status = col.Status
			grid.Groups = append(grid.Groups, Group{Label: gridLabel(rate, col), Cell: &gridCell{Rate: rate, Column: col}, Hosts: []scenario.HostConfig{{
				Name:  col.hostName(rate),
				Pages: int(rate * gridSpan.Seconds()), Latency: fast, Capacity: c,
			}}})
		}
	}
	return []Scenario{steadyNB, step(scStepNoBurst, 4, 2), step(scStepUpNoBurst, 2, 4), nginx, fleet, grid}
}

// The rows of limiter-grid: its rates without burst; the long grid has fewer (issue 26's 2 to 10/s).
var (
	gridRates     = []float64{2, 4, 6, 10}
	gridRatesLong = []float64{2, 4, 10}
)

// gridColumn is a column of limiter-grid: how its limiters refuse.
type gridColumn struct {
	Status     int
	RetryAfter time.Duration // 0: none
}

// gridColumns are the refusals of limiter-grid: 429 with Retry-After 1 s and 3 s, and nginx's default
// 503 without Retry-After.
var gridColumns = []gridColumn{{429, time.Second}, {429, 3 * time.Second}, {503, 0}}

// gridCell places a group of limiter-grid in the table.
type gridCell struct {
	Rate   float64
	Column gridColumn
}

func (c gridColumn) String() string {
	if c.RetryAfter == 0 {
		return fmt.Sprintf("%d without Retry-After", c.Status)
	}
	return "Retry-After " + fmtLabel(c.RetryAfter)
}

// hostName names the grid's host of a rate in this column: "grid-4-1", "grid-4-503".
func (c gridColumn) hostName(rate float64) string {
	if c.RetryAfter == 0 {
		return fmt.Sprintf("grid-%g-%d", rate, c.Status)
	}
	return fmt.Sprintf("grid-%g-%g", rate, c.RetryAfter.Seconds())
}

// gridLabel labels a cell of limiter-grid: "4/s, Retry-After 3 s", "4/s, 503 without Retry-After".
func gridLabel(rate float64, c gridColumn) string {
	return fmt.Sprintf("%g/s, %s", rate, c)
}

// The real-limiter scenarios (issue 26): run only when asked (-real, -long or by name).
const (
	scRealNginx503  = "real-nginx-503"
	scRealNginx429  = "real-nginx-429"
	scRealHAProxy   = "real-haproxy"
	realSetName     = "real" // -scenarios real: the three of them
	realPagesFull   = 120    // 30 s at 4/s
	realPagesShort  = 20     // 5 s at 4/s
	realLimiterRate = 4
)

// realScenarios returns the scenarios served by real rate-limiting software at 4/s: nginx limit_req
// without burst with its default 503 (no Retry-After) and with 429 + Retry-After: 1, and HAProxy's
// sliding window http_req_rate(1s) with 429 + Retry-After: 1. Each host is a scenario host without
// limits behind the limiter.
func realScenarios(sz size) []Scenario {
	pages := map[size]int{sizeFull: realPagesFull, sizeShort: realPagesShort, sizeLong: int(realLimiterRate * longSpan.Seconds())}[sz]
	limit := map[size]time.Duration{sizeFull: 90 * time.Second, sizeShort: 60 * time.Second, sizeLong: longLimit}[sz]
	mk := func(name string, l Limiter) Scenario {
		return Scenario{
			Name: name, Title: "Real limiter: " + l.describe(),
			Interval: 100 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: limit, Long: sz == sizeLong, Limiter: &l,
			Groups: []Group{{Label: l.describe(), Hosts: []scenario.HostConfig{{Name: name, Pages: pages, Latency: 20 * time.Millisecond}}}},
		}
	}
	return []Scenario{
		mk(scRealNginx503, Limiter{Kind: Nginx, Rate: realLimiterRate, Status: 503}),
		mk(scRealNginx429, Limiter{Kind: Nginx, Rate: realLimiterRate, Status: 429, RetryAfter: time.Second}),
		mk(scRealHAProxy, Limiter{Kind: HAProxy, Rate: realLimiterRate, Status: 429, RetryAfter: time.Second}),
	}
}

// The scenario of refusals that speed does not cause (issue 26): run only when asked, by name.
const (
	scRateIndependent = "rate-independent"
	// scRateIndependentFleet: the same refusals on two hosts (429 + Retry-After: 2 on one, 503 on the
	// other) crawled by a fleet on one redisstore, which reads the noise from the outcomes the store
	// pools (issue 32, item 3). As TestCapacityVirtual's ri-fleet-429 and ri-fleet-503 cells.
	scRateIndependentFleet = "rate-independent-fleet"
	riBase                 = 200 * time.Millisecond
	riSettleRefusals       = 4 // after a host's fourth refusal, the model has seen that slowing down does not help
)

// rateIndependentScenario returns two hosts of 30 pages (12 short) at a base of 200 ms, each refusing
// a third of the first attempts of its pages whatever the rate: 429 with Retry-After: 2, 503 without,
// or no answer (a timeout: Colly gives up after 10 s); every retry is served. As
// TestCapacityVirtual's ri-mixed cell, on loopback servers.
func rateIndependentScenario(sz size) Scenario {
	pick, _ := sizes(sz == sizeShort)
	sc := Scenario{
		Name: scRateIndependent, Title: "Refusals that speed does not cause: a third of first attempts refused (429 + Retry-After: 2, 503, timeout), two hosts",
		Interval: riBase, Jitter: ext.DefaultJitter, Limit: 3 * time.Minute,
	}
	var hosts []scenario.HostConfig
	for i := range 2 {
		hosts = append(hosts, scenario.HostConfig{
			Name: fmt.Sprintf("%s-%d", scRateIndependent, i+1), Pages: pick(30, 12), Latency: 20 * time.Millisecond,
			Flaky: &scenario.Flaky{
				Fraction: 1.0 / 3, Seed: uint64(i + 1), RetryAfter: 2 * time.Second,
				Kinds: []scenario.FlakyKind{scenario.FlakyTooMany, scenario.FlakyUnavailable, scenario.FlakyTimeout},
			},
		})
	}
	sc.Groups = []Group{{Label: "2 hosts, 1/3 of first attempts refused", Hosts: hosts}}
	return sc
}

// rateIndependentFleetScenario returns two hosts of 30 pages (12 short) at a base of 200 ms, each
// refusing a third of the first attempts of its pages whatever the rate (429 with Retry-After: 2 on
// one, 503 without on the other; every retry served), crawled by a fleet of fleetSize processes on one
// redisstore.
func rateIndependentFleetScenario(sz size) Scenario {
	pick, _ := sizes(sz == sizeShort)
	sc := Scenario{
		Name:     scRateIndependentFleet,
		Title:    fmt.Sprintf("Refusals that speed does not cause, a fleet of %d processes on one redisstore: a third of first attempts refused (429 + Retry-After: 2; 503), two hosts", fleetSize),
		Interval: riBase, Jitter: ext.DefaultJitter, Limit: 3 * time.Minute, Processes: fleetSize,
	}
	var hosts []scenario.HostConfig
	for i, kind := range []scenario.FlakyKind{scenario.FlakyTooMany, scenario.FlakyUnavailable} {
		hosts = append(hosts, scenario.HostConfig{
			Name: fmt.Sprintf("%s-%d", scRateIndependentFleet, i+1), Pages: pick(30, 12), Latency: 20 * time.Millisecond,
			Flaky: &scenario.Flaky{Fraction: 1.0 / 3, Seed: uint64(i + 1), RetryAfter: 2 * time.Second, Kinds: []scenario.FlakyKind{kind}},
		})
	}
	sc.Groups = []Group{{Label: "2 hosts, 1/3 of first attempts refused, 3 processes", Hosts: hosts}}
	return sc
}

// longScenarios returns the long version of every limiter shape: the limiters without burst (steady,
// both steps, a fleet of three, the grid), the servers that slow down instead of refusing, and the real
// limiters. The simulated nginx-503 is the grid's 4/s, 503 cell.
func longScenarios() []Scenario {
	var out []Scenario
	for _, sc := range limiterShapes(sizeLong) {
		if sc.Name != scNginx503 {
			out = append(out, sc)
		}
	}
	out = append(out, workersGrid())
	return append(out, realScenarios(sizeLong)...)
}

// workersGrid is issue 26's servers that slow down instead of refusing, over minutes: one host a cell
// of workersGridWorkers × workersGridService behind a FIFO queue, never refusing, each with longSpan of
// pages at its capacity (workers per service time). The full suite's overload scenarios are its short
// version. The base delay (10 ms) is below every cell's capacity interval: what each host can take is
// the capacity model's to learn, from its latency.
func workersGrid() Scenario {
	sc := Scenario{
		Name: scWorkersGrid, Title: "Servers that slow down: 1, 2 and 4 workers × 50 and 200 ms behind a FIFO queue, never refusing, one host each",
		Interval: 10 * time.Millisecond, Jitter: ext.DefaultJitter, Limit: longLimit, NoChart: true, Long: true,
	}
	for _, k := range workersGridWorkers {
		for _, svc := range workersGridService {
			capacity := float64(k) / svc.Seconds()
			sc.Groups = append(sc.Groups, Group{Label: fmt.Sprintf("%d × %s", k, fmtDur(svc)), Hosts: []scenario.HostConfig{{
				Name: fmt.Sprintf("workers-%d-%d", k, svc.Milliseconds()), Pages: int(capacity * longSpan.Seconds()), Workers: k, Latency: svc,
			}}})
		}
	}
	return sc
}

// The cells of workers-grid: workers, and service times.
var (
	workersGridWorkers = []int{1, 2, 4}
	workersGridService = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
)

// catalogue returns every scenario of a size, in the order they run, and which of them "all" selects:
// at full and short size the loopback scenarios (rate-independent, the real limiters and the low-rate
// family only when asked); at long size every long scenario.
func catalogue(sz size) (scs []Scenario, all func(Scenario) bool) {
	if sz == sizeLong {
		return longScenarios(), func(Scenario) bool { return true }
	}
	scs = append(allScenarios(sz == sizeShort), rateIndependentScenario(sz), rateIndependentFleetScenario(sz))
	scs = append(scs, realScenarios(sz)...)
	scs = append(scs, lowRateScenarios(sz)...)
	return scs, func(sc Scenario) bool {
		return sc.Limiter == nil && sc.Name != scRateIndependent && sc.Name != scRateIndependentFleet && !isLowRate(&sc)
	}
}

// selectScenarios returns the scenarios of size sz named in a comma-separated list, in their canonical
// order: names, "all" (see catalogue), "real" (the real limiters) and "low-rate" (issue 32's grid).
func selectScenarios(list string, sz size) ([]Scenario, error) {
	scs, inAll := catalogue(sz)
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	var out []Scenario
	for _, s := range scs {
		if want[s.Name] || (want["all"] && inAll(s)) || (want[realSetName] && s.Limiter != nil) || (want[lowRateSet] && isLowRate(&s)) {
			out = append(out, s)
		}
		delete(want, s.Name)
	}
	delete(want, "all")
	delete(want, realSetName)
	if sz != sizeLong {
		delete(want, lowRateSet)
	}
	if len(want) > 0 {
		var unknown []string
		for n := range want {
			unknown = append(unknown, n)
		}
		slices.Sort(unknown)
		return nil, fmt.Errorf("unknown %s scenario(s) %s; known: %s", sz, strings.Join(unknown, ", "), scenarioNames(sz))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenario selected; known: %s", scenarioNames(sz))
	}
	return out, nil
}

// scenarioNames lists the scenario names of a size, comma-separated.
func scenarioNames(sz size) string {
	var names []string
	scs, _ := catalogue(sz)
	for _, s := range scs {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

// floorFor is the smallest interval a paced crawler should keep on a host: the configured interval,
// or the host's robots.txt Crawl-delay when it is longer.
func (s *Scenario) floorFor(cfg scenario.HostConfig) time.Duration {
	if d := crawlDelayOf(cfg.Robots); d > s.Interval {
		return d
	}
	return s.Interval
}

// crawlDelayOf reads the Crawl-delay line of a scenario robots.txt (one group for "*"); 0 when none.
func crawlDelayOf(robots string) time.Duration {
	for _, line := range strings.Split(robots, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "crawl-delay") {
			continue
		}
		var secs float64
		if _, err := fmt.Sscanf(strings.TrimSpace(v), "%g", &secs); err == nil && secs > 0 {
			return time.Duration(secs * float64(time.Second))
		}
	}
	return 0
}

// fmtLabel renders a duration for a label: "200 ms", "2 s".
func fmtLabel(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%g s", d.Seconds())
}
