package pacemetrics

import (
	"container/heap"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "collypace"

// Label names.
const (
	labelHost    = "host"
	labelTrigger = "trigger"
	labelState   = "state"
)

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	descDepartures = newDesc("departures_total",
		"Requests that departed to the host.", labelHost)
	descWaited = newDesc("wait_seconds_total",
		"Total time requests to the host waited for their in-flight slot and departure slot.", labelHost)
	descRefusals = newDesc("refusals_total",
		"Refusals by the host (429/503, other 5xx, transport errors), by trigger.", labelHost, labelTrigger)
	descRetryWaits = newDesc("retry_after_waits_total",
		"Retry-After windows obeyed for the host.", labelHost)
	descRetrySeconds = newDesc("retry_after_wait_seconds_total",
		"Total length of the Retry-After windows obeyed for the host, safety buffer included.", labelHost)
	descTransitions = newDesc("breaker_transitions_total",
		"Transitions of the host's circuit breaker, by the state entered.", labelHost, labelState)
	descBreakerState = newDesc("breaker_state",
		"State of the host's circuit breaker: 0 closed, 1 open, 2 half-open.", labelHost)
	descBreakerHosts = newDesc("breaker_hosts",
		"Hosts in memory whose circuit breaker is in the state.", labelState)
	descDelay = newDesc("host_delay_seconds",
		"Current interval between departures to the host, before jitter; for host=\"other\", the largest.", labelHost)
	descInFlight = newDesc("in_flight",
		"Requests in flight to the host.", labelHost)
	descHosts = newDesc("hosts",
		"Hosts whose pacing state is in memory.")
	descOptionInvalid = newDesc("option_invalid",
		"1 for each option of New whose value was invalid: its default is used instead.", "option")
	descQueueDepth = newDesc("queue_depth",
		"Requests queued for the host.", labelHost)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descDepartures, descWaited, descRefusals, descRetryWaits, descRetrySeconds, descTransitions,
		descBreakerState, descBreakerHosts, descDelay, descInFlight, descHosts, descQueueDepth, descOptionInvalid,
	} {
		ch <- d
	}
	for _, d := range fleetDescs {
		ch <- d
	}
	c.wait.Describe(ch)
}

// Collect implements prometheus.Collector. It reads the watched pacer and queue, updates which hosts
// have series of their own, and sends the metrics once no lock is held.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src, q := c.source, c.queue
	c.mu.Unlock()
	var in scrapeInput
	if src != nil {
		in.watched, in.statuses = true, src.Hosts()
	}
	if q != nil {
		in.queued, in.depths = true, q.Depths()
	}
	fleet := c.fleet.metrics()

	c.mu.Lock()
	ms := c.scrapeLocked(c.now(), in)
	c.mu.Unlock()

	for _, m := range append(ms, fleet...) {
		ch <- m
	}
	for _, inv := range c.invalid {
		ch <- prometheus.MustNewConstMetric(descOptionInvalid, prometheus.GaugeValue, 1, inv.option)
	}
	ch <- c.wait
}

// scrapeInput is what the watched pacer and queue reported.
type scrapeInput struct {
	watched  bool
	statuses []ext.HostSnapshot
	queued   bool
	depths   map[string]int
}

// scrapeLocked updates the activity scores and the top-N, forgets idle hosts, and returns the metrics.
func (c *Collector) scrapeLocked(now time.Time, in scrapeInput) []prometheus.Metric {
	decay := 1.0
	if !c.lastScrape.IsZero() && now.After(c.lastScrape) {
		decay = math.Exp2(-float64(now.Sub(c.lastScrape)) / float64(activityHalfLife))
	}
	if now.After(c.lastScrape) {
		c.lastScrape = now
	}
	nowNanos := now.UnixNano()
	cands := candidates{limit: c.topHosts}
	var idle []*hostStats
	var byState [numStates]int // from the Observer, for when no pacer is watched
	c.hosts.Range(func(s *hostStats) {
		deps := s.departures.Load()
		s.score = s.score*decay + float64(deps-s.prevDepartures)
		s.prevDepartures = deps
		if ev := s.events(); ev != s.prevEvents || s.lastActive == 0 {
			s.prevEvents, s.lastActive = ev, nowNanos
		}
		state := audit.BreakerState(s.breaker.Load())
		byState[state]++
		switch {
		case s.member.Load():
		case nowNanos-s.lastActive >= int64(forgetAfter) && state == audit.BreakerClosed:
			idle = append(idle, s)
		case s.score > 0 && eligible(s.key):
			cands.offer(s)
		}
	})
	for _, s := range idle {
		c.hosts.DeleteIf(s.key, s, func(*hostStats) bool { return true })
	}
	demoted := c.rebalance(cands.best())
	return c.metricsLocked(in, byState, demoted)
}

// eligible reports whether a host may have series of its own.
func eligible(host string) bool {
	return host != "" && host != OtherHost && utf8.ValidString(host)
}

// better orders hosts by activity, then by key so that ties are settled the same way every time.
func better(a, b *hostStats) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.key < b.key
}

// candidates keeps the limit best hosts offered, in a min-heap (the worst on top).
type candidates struct {
	limit int
	h     []*hostStats
}

func (c *candidates) Len() int           { return len(c.h) }
func (c *candidates) Less(i, j int) bool { return better(c.h[j], c.h[i]) }
func (c *candidates) Swap(i, j int)      { c.h[i], c.h[j] = c.h[j], c.h[i] }
func (c *candidates) Push(x any)         { c.h = append(c.h, x.(*hostStats)) }
func (c *candidates) Pop() any {
	s := c.h[len(c.h)-1]
	c.h = c.h[:len(c.h)-1]
	return s
}

func (c *candidates) offer(s *hostStats) {
	switch {
	case c.limit <= 0:
	case len(c.h) < c.limit:
		heap.Push(c, s)
	case better(s, c.h[0]):
		c.h[0] = s
		heap.Fix(c, 0)
	}
}

// best returns the candidates, best first.
func (c *candidates) best() []*hostStats {
	slices.SortFunc(c.h, func(a, b *hostStats) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return c.h
}

// rebalance gives series of their own to the best candidates: to fill free places, then in place of
// a labelled host whose score is less than 1/hysteresis of theirs. It returns the hosts that lost
// their place: their counters are exported one last time, so that no increase goes unseen.
func (c *Collector) rebalance(cands []*hostStats) (demoted []*hostStats) {
	i := 0
	for ; len(c.members) < c.topHosts && i < len(cands); i++ {
		cands[i].member.Store(true)
		c.members = append(c.members, cands[i])
	}
	// The weakest labelled hosts first.
	slices.SortFunc(c.members, func(a, b *hostStats) int {
		if better(b, a) {
			return -1
		}
		return 1
	})
	for j := 0; i < len(cands) && j < len(c.members) && cands[i].score > hysteresis*c.members[j].score; i, j = i+1, j+1 {
		c.members[j].member.Store(false)
		demoted = append(demoted, c.members[j])
		cands[i].member.Store(true)
		c.members[j] = cands[i]
	}
	slices.SortFunc(c.members, func(a, b *hostStats) int { return strings.Compare(a.key, b.key) })
	return demoted
}

// metricsLocked builds the metrics of the labelled hosts, of the hosts that just lost their place
// (counters only) and of "other".
func (c *Collector) metricsLocked(in scrapeInput, observedStates [numStates]int, demoted []*hostStats) []prometheus.Metric {
	var out []prometheus.Metric
	add := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, t, v, labels...))
	}
	counters := func(s *hostStats, host string, zeros bool) {
		add(descDepartures, prometheus.CounterValue, float64(s.departures.Load()), host)
		add(descWaited, prometheus.CounterValue, seconds(s.waitNanos.Load()), host)
		for t := range s.refusals {
			if v := s.refusals[t].Load(); v > 0 || (zeros && t != trigOther) {
				add(descRefusals, prometheus.CounterValue, float64(v), host, triggerNames[t])
			}
		}
		add(descRetryWaits, prometheus.CounterValue, float64(s.retryWaits.Load()), host)
		add(descRetrySeconds, prometheus.CounterValue, seconds(s.retryNanos.Load()), host)
		for st := range s.transitions {
			if v := s.transitions[st].Load(); v > 0 || zeros {
				add(descTransitions, prometheus.CounterValue, float64(v), host, stateNames[st])
			}
		}
	}
	members := make(map[string]*hostStats, len(c.members))
	for _, s := range c.members {
		members[s.key] = s
		counters(s, s.key, false)
	}
	for _, s := range demoted {
		counters(s, s.key, false)
	}
	counters(&c.other, OtherHost, true)

	byState := observedStates
	reported := make(map[string]bool, len(c.members)) // members the pacer reported
	if in.watched {
		byState = [numStates]int{}
		var otherDelay time.Duration
		others, otherInFlight := 0, 0
		for i := range in.statuses {
			h := &in.statuses[i]
			if h.Breaker >= 0 && int(h.Breaker) < numStates {
				byState[h.Breaker]++
			}
			if members[h.Host] == nil || reported[h.Host] {
				others++
				otherDelay = max(otherDelay, h.Interval)
				otherInFlight += h.InFlight
				continue
			}
			reported[h.Host] = true
			add(descDelay, prometheus.GaugeValue, h.Interval.Seconds(), h.Host)
			add(descInFlight, prometheus.GaugeValue, float64(h.InFlight), h.Host)
			add(descBreakerState, prometheus.GaugeValue, float64(h.Breaker), h.Host)
		}
		if others > 0 {
			add(descDelay, prometheus.GaugeValue, otherDelay.Seconds(), OtherHost)
		}
		add(descInFlight, prometheus.GaugeValue, float64(otherInFlight), OtherHost)
		add(descHosts, prometheus.GaugeValue, float64(len(in.statuses)))
	}
	for _, s := range c.members {
		if !reported[s.key] { // not watched, or no longer in the pacer's memory
			add(descBreakerState, prometheus.GaugeValue, float64(s.breaker.Load()), s.key)
		}
	}
	for st, n := range byState {
		add(descBreakerHosts, prometheus.GaugeValue, float64(n), stateNames[st])
	}

	if in.queued {
		depth := make(map[string]int, len(c.members))
		other := 0
		for host, d := range in.depths {
			if members[host] != nil {
				depth[host] = d
			} else {
				other += d
			}
		}
		for _, s := range c.members {
			add(descQueueDepth, prometheus.GaugeValue, float64(depth[s.key]), s.key)
		}
		add(descQueueDepth, prometheus.GaugeValue, float64(other), OtherHost)
	}
	return out
}

func seconds(nanos int64) float64 {
	return time.Duration(nanos).Seconds()
}
