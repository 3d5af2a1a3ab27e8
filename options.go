package ext

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/rs/zerolog"
)

// Defaults of the options. Each is documented in the README's option table.
const (
	DefaultBaseDelay         = 1 * time.Second
	DefaultMaxDelay          = 30 * time.Second
	DefaultJitter            = 0.1
	DefaultMaxInFlight       = 8 // Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN: keeps a 4 s host on a 1 s interval
	DefaultMaxRetries        = 3
	DefaultRetryAfterBuffer  = 0.10
	DefaultMaxRetryAfter     = 10 * time.Minute
	DefaultMaxCrawlDelay     = 60 * time.Second
	DefaultRobotsTTL         = 24 * time.Hour
	DefaultRobotsRetryDelay  = 5 * time.Minute
	DefaultStackedDelayAlarm = 100 * time.Millisecond
	// MaxRateLimitReset is the longest rate-limit reset obeyed (GitHub's windows are an hour);
	// a later one is ignored as invalid, or the Retry-After maximum if that is longer.
	MaxRateLimitReset = time.Hour
)

// Option configures a Pacer, in the style of colly.CollectorOption.
type Option func(*config)

// HostPolicy overrides the pacing of the hosts matching a pattern (see WithHostPolicy).
// Zero fields keep the pacer-wide value.
type HostPolicy struct {
	// BaseDelay is the floor of the interval for these hosts, such as the cap a site's terms of service set.
	BaseDelay time.Duration
	// MaxDelay is the ceiling of the adaptive delay for these hosts.
	MaxDelay time.Duration
	// MaxInFlight caps the requests in flight to each of these hosts.
	MaxInFlight int
}

type hostPolicyRule struct {
	pattern string
	policy  HostPolicy
}

// config is the resolved set of options. It is immutable once the Pacer is built.
type config struct {
	baseDelay        time.Duration
	maxDelay         time.Duration
	jitter           float64
	maxInFlight      int
	maxRetries       int
	retryAfterBuffer float64
	maxRetryAfter    time.Duration
	maxCrawlDelay    time.Duration
	robots           bool
	robotsAgent      string
	robotsTTL        time.Duration
	robotsRetry      time.Duration
	logger           zerolog.Logger
	pipelineID       string
	policies         []hostPolicyRule
	hostKey          func(*url.URL) string
	transport        http.RoundTripper
	random           func() float64 // in [0, 1); injected so jitter is testable
	store            Store          // durable or shared state; nil: in memory only
	flushInterval    time.Duration
	breaker          BreakerPolicy
	alert            func(Alert)
	idleEviction     time.Duration
	observer         Observer
	storeCredentials bool // deferred and spilled requests keep their credentials in the store
}

func defaultConfig() config {
	return config{
		baseDelay:        DefaultBaseDelay,
		maxDelay:         DefaultMaxDelay,
		jitter:           DefaultJitter,
		maxInFlight:      DefaultMaxInFlight,
		maxRetries:       DefaultMaxRetries,
		retryAfterBuffer: DefaultRetryAfterBuffer,
		maxRetryAfter:    DefaultMaxRetryAfter,
		maxCrawlDelay:    DefaultMaxCrawlDelay,
		robots:           true,
		robotsTTL:        DefaultRobotsTTL,
		robotsRetry:      DefaultRobotsRetryDelay,
		logger:           zerolog.Nop(),
		hostKey:          DefaultHostKey,
		transport:        http.DefaultTransport,
		random:           rand.Float64,
		flushInterval:    DefaultFlushInterval,
		idleEviction:     DefaultIdleEviction,
		observer:         nopObserver{},
		breaker: BreakerPolicy{
			Threshold: DefaultBreakerThreshold, Sustain: DefaultBreakerSustain,
			Failures: DefaultBreakerFailures, Cooldown: DefaultBreakerCooldown,
		},
	}
}

// WithBaseDelay sets the floor of every host's interval (default 1 s). Negative values count as 0.
func WithBaseDelay(d time.Duration) Option {
	return func(c *config) { c.baseDelay = max(d, 0) }
}

// WithMaxDelay sets the ceiling of the adaptive delay (default 30 s). The interval can still be longer
// when a host publishes a longer Crawl-delay or rate limit, or sends Retry-After.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxDelay = d
		}
	}
}

// WithJitter adds a random extra of up to fraction × interval to each interval (default 0.1; 0 turns it off).
// Jitter only lengthens an interval, never shortens it.
func WithJitter(fraction float64) Option {
	return func(c *config) {
		if fraction >= 0 && fraction <= 1 {
			c.jitter = fraction
		}
	}
}

// WithMaxInFlight caps the requests in flight to one host (default 8).
func WithMaxInFlight(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxInFlight = n
		}
	}
}

// WithMaxRetries sets how many times a refused request is retried after the host's window (default 3; 0 disables).
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = max(n, 0) }
}

// WithRetryAfterBuffer sets the safety margin added to a Retry-After wait, as a fraction of it (default 0.10).
func WithRetryAfterBuffer(fraction float64) Option {
	return func(c *config) {
		if fraction >= 0 && fraction <= 1 {
			c.retryAfterBuffer = fraction
		}
	}
}

// WithMaxRetryAfter sets the longest Retry-After obeyed as sent (default 10 min). A longer one is audited
// as not fully honoured and the algorithmic backoff applies instead, capped by the maximum delay.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxRetryAfter = d
		}
	}
}

// WithMaxCrawlDelay sets the longest robots.txt Crawl-delay honoured (default 60 s). A longer one is
// clamped to it and audited with compliance_flag=false.
func WithMaxCrawlDelay(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.maxCrawlDelay = d
		}
	}
}

// WithoutRobots turns off reading robots.txt for Crawl-delay.
func WithoutRobots() Option {
	return func(c *config) { c.robots = false }
}

// WithRobotsAgent sets the product token matched against robots.txt groups. By default it is derived
// from the collector's User-Agent ("MyBot/1.0 (+https://…)" → "mybot").
func WithRobotsAgent(token string) Option {
	return func(c *config) { c.robotsAgent = token }
}

// WithLogger sets the audit logger. The zero Logger and zerolog.Nop() are silent (the default).
// Events are written from many goroutines: the writer must be safe for concurrent use (an *os.File
// is; wrap others in zerolog.SyncWriter).
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithPipelineID sets the pipeline_id field of every audit event.
func WithPipelineID(id string) Option {
	return func(c *config) { c.pipelineID = id }
}

// WithHostPolicy overrides pacing for the hosts whose key matches pattern (path.Match syntax,
// such as "*.example.com" or "api.example.com:8443"). The first matching policy wins.
func WithHostPolicy(pattern string, p HostPolicy) Option {
	return func(c *config) { c.policies = append(c.policies, hostPolicyRule{pattern: pattern, policy: p}) }
}

// WithHostKey sets how a URL maps to the host whose schedule it shares. The default, DefaultHostKey,
// is URL.Host (with the port), as Colly's LimitRule matches, normalized so that every spelling of a
// host shares one schedule. A function returning the registrable domain paces all subdomains together.
func WithHostKey(f func(*url.URL) string) Option {
	return func(c *config) {
		if f != nil {
			c.hostKey = f
		}
	}
}

// WithTransport sets the RoundTripper the pacer wraps (default http.DefaultTransport). Use it instead of
// Collector.WithTransport, which would replace the pacer's transport.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) {
		if rt != nil {
			c.transport = rt
		}
	}
}

// WithStore keeps per-host state and deferred requests in s, so they survive a restart (sqlitestore)
// or are shared by a fleet of crawlers (redisstore). Call Pacer.Close before exiting to write what is
// still pending; the store itself stays open (it is yours to close).
func WithStore(s Store) Option {
	return func(c *config) { c.store = s }
}

// WithStoredCredentials sets whether the requests written to the store (deferred by a breaker, or
// spilled by a Queue over its memory bound) keep their credentials: the Authorization,
// Proxy-Authorization and Cookie headers and the URL's userinfo. By default (false) they are left out,
// so a SQLite file or a Redis server never holds them; such a request is sent again without them.
// Every other header, the body and the string values of the request's context are stored as they are.
// Requests kept in memory (without a store, or queued under the memory bound) keep everything.
func WithStoredCredentials(keep bool) Option {
	return func(c *config) { c.storeCredentials = keep }
}

// WithFlushInterval sets how often changed state is written behind to the store (default 1 s).
// Retry-After windows and breaker transitions are written at once, whatever the interval.
func WithFlushInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.flushInterval = d
		}
	}
}

// WithBreaker sets when a host's circuit breaker trips and how long it stays open. Zero fields keep
// the defaults (45 s for 2 min, 10 consecutive refusals, 5 min cool-down); Failures < 0 disables
// the failure count.
func WithBreaker(b BreakerPolicy) Option {
	return func(c *config) {
		if b.Threshold > 0 {
			c.breaker.Threshold = b.Threshold
		}
		if b.Sustain > 0 {
			c.breaker.Sustain = b.Sustain
		}
		if b.Failures != 0 {
			c.breaker.Failures = max(b.Failures, 0)
		}
		if b.Cooldown > 0 {
			c.breaker.Cooldown = b.Cooldown
		}
		c.breaker.IgnoreCaps = b.IgnoreCaps
	}
}

// WithAlert registers a function called when a host's breaker opens or the store fails. It runs on the
// goroutine that saw the event, with no lock held; keep it short.
func WithAlert(f func(Alert)) Option {
	return func(c *config) { c.alert = f }
}

// withRandom injects the jitter source (tests).
func withRandom(f func() float64) Option {
	return func(c *config) { c.random = f }
}

// maxRateLimitReset is the longest rate-limit reset obeyed.
func (c *config) maxRateLimitReset() time.Duration {
	return max(MaxRateLimitReset, c.maxRetryAfter)
}

// maxHold is the longest hold any response can set: a Retry-After with its buffer, or a rate-limit reset.
func (c *config) maxHold() time.Duration {
	return max(time.Duration(float64(c.maxRetryAfter)*(1+c.retryAfterBuffer)), c.maxRateLimitReset())
}

// policyFor resolves the policy of a host key: pacer-wide values overridden by the first matching rule.
func (c *config) policyFor(key string) HostPolicy {
	p := HostPolicy{BaseDelay: c.baseDelay, MaxDelay: c.maxDelay, MaxInFlight: c.maxInFlight}
	for _, r := range c.policies {
		if ok, _ := path.Match(r.pattern, key); !ok {
			continue
		}
		if r.policy.BaseDelay > 0 {
			p.BaseDelay = r.policy.BaseDelay
		}
		if r.policy.MaxDelay > 0 {
			p.MaxDelay = r.policy.MaxDelay
		}
		if r.policy.MaxInFlight > 0 {
			p.MaxInFlight = r.policy.MaxInFlight
		}
		break
	}
	p.MaxDelay = max(p.MaxDelay, p.BaseDelay)
	return p
}
