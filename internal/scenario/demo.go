package scenario

import "time"

// DemoBaseDelay is the base delay (interval floor) the demo site is sized for.
const DemoBaseDelay = 300 * time.Millisecond

// Site is a set of running hosts.
type Site struct {
	Hosts []*Host
}

// StartSite starts one host per config. On error it closes the hosts already started.
func StartSite(cfgs []HostConfig) (*Site, error) {
	s := &Site{}
	for _, cfg := range cfgs {
		h, err := Start(cfg)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Hosts = append(s.Hosts, h)
	}
	return s, nil
}

// Close closes every host.
func (s *Site) Close() {
	for _, h := range s.Hosts {
		h.Close()
	}
}

// Host returns the host named name, or nil.
func (s *Site) Host(name string) *Host {
	for _, h := range s.Hosts {
		if h.Name() == name {
			return h
		}
	}
	return nil
}

// DemoSite starts the example crawler's demo site: the hosts of DemoConfigs.
func DemoSite() (*Site, error) {
	return StartSite(DemoConfigs())
}

// DemoConfigs returns the demo site's hosts, each with one character. The arithmetic below assumes
// a pacer with DemoBaseDelay (300 ms) and jitter 0.1, so a mean interval of about 315 ms; the hosts
// are crawled side by side, so the crawl takes as long as the slowest host, about a minute:
//
//	fast         30 pages, 10 ms          30 × 0.315 s                             ≈ 10 s
//	slow         20 pages, 2 s each       ~6 in flight, 4 tree levels: ≈ 4 × 2 s + 7 × 0.315 s ≈ 9–11 s
//	capacity     30 pages, bucket 2/s burst 2, 429 + Retry-After 2 s as an HTTP-date from a clock
//	             1 h fast                 30 / ~1.7 per s + a few 2.2–3 s pauses   ≈ 25–30 s
//	crawl-delay  25 pages, robots.txt Crawl-delay: 2       24 × 2.0–2.2 s          ≈ 50–53 s
//	quota        30 pages, X-RateLimit 10 per 10 s, enforced (429 + Retry-After)
//	                                      30 pages at 1 per s                      ≈ 30 s
//	outage       25 pages, 503s without Retry-After from 3 s to 13 s after its first request
//	             ≈ 9 pages before, ~5 refusals while the delay doubles, 16 after   ≈ 30–40 s
//
// A static LimitRule{Delay: 300ms} would take 20 × 2.3 s ≈ 46 s on the slow host alone and keep
// hitting the capacity, the quota and the outage.
func DemoConfigs() []HostConfig {
	return []HostConfig{
		{Name: "fast", Pages: 30, Latency: 10 * time.Millisecond},
		{Name: "slow", Pages: 20, Latency: 2 * time.Second},
		{
			Name: "capacity", Pages: 30, Latency: 20 * time.Millisecond,
			Capacity:  &Capacity{Rate: 2, Burst: 2, RetryAfter: 2 * time.Second},
			ClockSkew: time.Hour, RetryAfterDate: true,
		},
		{Name: "crawl-delay", Pages: 25, Latency: 20 * time.Millisecond, Robots: "User-agent: *\nCrawl-delay: 2\n"},
		{
			Name: "quota", Pages: 30, Latency: 20 * time.Millisecond,
			RateLimit: &RateLimit{Limit: 10, Window: 10 * time.Second, Enforce: true},
		},
		{
			Name: "outage", Pages: 25, Latency: 50 * time.Millisecond,
			Refusals: []Refusal{Outage(3*time.Second, 10*time.Second, 0)},
		},
	}
}
