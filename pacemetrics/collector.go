package pacemetrics

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/collypace/ext"
	"github.com/collypace/ext/audit"
	"github.com/collypace/ext/internal/shardmap"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OtherHost is the host label of the series that aggregate every host without series of its own.
// A host whose key is "other" never gets series of its own.
const OtherHost = "other"

// DefaultTopHosts is how many hosts get series of their own unless WithTopHosts says otherwise.
const DefaultTopHosts = 50

// Tuning of the top-N selection, documented in the package doc.
const (
	activityHalfLife = 5 * time.Minute  // half-life of a host's activity score (its departures)
	hysteresis       = 2.0              // a host displaces a labelled one only with this many times its score
	forgetAfter      = 30 * time.Minute // unlabelled hosts without events this long leave memory
)

// waitBuckets are the upper bounds, in seconds, of the collypace_departure_wait_seconds histogram.
var waitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// HostSource is what Watch reads at scrape time; *ext.Pacer implements it.
type HostSource interface {
	Hosts() []ext.HostSnapshot
}

// QueueDepths is what WatchQueue reads at scrape time: the number of requests queued per host.
// The host-aware *ext.Queue implements it.
type QueueDepths interface {
	Depths() map[string]int
}

// Option configures a Collector.
type Option func(*config)

type config struct {
	topHosts int
	invalid  []invalidOption // values set aside: the default is used (see New)
}

// invalidOption is an option value New set aside.
type invalidOption struct {
	option string
	err    error
}

// WithTopHosts sets how many of the most active hosts get series of their own (default 50); the
// others are aggregated under host="other". 0 keeps every host under "other"; a negative n is invalid
// (see New).
func WithTopHosts(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.invalid = append(c.invalid, invalidOption{"WithTopHosts",
				fmt.Errorf("%w: pacemetrics.WithTopHosts(%d): negative", ext.ErrInvalidOption, n)})
			return
		}
		c.topHosts = n
	}
}

// Collector counts a pacer's events and exports them, with the pacer's and the queue's state read at
// scrape time, as Prometheus metrics (see the package doc). It is an ext.Observer to pass to
// ext.WithObserver and a prometheus.Collector to register. It is safe for concurrent use.
type Collector struct {
	invalid  []invalidOption // exported as collypace_option_invalid
	topHosts int
	now      func() time.Time // test seam
	hosts    shardmap.Map[*hostStats]
	other    hostStats // events of hosts without series of their own, at the time of the event
	wait     prometheus.Histogram
	fleet    fleetFigures // fleet members' figures (FleetChanged)

	mu         sync.Mutex // protects the fields below and the scrape fields of every hostStats
	source     HostSource
	queue      QueueDepths
	members    []*hostStats // the hosts with series of their own
	lastScrape time.Time
}

var (
	_ ext.Observer         = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
	_ HostSource           = (*ext.Pacer)(nil)
)

// New returns a Collector. Pass it to ext.WithObserver, call Watch with the pacer, and register it
// (or serve Handler). An invalid option value (README "Invalid values") never panics and is never
// clamped: New uses the default in its place and exports it as collypace_option_invalid{option} = 1,
// so that it shows (and can be alerted on) where the metrics are read; NewErr returns it as an error.
func New(opts ...Option) *Collector {
	cfg := config{topHosts: DefaultTopHosts}
	for _, o := range opts {
		o(&cfg)
	}
	return newCollector(cfg)
}

// NewErr is New reporting invalid option values as an error wrapping ext.ErrInvalidOption, and no
// Collector, instead of using the defaults in their place.
func NewErr(opts ...Option) (*Collector, error) {
	cfg := config{topHosts: DefaultTopHosts}
	for _, o := range opts {
		o(&cfg)
	}
	errs := make([]error, len(cfg.invalid))
	for i, inv := range cfg.invalid {
		errs[i] = inv.err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return newCollector(cfg), nil
}

func newCollector(cfg config) *Collector {
	c := &Collector{
		invalid:  cfg.invalid,
		topHosts: cfg.topHosts,
		now:      time.Now,
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "departure_wait_seconds",
			Help:      "Time a request waited for its in-flight slot and departure slot before departing (all hosts).",
			Buckets:   waitBuckets,
		}),
	}
	c.hosts.Init()
	c.other.key = OtherHost
	return c
}

// Watch makes the Collector read p's hosts at every scrape, for the per-host delay, requests in
// flight and breaker state. It replaces any previous Watch.
func (c *Collector) Watch(p HostSource) {
	c.mu.Lock()
	c.source = p
	c.mu.Unlock()
}

// WatchQueue makes the Collector read q's depths at every scrape, for collypace_queue_depth. It
// replaces any previous WatchQueue.
func (c *Collector) WatchQueue(q QueueDepths) {
	c.mu.Lock()
	c.queue = q
	c.mu.Unlock()
}

// Handler returns an http.Handler serving the Collector's metrics (and only them) in the Prometheus
// exposition formats, from a registry of its own: for a /metrics endpoint. Serve it or register the
// Collector elsewhere, not both: every scrape re-ranks the top N, and one scraper would miss the
// last values of the hosts that lose their place in another's scrapes.
func (c *Collector) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// Departed implements ext.Observer.
func (c *Collector) Departed(host string, waited time.Duration) {
	waited = max(waited, 0)
	s := c.stats(host)
	s.departures.Add(1)
	s.waitNanos.Add(int64(waited))
	if !s.member.Load() {
		c.other.departures.Add(1)
		c.other.waitNanos.Add(int64(waited))
	}
	c.wait.Observe(waited.Seconds())
}

// Refused implements ext.Observer.
func (c *Collector) Refused(host string, trigger audit.Trigger) {
	t := triggerIndex(trigger)
	s := c.stats(host)
	s.refusals[t].Add(1)
	if !s.member.Load() {
		c.other.refusals[t].Add(1)
	}
}

// RetryAfter implements ext.Observer.
func (c *Collector) RetryAfter(host string, wait time.Duration) {
	wait = max(wait, 0)
	s := c.stats(host)
	s.retryWaits.Add(1)
	s.retryNanos.Add(int64(wait))
	if !s.member.Load() {
		c.other.retryWaits.Add(1)
		c.other.retryNanos.Add(int64(wait))
	}
}

// BreakerChanged implements ext.Observer.
func (c *Collector) BreakerChanged(host string, state audit.BreakerState) {
	if state < 0 || int(state) >= numStates {
		return
	}
	s := c.stats(host)
	s.breaker.Store(int32(state))
	s.transitions[state].Add(1)
	if !s.member.Load() {
		c.other.transitions[state].Add(1)
	}
}

// stats returns the counters of host, creating them on first use.
func (c *Collector) stats(host string) *hostStats {
	s, created := c.hosts.LoadOrCreate(host, func() *hostStats { return &hostStats{key: host} })
	if created && eligible(host) {
		c.admit(s)
	}
	return s
}

// admit gives a new host a place of its own at once while places are free, so that its first events
// are its own rather than counted under "other" until the next scrape. It runs once per host.
func (c *Collector) admit(s *hostStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.members) >= c.topHosts || s.member.Load() {
		return
	}
	i, _ := slices.BinarySearchFunc(c.members, s.key, func(m *hostStats, key string) int { return strings.Compare(m.key, key) })
	c.members = slices.Insert(c.members, i, s)
	s.member.Store(true)
}
