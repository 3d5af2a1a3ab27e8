package ext

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/collypace/ext/audit"
	"github.com/rs/zerolog"
)

// Defaults of the options. Each is documented in the README's option table.
const (
	DefaultBaseDelay         = 1 * time.Second
	DefaultMaxDelay          = 60 * time.Second
	DefaultJitter            = 0.1
	DefaultMaxInFlight       = 8 // Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN: keeps a 4 s host on a 1 s interval
	DefaultMaxRetries        = 3
	DefaultRetryAfterBuffer  = 0.10
	defaultMaxRetryAfter     = 10 * time.Minute
	defaultMaxCrawlDelay     = 60 * time.Second
	defaultRobotsTTL         = 24 * time.Hour
	defaultRobotsRetryDelay  = 5 * time.Minute
	defaultStackedDelayAlarm = 100 * time.Millisecond
	// maxRateLimitReset is the longest rate-limit reset obeyed (GitHub's windows are an hour);
	// a later one is ignored as invalid, or the Retry-After maximum if that is longer.
	maxRateLimitReset = time.Hour
)

// ErrInvalidOption is wrapped by the errors NewPacerErr returns for option values it cannot use.
var ErrInvalidOption = errors.New("ext: invalid option")

// robotsUnreachableLimit is how long the pages of a host whose robots.txt cannot be read (5xx, 429,
// network error, timeout), and was never read, wait before its breaker opens (robots_unreachable)
// and they are deferred; from then on the breaker's policy decides. Meanwhile robots.txt is asked
// again after 1 s, doubling up to defaultRobotsRetryDelay.
const robotsUnreachableLimit = 30 * time.Minute

// Option configures a Pacer, in the style of colly.CollectorOption.
//
// Invalid values follow one rule, for every option (and the Queue's): an option never panics and
// never clamps silently; a value it cannot use (a negative duration or count, a fraction outside
// [0, 1] or NaN, a malformed host pattern, a nil function, transport or observer) is set aside and the
// setting keeps the value in force: its default, or a valid value given before it (a valid value given
// after it wins). NewPacerErr then returns every such value as an error wrapping
// ErrInvalidOption and no Pacer. NewPacer and AdaptivePacing, which have no error result, build the
// Pacer with the defaults in their place and report each value at construction: an option_invalid
// audit event at error level and a call of the WithAlert function (wherever WithAlert stands among the
// options), saying what applies instead. Each option's comment says which values are valid. A base
// delay above the max delay is reported the same way (the max delay is raised to it: the floor wins).
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
	auditQuery       bool      // audit events keep URL queries
	storeCredentials bool      // deferred and spilled requests keep their credentials in the store
	auditWriter      io.Writer // WithAuditWriter: the trail's writer, watched for failures (nil: the logger alone)
	invalid          []error   // option values set aside (see Option)
	// given is, for each option given a valid value, that value as written: it applies in place of a
	// later invalid one, which says so.
	given map[string]string
}

// invalidOption is an option value set aside, and what applies in its place.
type invalidOption struct {
	err     error
	option  string
	applies string // what applies instead: an earlier or later valid value, or the default ("": the default)
}

func (e *invalidOption) Error() string { return e.err.Error() }
func (e *invalidOption) Unwrap() error { return e.err }

// reject sets aside an option value that cannot be used (see Option). What applies instead is the
// value of the same option given before it, if any; otherwise fallback ("": the default).
func (c *config) reject(option string, value any, why, fallback string) {
	e := &invalidOption{err: fmt.Errorf("%w: %s(%v): %s", ErrInvalidOption, option, value, why), option: option, applies: fallback}
	if v, ok := c.given[option]; ok {
		e.applies = fmt.Sprintf("%s(%s), given before it, applies", option, v)
	}
	c.invalid = append(c.invalid, e)
}

// accept records a valid value of option, shown as written: it is the one that applies in place of an
// invalid value given before it, or after it (see reject).
func (c *config) accept(option, shown string) {
	if c.given == nil {
		c.given = make(map[string]string)
	}
	c.given[option] = shown
	for _, err := range c.invalid {
		if e, ok := err.(*invalidOption); ok && e.option == option {
			e.applies = fmt.Sprintf("%s(%s), given after it, applies", option, shown)
		}
	}
}

// setValid sets *dst to v when ok, and otherwise sets v aside as invalid, keeping the value in force:
// the default, or a valid value given before (see Option). A valid value given after an invalid one of
// the same option is the one that applies.
func setValid[T any](c *config, option string, v T, ok bool, why string, dst *T) {
	if !ok {
		c.reject(option, v, why, fmt.Sprintf("the default %v applies", *dst))
		return
	}
	*dst = v
	c.accept(option, fmt.Sprint(v))
}

// checkConsistency rejects settings that are valid alone but not together, after every option has been
// applied: a base delay above the max delay (the max delay is raised to it, the floor wins), globally
// or in a host policy.
func (c *config) checkConsistency() {
	if c.baseDelay > c.maxDelay {
		c.invalid = append(c.invalid, &invalidOption{option: "WithMaxDelay", applies: fmt.Sprintf("the max delay is raised to %v: the floor wins", c.baseDelay),
			err: fmt.Errorf("%w: WithBaseDelay(%v) above WithMaxDelay(%v)", ErrInvalidOption, c.baseDelay, c.maxDelay)})
	}
	for _, r := range c.policies {
		base, ceiling := cmp.Or(r.policy.BaseDelay, c.baseDelay), cmp.Or(r.policy.MaxDelay, c.maxDelay)
		if base > ceiling {
			c.invalid = append(c.invalid, &invalidOption{option: "WithHostPolicy", applies: fmt.Sprintf("its max delay is raised to %v: the floor wins", base),
				err: fmt.Errorf("%w: WithHostPolicy(%q): base delay %v above max delay %v", ErrInvalidOption, r.pattern, base, ceiling)})
		}
	}
}

// fraction reports whether f is in [0, 1] (NaN is not).
func fraction(f float64) bool { return f >= 0 && f <= 1 }

// NewPacerErr is NewPacer reporting invalid option values as an error (see Option) instead of
// building the Pacer with defaults in their place.
func NewPacerErr(opts ...Option) (*Pacer, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.checkConsistency()
	if err := errors.Join(cfg.invalid...); err != nil {
		return nil, err
	}
	return NewPacer(opts...), nil
}

// reportInvalidOptions audits and alerts each option value NewPacer set aside.
func (p *Pacer) reportInvalidOptions() {
	p.reportInvalid(p.cfg.invalid)
	if s, ok := p.cfg.store.(interface{ InvalidOptions() []error }); ok { // a store's own options (redisstore.New)
		p.reportInvalid(s.InvalidOptions())
	}
}

// reportInvalid audits and alerts each option value set aside (see Option).
func (p *Pacer) reportInvalid(invalid []error) {
	now := p.now()
	for _, err := range invalid {
		detail := err.Error() + "; the default applies"
		if e, ok := err.(*invalidOption); ok && e.applies != "" {
			detail = err.Error() + "; " + e.applies
		}
		p.audit.emit(zerolog.ErrorLevel, auditEvent{at: now, event: audit.EventOptionInvalid, trigger: audit.TriggerOption, compliant: true, detail: detail})
		p.alert(Alert{At: now, Event: audit.EventOptionInvalid, Detail: detail})
	}
}

func defaultConfig() config {
	return config{
		baseDelay:        DefaultBaseDelay,
		maxDelay:         DefaultMaxDelay,
		jitter:           DefaultJitter,
		maxInFlight:      DefaultMaxInFlight,
		maxRetries:       DefaultMaxRetries,
		retryAfterBuffer: DefaultRetryAfterBuffer,
		maxRetryAfter:    defaultMaxRetryAfter,
		maxCrawlDelay:    defaultMaxCrawlDelay,
		robots:           true,
		robotsTTL:        defaultRobotsTTL,
		robotsRetry:      defaultRobotsRetryDelay,
		logger:           zerolog.Nop(),
		hostKey:          DefaultHostKey,
		transport:        http.DefaultTransport,
		random:           rand.Float64,
		flushInterval:    defaultFlushInterval,
		idleEviction:     defaultIdleEviction,
		observer:         nopObserver{},
		breaker: BreakerPolicy{
			Threshold: defaultBreakerThreshold, Sustain: defaultBreakerSustain,
			Failures: defaultBreakerFailures, Cooldown: defaultBreakerCooldown,
		},
	}
}

// WithBaseDelay sets the floor of every host's interval (default 1 s; 0 is valid, negative is not).
func WithBaseDelay(d time.Duration) Option {
	return func(c *config) { setValid(c, "WithBaseDelay", d, d >= 0, "negative", &c.baseDelay) }
}

// WithMaxDelay sets the ceiling of the adaptive delay (default 60 s: above the breaker's 45 s threshold). The interval can still be longer
// when a host publishes a longer Crawl-delay or rate limit, or sends Retry-After. It must be positive.
func WithMaxDelay(d time.Duration) Option {
	return func(c *config) { setValid(c, "WithMaxDelay", d, d > 0, "not positive", &c.maxDelay) }
}

// WithJitter adds a random extra of up to fraction × interval to each interval (default 0.1; 0 turns it off).
// Jitter only lengthens an interval, never shortens it. The fraction must be in [0, 1].
func WithJitter(f float64) Option {
	return func(c *config) { setValid(c, "WithJitter", f, fraction(f), "not in [0, 1]", &c.jitter) }
}

// WithMaxInFlight caps the requests in flight to one host (default 8). It must be positive.
func WithMaxInFlight(n int) Option {
	return func(c *config) { setValid(c, "WithMaxInFlight", n, n > 0, "not positive", &c.maxInFlight) }
}

// WithMaxRetries sets how many times a refused request is retried after the host's window (default 3;
// 0 disables; negative is invalid).
func WithMaxRetries(n int) Option {
	return func(c *config) { setValid(c, "WithMaxRetries", n, n >= 0, "negative", &c.maxRetries) }
}

// WithRetryAfterBuffer sets the safety margin added to a Retry-After wait, as a fraction of it in
// [0, 1] (default 0.10).
func WithRetryAfterBuffer(f float64) Option {
	return func(c *config) {
		setValid(c, "WithRetryAfterBuffer", f, fraction(f), "not in [0, 1]", &c.retryAfterBuffer)
	}
}

// WithMaxRetryAfter sets the longest Retry-After obeyed as a hold (default 10 min). A longer one parks
// the host (its breaker open, its requests deferred) until the time it announced, with the buffer:
// a longer value never gets a shorter wait. With BreakerPolicy.IgnoreCaps it is held for this maximum
// instead, audited as not fully honoured. It must be positive.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) { setValid(c, "WithMaxRetryAfter", d, d > 0, "not positive", &c.maxRetryAfter) }
}

// WithMaxCrawlDelay sets the longest robots.txt Crawl-delay the crawl accepts (default 60 s). A host
// whose Crawl-delay is longer is parked: its breaker opens (crawl_delay_above_cap, an alert) and its
// requests are deferred, none lost, until robots.txt is read again, as Nutch skips such hosts. With
// BreakerPolicy.IgnoreCaps it is crawled at this maximum instead, audited with compliance_flag=false.
// It must be positive.
func WithMaxCrawlDelay(d time.Duration) Option {
	return func(c *config) { setValid(c, "WithMaxCrawlDelay", d, d > 0, "not positive", &c.maxCrawlDelay) }
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
// is; wrap others in zerolog.SyncWriter). The pacer cannot see this Logger's write failures: for a
// trail that must be complete, give its writer with WithAuditWriter, which raises an alert when a write
// fails. The last of WithLogger and WithAuditWriter wins.
func WithLogger(l zerolog.Logger) Option {
	return func(c *config) { c.logger, c.auditWriter = l, nil }
}

// WithPipelineID sets the pipeline_id field of every audit event.
func WithPipelineID(id string) Option {
	return func(c *config) { c.pipelineID = id }
}

// WithHostPolicy overrides pacing for the hosts that pattern matches. The first matching policy wins.
//
// A pattern has path.Match syntax ("*" matches any run of characters but no "/", "[…]" is a class,
// a backslash escapes). It is matched against the host key (see WithHostKey; by default the host, lowercase,
// with its port unless it is the scheme's default) and, when the key has a port, against the host
// name without it: "127.0.0.1" or "*.example.com" matches on every port, "api.example.com:8443" on
// that one only. An IPv6 literal is written with escaped brackets: `\[::1\]`. A malformed or empty
// pattern, or a negative field of p, is invalid (see Option): the policy is not added.
func WithHostPolicy(pattern string, p HostPolicy) Option {
	return func(c *config) {
		if _, err := path.Match(pattern, ""); err != nil || pattern == "" {
			c.reject("WithHostPolicy", strconv.Quote(pattern), "malformed pattern (path.Match syntax)", "the policy is not added")
			return
		}
		if p.BaseDelay < 0 || p.MaxDelay < 0 || p.MaxInFlight < 0 {
			c.reject("WithHostPolicy", strconv.Quote(pattern), fmt.Sprintf("negative field in %+v", p), "the policy is not added")
			return
		}
		c.policies = append(c.policies, hostPolicyRule{pattern: pattern, policy: p})
	}
}

// WithHostKey sets how a URL maps to the host whose schedule it shares. The default, DefaultHostKey,
// is URL.Host (with the port), as Colly's LimitRule matches, normalized so that every spelling of a
// host shares one schedule. A function returning the registrable domain paces all subdomains together.
// The function must not be nil.
func WithHostKey(f func(*url.URL) string) Option {
	return func(c *config) {
		if f == nil {
			c.reject("WithHostKey", "nil", "no function", "")
			return
		}
		c.hostKey = f
		c.accept("WithHostKey", "a function")
	}
}

// WithAuditQuery keeps the query of request URLs in audit events. By default it is dropped, with the
// userinfo and fragment: queries often carry session IDs and tokens.
func WithAuditQuery() Option {
	return func(c *config) { c.auditQuery = true }
}

// WithTransport sets the RoundTripper the pacer wraps (default http.DefaultTransport). Use it instead of
// Collector.WithTransport, which would replace the pacer's transport. It must not be nil. Whatever its
// type, robots.txt's 10 s timeout counts each hop's network time from its departure, never its wait in
// the pacer.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *config) {
		if rt == nil {
			c.reject("WithTransport", "nil", "no RoundTripper", "")
			return
		}
		c.transport = rt
		c.accept("WithTransport", fmt.Sprintf("%T", rt))
	}
}

// WithStore keeps per-host state and deferred requests in s, so they survive a restart (sqlitestore)
// or are shared by a fleet of crawlers (redisstore). Call Pacer.Close before exiting to write what is
// still pending; the store itself stays open (it is yours to close). A nil s keeps state in memory.
// A store that is a Frontier (redisstore) also makes every Queue of the pacer a member of the fleet's
// shared frontier; WithStore(struct{ SharedStore }{st}) shares the schedule without it (see NewQueue).
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
// Retry-After windows and breaker transitions are written at once, whatever the interval. It must be
// positive.
func WithFlushInterval(d time.Duration) Option {
	return func(c *config) { setValid(c, "WithFlushInterval", d, d > 0, "not positive", &c.flushInterval) }
}

// WithBreaker sets when a host's circuit breaker trips and how long it stays open. Zero fields keep
// the defaults (an adaptive delay of 45 s for 2 min, 10 consecutive refusals, 5 min cool-down);
// Failures < 0 disables the failure count. A negative Threshold, Sustain or Cooldown is invalid (see
// Option): the whole policy is set aside.
func WithBreaker(b BreakerPolicy) Option {
	return func(c *config) {
		if b.Threshold < 0 || b.Sustain < 0 || b.Cooldown < 0 {
			c.reject("WithBreaker", fmt.Sprintf("%+v", b), "negative duration", "")
			return
		}
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
		c.accept("WithBreaker", fmt.Sprintf("%+v", b))
	}
}

// WithAlert registers a function called when a host's breaker opens, the store fails, or an option
// value is invalid (at construction; see Option). It runs on the goroutine that saw the event, with no
// lock held; keep it short. nil registers none.
func WithAlert(f func(Alert)) Option {
	return func(c *config) { c.alert = f }
}

// withRandom injects the jitter source (tests).
func withRandom(f func() float64) Option {
	return func(c *config) { c.random = f }
}

// maxRateLimitReset is the longest rate-limit reset obeyed.
func (c *config) maxRateLimitReset() time.Duration {
	return max(maxRateLimitReset, c.maxRetryAfter)
}

// maxHold is the longest hold any response can set: a Retry-After with its buffer, or a rate-limit
// reset. It saturates at the largest Duration.
func (c *config) maxHold() time.Duration {
	return max(retryAfterHold(c.maxRetryAfter, c.retryAfterBuffer), c.maxRateLimitReset())
}

// policyFor resolves the policy of a host key: pacer-wide values overridden by the first matching rule.
func (c *config) policyFor(key string) HostPolicy {
	p := HostPolicy{BaseDelay: c.baseDelay, MaxDelay: c.maxDelay, MaxInFlight: c.maxInFlight}
	name := hostName(key)
	for _, r := range c.policies {
		if ok, _ := path.Match(r.pattern, key); !ok {
			if ok, _ = path.Match(r.pattern, name); !ok || name == key {
				continue
			}
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

// hostName returns a host key without its port ("example.com:8080" → "example.com", "[::1]:8080" →
// "[::1]"), or the key itself when it has none or is not host:port (a custom WithHostKey).
func hostName(key string) string {
	host, _, err := net.SplitHostPort(key)
	if err != nil || host == "" {
		return key
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}
